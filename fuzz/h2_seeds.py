#!/usr/bin/python3
# Writes the seed corpus of fuzz_h2 (fuzz/corpus_h2/): frame sequences a
# client sends after the preface, built with Debian's python3-hyperframe and
# python3-hpack. Each file starts with the read-size byte of the harness.
import os
import sys

from hpack import Encoder
from hyperframe.frame import (ContinuationFrame, DataFrame, GoAwayFrame, HeadersFrame, PingFrame,
                              PriorityFrame, RstStreamFrame, SettingsFrame, WindowUpdateFrame)

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus_h2")
os.makedirs(out, exist_ok=True)


def req(enc, sid, method="GET", path="/", extra=(), end=True):
    f = HeadersFrame(sid, enc.encode([(":method", method), (":scheme", "http"), (":path", path),
                                      (":authority", "example.com")] + list(extra)))
    f.flags.add("END_HEADERS")
    if end:
        f.flags.add("END_STREAM")
    return f


def seeds():
    e = Encoder()
    yield "get", [SettingsFrame(0), req(e, 1, path="/users/7?a=1")]
    e = Encoder()
    yield "post", [SettingsFrame(0), req(e, 1, "POST", "/body", [("content-length", "5")], False),
                   DataFrame(1, b"hello", flags=["END_STREAM"])]
    e = Encoder()
    yield "stream", [SettingsFrame(0), req(e, 1, "PUT", "/stream", end=False),
                     DataFrame(1, b"a" * 30), WindowUpdateFrame(0, 1000),
                     DataFrame(1, b"b" * 30, flags=["END_STREAM"])]
    e = Encoder()
    yield "concurrent", [SettingsFrame(0, {SettingsFrame.INITIAL_WINDOW_SIZE: 10}),
                         req(e, 1, path="/json"), req(e, 3, path="/error"),
                         req(e, 5, "GET", "/files/a/b", [("cookie", "a=1"), ("cookie", "b=2")]),
                         WindowUpdateFrame(1, 100), WindowUpdateFrame(0, 100)]
    e = Encoder()
    yield "reset", [SettingsFrame(0), req(e, 1), RstStreamFrame(1, error_code=8), req(e, 3),
                    PriorityFrame(3, depends_on=1), PingFrame(0, b"12345678")]
    e = Encoder()
    h = HeadersFrame(1, e.encode([(":method", "GET"), (":scheme", "http")]))
    c = ContinuationFrame(1, e.encode([(":path", "/exact/"), ("x", "y")]))
    c.flags.add("END_HEADERS")
    yield "continuation", [SettingsFrame(0), h, c]
    e = Encoder()
    yield "trailers", [SettingsFrame(0), req(e, 1, "POST", "/body", [("te", "trailers")], False),
                       DataFrame(1, b"x"), HeadersFrame(1, e.encode([("x-t", "1")]),
                                                        flags=["END_HEADERS", "END_STREAM"])]
    e = Encoder()
    yield "bad_head", [SettingsFrame(0), req(e, 1, extra=[("connection", "close")]),
                       req(e, 3, "FROB", "/"), req(e, 5, extra=[("x-big", "v" * 5000)])]
    yield "goaway", [SettingsFrame(0), GoAwayFrame(0, 0, 0)]
    e = Encoder()
    # the server's two SETTINGS acknowledged (the second is cut), then one ACK too many
    yield "acks", [SettingsFrame(0), SettingsFrame(0, flags=["ACK"]), req(e, 1),
                   SettingsFrame(0, flags=["ACK"]), req(e, 3), SettingsFrame(0, flags=["ACK"])]
    e = Encoder()
    yield "stream_ids", [SettingsFrame(0), req(e, 5), req(e, 9), req(e, 3)]
    e = Encoder()
    yield "skipped_ids", [SettingsFrame(0), req(e, 1), req(e, 7), req(e, 5), req(e, 9)]
    e = Encoder()
    ws = HeadersFrame(1, e.encode([(":method", "CONNECT"), (":protocol", "websocket"),
                                   (":scheme", "http"), (":path", "/ws"),
                                   (":authority", "example.com"),
                                   ("sec-websocket-version", "13")]), flags=["END_HEADERS"])
    # masked (key 0) text "hi", a ping, a close 1000
    yield "websocket", [SettingsFrame(0), ws,
                        DataFrame(1, b"\x81\x82\x00\x00\x00\x00hi\x89\x80\x00\x00\x00\x00"),
                        DataFrame(1, b"\x88\x82\x00\x00\x00\x00\x03\xe8", flags=["END_STREAM"])]


for name, frames in seeds():
    with open(os.path.join(out, name), "wb") as f:
        f.write(bytes([63]) + b"".join(fr.serialize() for fr in frames))
