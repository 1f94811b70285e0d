# A stand-in for systemd's notify socket: binds a unix datagram socket at
# argv[1] ("@name" = the abstract namespace, as NOTIFY_SOCKET writes it) and
# prints each datagram as one line, "<wall-clock seconds> <message>", its
# newlines written as "|".
import os
import socket
import sys
import time

path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + path[1:] if path.startswith("@") else path)
print("listening", flush=True)
while True:
    msg = s.recv(4096).decode("utf-8", "replace")
    print("%.3f %s" % (time.time(), msg.replace("\n", "|")), flush=True)
