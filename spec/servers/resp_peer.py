# A fake Redis for redis_spec's client cases: prints "port N" once it
# listens on 127.0.0.1, then answers each command (a RESP array of bulk
# strings) with the bytes its first argument gives in hex. A second argument
# "close" closes the connection after them; "trickle" sends them one byte
# at a time, 2 ms apart (a reply cut at every byte).
import socket, threading, time

def read_command(f):
    head = f.readline()
    if not head.startswith(b"*"):
        return None
    args = []
    for _ in range(int(head[1:])):
        n = int(f.readline()[1:])
        args.append(f.read(n + 2)[:n])
    return args

def serve(c):
    f = c.makefile("rb")
    try:
        while True:
            args = read_command(f)
            if not args:
                break
            data = bytes.fromhex(args[0].decode())
            mode = args[1] if len(args) > 1 else b""
            if mode == b"trickle":
                for i in range(len(data)):
                    c.sendall(data[i:i + 1])
                    time.sleep(0.002)
            else:
                c.sendall(data)
            if mode == b"close":
                break
    except (OSError, ValueError):
        pass
    c.close()

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0))
s.listen(64)
print("port %d" % s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
