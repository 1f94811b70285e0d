#!/usr/bin/python3
# Opens N idle h2c connections to 127.0.0.1:PORT and holds them until stdin
# closes; prints "open N" once they are all up. bench/h2.sh reads the
# server's RSS meanwhile.
#   fresh    preface + empty SETTINGS, then nothing
#   request  the same, then one GET /api/users on stream 1; the answer is left
#            in the socket (the connection then idles as one that served a
#            request: its HPACK tables hold the client's headers)
#   requests the same with 100 GETs (streams 1..199), as a page's worth of
#            requests from a browser leaves it
import socket
import sys

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
port, n = int(sys.argv[1]), int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "fresh"
hello = PREFACE
if mode in ("request", "requests"):
    encoder = hpack.Encoder()
    for stream in range(1, 200 if mode == "requests" else 2, 2):
        block = encoder.encode([(":method", "GET"), (":scheme", "http"),
                                (":authority", "127.0.0.1:%d" % port), (":path", "/api/users"),
                                ("user-agent", "moonhttp-bench-idle"), ("accept", "*/*")])
        # HEADERS, END_STREAM | END_HEADERS
        hello += len(block).to_bytes(3, "big") + b"\x01\x05" + stream.to_bytes(4, "big") + block
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(hello)
    socks.append(s)
print("open", len(socks), flush=True)
sys.stdin.read()
