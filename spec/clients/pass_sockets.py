"""Starts a command as systemd's socket activation would (sd_listen_fds(3)).

usage: pass_sockets.py [--pid-of-other] HOST:PORT[=NAME],... COMMAND ARGS...

Binds and listens on each address (port 0: one the kernel picks; no
SO_REUSEPORT, so a second bind of that port by the command fails), moves
the sockets to descriptors 3, 4, ..., sets LISTEN_FDS, LISTEN_PID (this
process's pid, which the exec keeps) and LISTEN_FDNAMES, prints
"passed HOST:PORT" for each on stderr and execs COMMAND. With
--pid-of-other, LISTEN_PID names another process (the variables are meant
for someone else). For spec/socket_activation_spec.lua.
"""
import os
import socket
import sys

args = sys.argv[1:]
other = args[0] == "--pid-of-other"
if other:
    args = args[1:]
specs, command = args[0].split(","), args[1:]
socks, names = [], []
for spec in specs:
    addr, _, name = spec.partition("=")
    host, _, port = addr.rpartition(":")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((host, int(port)))
    s.listen(128)
    socks.append(s)
    names.append(name or "unnamed")
    sys.stderr.write("passed %s:%d\n" % s.getsockname())
sys.stderr.flush()
# Out of the way first, so moving one to 3 + i cannot close another.
high = [os.dup(s.fileno()) for s in socks]
for s in socks:
    s.close()
for i, fd in enumerate(high):
    os.dup2(fd, 3 + i)
    os.close(fd)
os.environ["LISTEN_FDS"] = str(len(socks))
os.environ["LISTEN_PID"] = str(os.getppid() if other else os.getpid())
os.environ["LISTEN_FDNAMES"] = ":".join(names)
os.execv(command[0], command)
