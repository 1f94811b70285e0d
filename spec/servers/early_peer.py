# An upstream that answers before the request body is in (spec/proxy_early_spec.lua).
# Reads a request head, then by its path:
#   /close  413 with a body, then closes with the body unread (the kernel resets)
#   /keep   401 with a body, then reads and drops what comes until EOF
#   else    200 "ok <path>" once the body (Content-Length) is read, keep-alive
# Prints "port N" once it listens on 127.0.0.1.
import peer

def head_of(c, buf):
    while b"\r\n\r\n" not in buf:
        more = c.recv(65536)
        if not more:
            return None, b""
        buf += more
    head, rest = buf.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest

def answer(c, status, body, close=False):
    c.sendall(("HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n%s\r\n"
               % (status, len(body), "Connection: close\r\n" if close else "")).encode() + body)

def serve(c):
    buf = b""
    try:
        while True:
            head, buf = head_of(c, buf)
            if head is None:
                return
            path = head.split(" ")[1]
            if path == "/close":
                answer(c, "413 Content Too Large", b"too big, says the upstream\n", True)
                return
            if path == "/keep":
                answer(c, "401 Unauthorized", b"who are you\n")
                while c.recv(65536):
                    pass
                return
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            while len(buf) < length:
                more = c.recv(65536)
                if not more:
                    return
                buf += more
            buf = buf[length:]
            answer(c, "200 OK", ("ok " + path + "\n").encode())
    except OSError:
        pass
    finally:
        c.close()

peer.serve_forever(serve)
