# An upstream for spec/relay_upgrade_spec.lua that switches to a protocol
# that is not WebSocket ("Upgrade: foo"): prints "port N" once it listens on
# 127.0.0.1; answers each request 101 with "hello-after-101\n" in the same
# write (bytes a relay must not lose), then sends every byte it gets back
# upper-cased until the client's EOF, then "bye\n" and closes.
# GET /refuse is answered 403 with a body instead, its Connection naming
# X-Private (a hop-by-hop field the relay must not pass down).
import socket

import peer


def serve(c):
    # Small fixed buffers: relay_upgrade_spec's back-pressure case bounds what
    # the kernel may hold between client and upstream.
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 65536)
    head = b""
    while b"\r\n\r\n" not in head:
        data = c.recv(4096)
        if not data:
            c.close()
            return
        head += data
    head, rest = head.split(b"\r\n\r\n", 1)
    if head.startswith(b"GET /refuse"):
        c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 9\r\nX-Up: foo\r\n"
                  b"Connection: close, X-Private\r\nX-Private: secret\r\n\r\nno entry\n")
        c.close()
        return
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: foo\r\nConnection: Upgrade\r\n"
              b"X-Up: foo\r\n\r\nhello-after-101\n")
    if rest:
        c.sendall(rest.upper())
    while True:
        data = c.recv(65536)
        if not data:
            break
        c.sendall(data.upper())
    c.sendall(b"bye\n")
    c.close()


peer.serve_forever(serve, backlog=16)
