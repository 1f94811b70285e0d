#!/usr/bin/python3
"""TLS handshakes that stall, for bench/spike.sh (loopback only).

    stall_tls.py PORT N

Opens N connections to 127.0.0.1:PORT, sends each a ClientHello and reads
the server's first flight, then goes no further: the server holds a TLS
context per connection mid-handshake. Prints "READY n=N" when all N have
their answer, then holds them until SIGTERM, closes them all and exits.
"""
import selectors
import signal
import socket
import ssl
import sys


def client_hello(ctx):
    out = ssl.MemoryBIO()
    obj = ctx.wrap_bio(ssl.MemoryBIO(), out, server_hostname="localhost")
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    sel = selectors.DefaultSelector()
    socks, answered = [], 0
    for i in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(client_hello(ctx))  # a fresh ClientHello each: its own key share
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        socks.append(s)
        while answered < i + 1 - 64:  # at most 64 waiting for their answer
            for key, _ in sel.select(5):
                if key.fileobj.recv(65536):
                    answered += 1
                sel.unregister(key.fileobj)
    while answered < n:
        ready = sel.select(5)
        if not ready:
            break
        for key, _ in ready:
            if key.fileobj.recv(65536):
                answered += 1
            sel.unregister(key.fileobj)
    print(f"READY n={answered}", flush=True)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    try:
        while True:
            signal.pause()
    finally:
        for s in socks:
            s.close()


if __name__ == "__main__":
    main()
