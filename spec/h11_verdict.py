"""h11 (Debian python3-h11) as a second, strict HTTP/1.1 server-side parser
for spec/h11_diff_spec.lua. Reads one row a line, "<index> <hex bytes>", and
prints "<index> <requests h11 took whole> <ok|refused>": the requests it read
to their end before it raised or ran out of bytes, pipelined ones included
(each gets a bodiless 200 so h11 moves on to the next)."""
import sys

import h11


def verdict(data):
    conn = h11.Connection(our_role=h11.SERVER)
    conn.receive_data(data)
    conn.receive_data(b"")  # the client is done sending: a cut message is an error
    taken = 0
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError:
            return taken, "refused"
        if event is h11.NEED_DATA or event is h11.PAUSED:
            return taken, "ok"
        if isinstance(event, h11.ConnectionClosed):
            return taken, "ok"
        if isinstance(event, h11.EndOfMessage):
            taken += 1
            conn.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
            conn.send(h11.EndOfMessage())
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return taken, "ok"  # HTTP/1.0 or Connection: close: nothing after it is read
            conn.start_next_cycle()


for line in sys.stdin:
    index, hexbytes = line.split()
    taken, how = verdict(bytes.fromhex(hexbytes))
    print(index, taken, how, flush=True)
