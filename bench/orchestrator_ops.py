#!/usr/bin/env python3
"""Orchestrator operations per second (issue #4), through its HTTP API on kept-alive
connections, as routers and wharfctl use it:

    orchestrator_ops.py URL COUNT THREADS

registers host bench-h1 (LIDs 1-49151, as a router would), creates tenant bench-ops and
network n (198.18.0.0/16), then times COUNT container creations on bench-h1 (each allocates
an address and a LID of the host's range with compare-and-set), COUNT policy updates and
COUNT deletions, split over THREADS client threads; prints one line per operation:
"create 1234.5 ops/s". Removes what it made (the host's entry lapses with its lease).
Presents the admin token in the file $WHARF_TOKEN_FILE (else the token $WHARF_TOKEN).
"""
import http.client
import json
import os
import socket
import sys
import threading
import time
from urllib.parse import urlparse


def client(url):
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    conn.connect()
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def token():
    path = os.environ.get('WHARF_TOKEN_FILE')
    if path:
        with open(path) as f:
            return f.read().strip()
    return os.environ.get('WHARF_TOKEN', '')


TOKEN = token()


def call(conn, method, path, body=None):
    conn.request(method, path, json.dumps(body) if body is not None else None,
                 {'Content-Type': 'application/json', 'Authorization': 'Bearer ' + TOKEN})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f'{method} {path}: {r.status} {data!r}')
    return data


def timed(url, count, threads, op):
    """Runs op(conn, i) for i in range(count) over `threads` threads; returns ops/s."""
    def worker(k):
        conn = client(url)
        for i in range(k, count, threads):
            op(conn, i)
        conn.close()
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return count / (time.perf_counter() - start)


def main():
    url, count, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    setup = client(url)
    call(setup, 'POST', '/v1/hosts', {'name': 'bench-h1', 'address': '127.0.0.1', 'ttl': 600,
                                      'lid_first': 1, 'lid_last': 49151})
    call(setup, 'POST', '/v1/tenants', {'name': 'bench-ops'})
    call(setup, 'POST', '/v1/tenants/bench-ops/networks', {'name': 'n', 'cidr': '198.18.0.0/16'})
    base = '/v1/tenants/bench-ops/containers'
    rates = {
        'create': timed(url, count, threads, lambda c, i: call(
            c, 'POST', base, {'name': f'c{i}', 'network': 'n', 'host': 'bench-h1'})),
        'policy': timed(url, count, threads, lambda c, i: call(
            c, 'POST', f'{base}/c{i}/policy', {'quota': {'qp': 4 + i}, 'ratelimit': {'rate': 10**9}})),
        'delete': timed(url, count, threads, lambda c, i: call(c, 'DELETE', f'{base}/c{i}')),
    }
    setup = client(url)  # the first one idled past the server's keep-alive
    call(setup, 'DELETE', '/v1/tenants/bench-ops/networks/n')
    call(setup, 'DELETE', '/v1/tenants/bench-ops')
    for name, rate in rates.items():
        print(f'{name} {rate:.1f} ops/s')


if __name__ == '__main__':
    main()
