"""The listen loop the Python peers of the specs share: a loopback socket on a
free port, announced as "port N" on stdout (what spec/helper.lua's H.service
waits for), and one thread per accepted connection running serve(conn)."""
import socket, threading


def serve_forever(serve, backlog=64):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    print("port %d" % s.getsockname()[1], flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
