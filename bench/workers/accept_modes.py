"""How three ways of accepting spread a burst of connections over 2 processes.

Two forked processes serve loopback connections (read the request, answer
with their pid, close) from:
  shared      one listening socket, epoll without flags (moonhttp's
              `reuseport = false`: every waiter is woken)
  exclusive   one listening socket, EPOLLEXCLUSIVE (one waiter woken)
  reuseport   one SO_REUSEPORT socket per process (moonhttp's default)
The client opens N connections at once, sends one request on each, reads
every answer and counts them per pid. Each process accepts up to 64 at a
time, as moonhttp's listener does.

usage: accept_modes.py [N] [rounds]   (Linux; python3 >= 3.6)
"""
import os
import select
import signal
import socket
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 3


def listener(port=0, reuseport=False):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuseport:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    s.bind(("127.0.0.1", port))
    s.listen(4096)
    s.setblocking(False)
    return s


def serve(ls, flags):
    ep = select.epoll()
    ep.register(ls.fileno(), select.EPOLLIN | flags)
    conns = {}
    answer = ("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%d"
              % (len(str(os.getpid())), os.getpid())).encode()
    while True:
        for fd, _ in ep.poll():
            if fd == ls.fileno():
                for _ in range(64):
                    try:
                        c, _ = ls.accept()
                    except BlockingIOError:
                        break
                    c.setblocking(False)
                    conns[c.fileno()] = c
                    ep.register(c.fileno(), select.EPOLLIN)
            else:
                c = conns.pop(fd)
                try:
                    c.recv(4096)
                    c.send(answer)
                except OSError:
                    pass
                ep.unregister(fd)
                c.close()


def burst(port):
    cs = [socket.create_connection(("127.0.0.1", port)) for _ in range(N)]
    for c in cs:
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    counts = {}
    for c in cs:
        data = b""
        while True:
            d = c.recv(4096)
            if not d:
                break
            data += d
        pid = data.split(b"\r\n\r\n", 1)[1].decode()
        counts[pid] = counts.get(pid, 0) + 1
        c.close()
    return sorted(counts.values(), reverse=True)


def run(mode):
    if mode == "reuseport":
        first = listener(reuseport=True)
        port = first.getsockname()[1]
        socks = [first, listener(port, reuseport=True)]
    else:
        first = listener()
        port = first.getsockname()[1]
        socks = [first, first]
    flags = select.EPOLLEXCLUSIVE if mode == "exclusive" else 0
    pids = []
    for s in socks:
        pid = os.fork()
        if pid == 0:
            serve(s, flags)
        pids.append(pid)
    for s in set(socks):
        s.close()
    time.sleep(0.2)
    out = []
    for _ in range(ROUNDS):
        counts = burst(port)
        out.append("%d/%d (%.2fx)" % (counts[0], N - counts[0], counts[0] / (N / 2)))
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    print("%-10s %s" % (mode, "  ".join(out)))


for mode in ("shared", "exclusive", "reuseport"):
    run(mode)
