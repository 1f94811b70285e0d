#!/usr/bin/python3
# Opens N idle h2c connections to 127.0.0.1:PORT (preface + empty SETTINGS,
# then nothing), prints "open N" once they are all up, holds them until
# stdin closes. bench/h2.sh reads the server's RSS meanwhile.
import socket
import sys

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
port, n = int(sys.argv[1]), int(sys.argv[2])
socks = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(PREFACE)
    socks.append(s)
print("open", len(socks), flush=True)
sys.stdin.read()
