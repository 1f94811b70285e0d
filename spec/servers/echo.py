# A line-oriented test peer for the socket specs: prints "port N" once it
# listens on 127.0.0.1 (and on the unix socket given as argv[1], if any).
# Commands, one per line: "split" answers "ab", then "cd\n" 0.1 s later;
# "close" closes; "silent" answers nothing; "big N" sends N bytes of "x";
# "conns" answers the number of connections accepted so far; "raw HEX" sends
# those bytes ("rawclose HEX" then closes); anything else
# is echoed back with its newline.
import os, socket, sys, threading, time

accepted = 0
lock = threading.Lock()

def serve(c):
    f = c.makefile("rb")
    try:
        for line in f:
            cmd = line.strip()
            if cmd == b"split":
                c.sendall(b"ab"); time.sleep(0.1); c.sendall(b"cd\n")
            elif cmd == b"close":
                break
            elif cmd == b"silent":
                continue
            elif cmd.startswith(b"big "):
                c.sendall(b"x" * int(cmd[4:]))
            elif cmd.startswith(b"raw "):
                c.sendall(bytes.fromhex(cmd[4:].decode()))
            elif cmd.startswith(b"rawclose "):
                c.sendall(bytes.fromhex(cmd[9:].decode()))
                break
            elif cmd == b"conns":
                with lock:
                    c.sendall(b"%d\n" % accepted)
            else:
                c.sendall(line)
    except OSError:
        pass
    c.close()

def accept_loop(s):
    global accepted
    while True:
        c, _ = s.accept()
        with lock:
            accepted += 1
        threading.Thread(target=serve, args=(c,), daemon=True).start()

tcp = socket.socket()
tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("127.0.0.1", 0))
tcp.listen(64)
if len(sys.argv) > 1:
    if os.path.exists(sys.argv[1]):
        os.remove(sys.argv[1])
    un = socket.socket(socket.AF_UNIX)
    un.bind(sys.argv[1])
    un.listen(64)
    threading.Thread(target=accept_loop, args=(un,), daemon=True).start()
print("port %d" % tcp.getsockname()[1], flush=True)
accept_loop(tcp)
