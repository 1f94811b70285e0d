# A raw byte peer for the full-duplex socket specs: prints "port N" once it
# listens on 127.0.0.1 (over TLS when argv gives a certificate and key). Each
# connection's first line says what to do: "echo" sends every later byte
# back as it comes; "stall S" reads nothing for S seconds, then closes (so a
# writer stuck behind a full window sees the close).
import socket, ssl, sys, threading, time

def first_line(c):
    buf = b""
    while b"\n" not in buf:
        chunk = c.recv(1)
        if not chunk:
            return None, b""
        buf += chunk
    line, _, rest = buf.partition(b"\n")
    return line.strip(), rest

def serve(c):
    try:
        cmd, rest = first_line(c)
        if cmd == b"echo":
            if rest:
                c.sendall(rest)
            while True:
                data = c.recv(65536)
                if not data:
                    break
                c.sendall(data)
        elif cmd and cmd.startswith(b"stall "):
            time.sleep(float(cmd[6:]))
    except OSError:
        pass
    c.close()

ctx = None
if len(sys.argv) > 2:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
tcp = socket.socket()
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("127.0.0.1", 0))
tcp.listen(64)
print("port %d" % tcp.getsockname()[1], flush=True)
while True:
    c, _ = tcp.accept()
    if ctx:
        try:
            c = ctx.wrap_socket(c, server_side=True)
        except (OSError, ssl.SSLError):
            c.close()
            continue
    threading.Thread(target=serve, args=(c,), daemon=True).start()
