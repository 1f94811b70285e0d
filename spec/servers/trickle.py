# A peer that answers, but too slowly to ever finish: once a connection has
# sent its request, it starts a message that announces a large body and
# sends that body one byte every 0.2 s. A timeout that re-arms on every
# read never fires against it; only a deadline does. Prints "port N" once
# it listens on 127.0.0.1. argv[1] is what it plays:
#   redis      any request → "$1000000\r\n" and then the trickle
#   pg-connect the startup packet → a ParameterStatus ('S') that trickles
#   pg-query   the startup packet → AuthenticationOk, BackendKeyData and
#              ReadyForQuery at once; the next request → the trickle
#              (a CancelRequest connection is closed)
import struct, sys, time
import peer

mode = sys.argv[1]

def trickle(c, head):
    c.sendall(head)
    while True:
        time.sleep(0.2)
        c.sendall(b"x")

def serve(c):
    try:
        first = c.recv(65536)
        if mode == "redis":
            trickle(c, b"$1000000\r\n")
        big_s = b"S" + struct.pack(">i", 1000000)
        if len(first) >= 8 and struct.unpack(">i", first[4:8])[0] == 80877102:
            return  # a CancelRequest
        if mode == "pg-connect":
            trickle(c, big_s)
        c.sendall(b"R" + struct.pack(">ii", 8, 0) + b"K" + struct.pack(">iii", 12, 1234, 5678)
                  + b"Z" + struct.pack(">i", 5) + b"I")
        c.recv(65536)
        trickle(c, big_s)
    except OSError:
        pass
    finally:
        c.close()

peer.serve_forever(serve)
