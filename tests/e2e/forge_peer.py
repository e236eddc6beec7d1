#!/usr/bin/env python3
"""A forged router: connects to a Wharf router's host-link port, claims to be host CLAIM in a
Hello (docs/wire-protocol.md section 2) followed by a CM MAD, and reports whether the router
keeps the connection.

    forge_peer.py ADDRESS PORT CLAIM [--cert PEM --key PEM [--replay]] [--encrypt] [--deadline S]

Without --cert it speaks plaintext from the first byte. With --cert it first runs a TLS 1.3
handshake presenting that certificate (it does not check the router's), then sends the Hello
in plaintext, or with --encrypt in records sealed as a router with --link-security encrypt
seals them (docs/wire-protocol.md, "Encrypted links: records"; written here from that text,
with OpenSSL's exporter through ctypes, since Python's ssl module has none, and the
cryptography package's AES-GCM and HKDF). With --replay it records a whole handshake it makes with that certificate (and
closes that connection before any Hello), then plays what it sent then, byte for byte, on a
new connection, as an attacker who recorded a router's handshake on the wire would, and
sends the Hello after it. Exit 0: the router closed the connection within the deadline
(refused), printing how; 1: it kept it open; 2: the recording failed."""
import argparse
import ctypes
import os
import socket
import ssl
import struct
import sys
import time

args = argparse.ArgumentParser()
args.add_argument("address")
args.add_argument("port", type=int)
args.add_argument("claim")
args.add_argument("--cert")
args.add_argument("--key")
args.add_argument("--encrypt", action="store_true")
args.add_argument("--replay", action="store_true")
args.add_argument("--deadline", type=float, default=5.0)
a = args.parse_args()

# Versions 4 to 4: what routers speak now (proto/host_wire.h, kVersionMin and kVersionMax),
# so that a refusal is for who the peer is, not for its version.
HELLO = struct.pack('<IHHBBHIQ32s', 0x50544857, 4, 4, 0, 0, 0,
                    int.from_bytes(os.urandom(4), 'little') | 1, 0x1122334455667788,
                    a.claim.encode().ljust(32, b'\0'))
# A UD SEND-only to QPN 1 with the GSI Q_Key carrying an (empty) CM MAD, type 8.
MAD = bytearray(356)
MAD[0] = 8
DETH = struct.pack('<II', 0x80010000, 1)
PACKET = struct.pack('<IBBBBHHIIII', len(DETH) + len(MAD), 0x64, 0, 0, 0, 0, 0, 1, 1, 0, 0) + DETH + bytes(MAD)


def refused(how):
    print(f"refused: {how}")
    sys.exit(0)


end = time.time() + a.deadline


def connect():
    sock = socket.create_connection((a.address, a.port), timeout=3)
    sock.settimeout(0.2)
    return sock


def receive(sock, during):
    """What the router sent on sock within its timeout (b'' if nothing); refused() if it closed
    or reset the connection (`during` says when, for the message)."""
    try:
        b = sock.recv(65536)
    except socket.timeout:
        return b''
    except OSError as e:
        refused(f"connection reset {during} ({e})")
    if not b:
        refused(f"closed by the router {during}")
    return b


