#!/usr/bin/python3
# An RFC 8441 WebSocket over h2c for spec/relay_upgrade_spec.lua: opens
# PATH on 127.0.0.1:PORT with an extended CONNECT, then one exchange after
# another (text, binary, ping, a 60000-byte message, the close handshake),
# printing what came back as key=value lines. The frames come from
# spec/h2_frames.py (Debian's python3-hyperframe and python3-hpack).
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from h2_frames import Client, DataFrame, ws_frame  # noqa: E402


def main(port, path):
    c = Client(port, settings={3: 100})
    c.send(c.connect_ws(1, path=path))
    c.read(lambda c: "status.1" in c.out or "rst.1" in c.out, timeout=5)
    print("status=%s" % c.out.get("status.1"))
    if "header.1.sec-websocket-accept" in c.out:
        print("accept=%s" % c.out["header.1.sec-websocket-accept"])
    seen = 0

    def next_frame():
        nonlocal seen
        c.read(lambda c: len(c.ws(1)) > seen or "end.1" in c.out or "rst.1" in c.out, timeout=5)
        frames = c.ws(1)
        if len(frames) <= seen:
            return None, b""
        seen += 1
        return frames[seen - 1]

    c.send(DataFrame(1, ws_frame(1, "héllo".encode())))
    t, data = next_frame()
    print("%s=%s" % (t, data.decode()))
    c.send(DataFrame(1, ws_frame(2, b"\x00\x01\x02\xff")))
    t, data = next_frame()
    print("%s=%s" % (t, data.hex()))
    c.send(DataFrame(1, ws_frame(9, b"p1")))
    t, data = next_frame()
    print("%s=%s" % (t, data.decode()))
    msg = ws_frame(2, b"B" * 60000)
    for k in range(0, len(msg), 16384):
        c.send(DataFrame(1, msg[k:k + 16384]))
    t, data = next_frame()
    print("big=%d" % (len(data) if data == b"B" * 60000 else -1))
    c.send(DataFrame(1, ws_frame(8, struct.pack(">H", 1000) + b"bye")))
    t, data = next_frame()
    print("%s=%d" % (t, struct.unpack(">H", data[:2])[0] if len(data) >= 2 else 0))
    c.send(DataFrame(1, b"", flags=["END_STREAM"]))
    c.read(lambda c: "end.1" in c.out or "rst.1" in c.out, timeout=5)
    print("end=%s" % c.out.get("end.1", 0))
    if "rst.1" in c.out:
        print("rst=%s" % c.out["rst.1"])


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
