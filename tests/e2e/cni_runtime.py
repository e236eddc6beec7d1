#!/usr/bin/env python3
"""Runs a CNI network configuration list as a container runtime does (libcni's rules).

    cni_runtime.py ADD|CHECK|DEL CONFLIST CONTAINERID NETNS --path DIRS [--args K=V;...]
                   [--ifname eth0] --cache DIR

ADD runs the list's plugins in order, giving each the list's `name` and `cniVersion` and the
previous plugin's result as `prevResult`, and caches the last result (per network, container
and interface, as libcni does); CHECK runs them in order with the cached result; DEL runs them
in reverse with it (when there is one) and drops it. A plugin's failure ends the command: its
stdout (the CNI error) is printed and the exit status is 1. Debian ships no cnitool, hence this.
"""
import argparse
import json
import os
import subprocess
import sys


def find_plugin(dirs, plugin_type):
    for d in dirs:
        path = os.path.join(d, plugin_type)
        if os.access(path, os.X_OK):
            return path
    sys.exit(f'cni_runtime: no plugin {plugin_type} in {":".join(dirs)}')


def invoke(opts, command, conflist, plugin, prev):
    conf = dict(plugin)
    conf['name'] = conflist['name']
    conf['cniVersion'] = conflist['cniVersion']
    if prev is not None:
        conf['prevResult'] = prev
    env = dict(os.environ, CNI_COMMAND=command, CNI_CONTAINERID=opts.containerid,
               CNI_NETNS=opts.netns, CNI_IFNAME=opts.ifname, CNI_ARGS=opts.args,
               CNI_PATH=opts.path)
    done = subprocess.run([find_plugin(opts.path.split(':'), plugin['type'])],
                          input=json.dumps(conf).encode(), env=env, capture_output=True,
                          timeout=60, check=False)
    sys.stderr.write(done.stderr.decode(errors='replace'))
    if done.returncode != 0:
        sys.stdout.write(done.stdout.decode(errors='replace'))
        sys.exit(1)
    out = done.stdout.decode().strip()
    return json.loads(out) if out else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('command', choices=['ADD', 'CHECK', 'DEL'])
    ap.add_argument('conflist')
    ap.add_argument('containerid')
    ap.add_argument('netns')
    ap.add_argument('--path', required=True)
    ap.add_argument('--args', default='')
    ap.add_argument('--ifname', default='eth0')
    ap.add_argument('--cache', required=True)
    opts = ap.parse_args()
    with open(opts.conflist, encoding='utf-8') as f:
        conflist = json.load(f)
    os.makedirs(opts.cache, exist_ok=True)
    cache = os.path.join(opts.cache,
                         f"{conflist['name']}-{opts.containerid}-{opts.ifname}.json")
    plugins = conflist['plugins']
    if opts.command == 'ADD':
        result = None
        for plugin in plugins:
            result = invoke(opts, 'ADD', conflist, plugin, result)
        with open(cache, 'w', encoding='utf-8') as f:
            json.dump(result, f)
        print(json.dumps(result))
        return
    cached = None
    if os.path.exists(cache):
        with open(cache, encoding='utf-8') as f:
            cached = json.load(f)
    if opts.command == 'CHECK':
        if cached is None:
            sys.exit('cni_runtime: CHECK without an ADD result')
        for plugin in plugins:
            invoke(opts, 'CHECK', conflist, plugin, cached)
        return
    for plugin in reversed(plugins):
        invoke(opts, 'DEL', conflist, plugin, cached)
    if os.path.exists(cache):
        os.remove(cache)


if __name__ == '__main__':
    main()