def handshake(sock, sent):
    """A TLS 1.3 handshake on sock with --cert; every chunk written is appended to sent."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(a.cert, a.key)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    session = ctx.wrap_bio(incoming, outgoing, server_side=False)

    def flush():
        if outgoing.pending:
            sent.append(outgoing.read())
            sock.sendall(sent[-1])

    while True:
        try:
            session.do_handshake()
            break
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError as e:
            refused(f"TLS failed during the handshake: {e}")
        flush()
        if time.time() > end:
            print("accepted: the handshake neither finished nor failed")
            sys.exit(1)
        incoming.write(receive(sock, "during the handshake"))
    flush()


def exporting_handshake(sock):
    """A TLS 1.3 handshake on sock with --cert through libssl itself; returns the secrets of
    the two directions of the records (what the dialler sends, what the acceptor sends)."""
    ssl_lib = ctypes.CDLL("libssl.so.3")
    ssl_lib.TLS_client_method.restype = ctypes.c_void_p
    ssl_lib.SSL_CTX_new.restype = ctypes.c_void_p
    ssl_lib.SSL_CTX_new.argtypes = [ctypes.c_void_p]
    ssl_lib.SSL_CTX_ctrl.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_void_p]
    ssl_lib.SSL_CTX_use_certificate_chain_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ssl_lib.SSL_CTX_use_PrivateKey_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    ssl_lib.SSL_new.restype = ctypes.c_void_p
    ssl_lib.SSL_new.argtypes = [ctypes.c_void_p]
    ssl_lib.SSL_set_fd.argtypes = [ctypes.c_void_p, ctypes.c_int]
    ssl_lib.SSL_connect.argtypes = [ctypes.c_void_p]
    ssl_lib.SSL_export_keying_material.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
        ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
    ctx = ssl_lib.SSL_CTX_new(ssl_lib.TLS_client_method())
    set_min_proto_version, tls1_3 = 123, 0x0304
    ssl_lib.SSL_CTX_ctrl(ctx, set_min_proto_version, tls1_3, None)
    if (ssl_lib.SSL_CTX_use_certificate_chain_file(ctx, a.cert.encode()) != 1 or
            ssl_lib.SSL_CTX_use_PrivateKey_file(ctx, a.key.encode(), 1) != 1):
        print("cannot load --cert and --key")
        sys.exit(2)
    session = ssl_lib.SSL_new(ctx)
    sock.setblocking(True)  # libssl reads the socket itself; the deadline bounds it
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                    struct.pack('ll', max(1, int(end - time.time())), 0))
    ssl_lib.SSL_set_fd(session, sock.fileno())
    if ssl_lib.SSL_connect(session) != 1:
        if time.time() >= end - 0.5:
            print("accepted: the handshake neither finished nor failed")
            sys.exit(1)
        refused("TLS failed during the handshake")
    secrets = []
    for label in (b"EXPORTER-wharf-link-records-dialler", b"EXPORTER-wharf-link-records-acceptor"):
        out = ctypes.create_string_buffer(32)
        if ssl_lib.SSL_export_keying_material(session, out, 32, label, len(label), None, 0, 0) != 1:
            print("the session exported no keys")
            sys.exit(2)
        secrets.append(out.raw)
    sock.settimeout(0.2)
    return secrets


def sealed(secret, payload):
    """payload as the first record under `secret` (docs/wire-protocol.md)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

    def expand(info, n):
        return HKDFExpand(hashes.SHA256(), n, info).derive(secret)

    key, iv = expand(b"wharf key", 16), expand(b"wharf iv", 12)
    header = struct.pack('>I', len(payload))
    nonce = iv  # record 0: the IV XOR 0
    return header + AESGCM(key).encrypt(nonce, payload, header)


def replay(sock, sent):
    """Plays the chunks of a recorded handshake on sock, each after the router's answer."""
    for chunk in sent:
        sock.sendall(chunk)
        wait = time.time() + 0.5
        while time.time() < wait:
            receive(sock, "during the replayed handshake")


s = connect()
if a.replay:
    recorded = []
    try:
        handshake(s, recorded)
    except SystemExit:
        print("the recording's own handshake failed")
        sys.exit(2)
    s.close()
    s = connect()
    replay(s, recorded)
elif a.cert and a.encrypt:
    dialler_secret, _ = exporting_handshake(s)
elif a.cert:
    handshake(s, [])

try:
    if a.cert and a.encrypt and not a.replay:
        s.sendall(sealed(dialler_secret, HELLO + PACKET))
    else:
        s.sendall(HELLO + PACKET)
except OSError:
    refused("connection closed while sending the Hello")

got = 0
while time.time() < end:
    got += len(receive(s, f"after {got} bytes"))
print(f"accepted: connection still open after {a.deadline:.0f} s, {got} bytes received")
sys.exit(1)
