# A fake Redis for redis_spec's client cases: prints "port N" once it
# listens on 127.0.0.1, then answers each command (a RESP array of bulk
# strings) with the bytes its first argument gives in hex. A second argument
# "close" closes the connection after them; "trickle" sends them one byte
# at a time, 2 ms apart (a reply cut at every byte).
import time
import peer

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

peer.serve_forever(serve)
