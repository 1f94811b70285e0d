#!/usr/bin/python3
# Raw HTTP/2 frames for spec/h2_spec.lua: one scenario against a server on
# 127.0.0.1:PORT, then what came back as key=value lines:
#   status.N=200     stream N's :status        body.N=...    its DATA (text)
#   rst.N=CODE       RST_STREAM on stream N    goaway=CODE   GOAWAY's error code
#   goaway_last=N    its last stream ID        closed=1      the server closed
#   end.N=1          stream N ended (END_STREAM from the server)
#   setting.ID=V     a SETTINGS value the server sent
#   window.N=BYTES   WINDOW_UPDATE increments the server sent on stream N (0: the connection)
#   ws.N.K=TYPE:DATA the K-th WebSocket frame the server sent on stream N (RFC 8441)
# Debian's python3-hyperframe and python3-hpack build and read the frames;
# nothing here checks what the server does (the spec does).
import os
import signal
import socket
import struct
import sys
import time

from hpack import Decoder, Encoder
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame,
                              PingFrame, PriorityFrame, RstStreamFrame, SettingsFrame,
                              WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
CODES = {0: "NO_ERROR", 1: "PROTOCOL_ERROR", 2: "INTERNAL_ERROR", 3: "FLOW_CONTROL_ERROR",
         4: "SETTINGS_TIMEOUT", 5: "STREAM_CLOSED", 6: "FRAME_SIZE_ERROR", 7: "REFUSED_STREAM",
         8: "CANCEL", 9: "COMPRESSION_ERROR", 10: "CONNECT_ERROR", 11: "ENHANCE_YOUR_CALM",
         12: "INADEQUATE_SECURITY", 13: "HTTP_1_1_REQUIRED"}


WS_TYPES = {0: "cont", 1: "text", 2: "binary", 8: "close", 9: "ping", 10: "pong"}


def ws_frame(opcode, payload, fin=True):
    """A client's (masked) WebSocket frame."""
    n = len(payload)
    head = bytes([(0x80 if fin else 0) | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    mask = os.urandom(4)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws_frames(data):
    """The server's (unmasked) frames in data: [(type, payload)], complete ones only."""
    frames, i = [], 0
    while i + 2 <= len(data):
        op, n, j = data[i] & 0x0F, data[i + 1] & 0x7F, i + 2
        if n == 126:
            if j + 2 > len(data):
                break
            n, j = struct.unpack(">H", data[j:j + 2])[0], j + 2
        elif n == 127:
            if j + 8 > len(data):
                break
            n, j = struct.unpack(">Q", data[j:j + 8])[0], j + 8
        if j + n > len(data):
            break
        frames.append((WS_TYPES.get(op, op), data[j:j + n]))
        i = j + n
    return frames


def cue():
    """Signals the server where a scenario is ready for it (H2_CUE="SIG:pid"), not at a
    guessed time: under load the interpreter's start alone can take longer than a guess."""
    want = os.environ.get("H2_CUE")
    if want:
        sig, pid = want.split(":")
        time.sleep(0.1)  # the stream's handler has started
        os.kill(int(pid), getattr(signal, "SIG" + sig))


class Client:
    def __init__(self, port, settings=None, preface=True):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle wait per request
        self.enc, self.dec = Encoder(), Decoder()
        self.out = {}
        self.closed = False
        self.own_table = False  # True: the encoder ignores the server's table size
        self.buf = b""
        if preface:
            self.s.sendall(PREFACE + SettingsFrame(0, settings or {}).serialize())

    def send(self, *frames):
        try:
            self.s.sendall(b"".join(f if isinstance(f, bytes) else f.serialize() for f in frames))
        except OSError:
            self.closed = True
            self.note("closed", 1)

    def block(self, path="/hello", method="GET", extra=(), pseudo=None):
        fields = pseudo if pseudo is not None else [
            (":method", method), (":scheme", "http"), (":path", path),
            (":authority", "example.test")]
        return self.enc.encode(list(fields) + list(extra))

    def headers(self, sid, end_stream=True, **kw):
        f = HeadersFrame(sid, self.block(**kw))
        f.flags.add("END_HEADERS")
        if end_stream:
            f.flags.add("END_STREAM")
        return f

    def note(self, key, value):
        self.out[key] = value

    def read(self, until=None, timeout=2.0):
        """Reads frames until until(self) is true, the server closes, or timeout."""
        deadline = time.time() + timeout
        while not self.closed and not (until and until(self)):
            left = deadline - time.time()
            if left <= 0:
                break
            self.s.settimeout(left)
            try:
                data = self.s.recv(65536)
            except socket.timeout:
                break
            except OSError:
                data = b""
            if not data:
                self.closed = True
                self.note("closed", 1)
                break
            self.buf += data
            while len(self.buf) >= 9:
                f, length = Frame.parse_frame_header(memoryview(self.buf[:9]))
                if len(self.buf) < 9 + length:
                    break
                f.parse_body(memoryview(self.buf[9:9 + length]))
                self.buf = self.buf[9 + length:]
                self.frame(f)

    def frame(self, f):
        sid = f.stream_id
        if isinstance(f, HeadersFrame):
            for k, v in self.dec.decode(f.data):
                k = k.decode() if isinstance(k, bytes) else k
                v = v.decode() if isinstance(v, bytes) else v
                if k == ":status":
                    self.note("status.%d" % sid, v)
                else:
                    self.note("header.%d.%s" % (sid, k), v)
        if isinstance(f, (HeadersFrame, DataFrame)) and "END_STREAM" in f.flags:
            self.note("end.%d" % sid, 1)
        if isinstance(f, DataFrame):
            key = "body.%d" % sid
            self.out[key] = self.out.get(key, "") + f.data.decode("latin-1")
            if f.flow_controlled_length:  # keep the server's windows open
                self.send(WindowUpdateFrame(0, f.flow_controlled_length),
                          WindowUpdateFrame(sid, f.flow_controlled_length))
        elif isinstance(f, RstStreamFrame):
            self.note("rst.%d" % sid, CODES.get(f.error_code, f.error_code))
            self.out["rsts.%d" % sid] = self.out.get("rsts.%d" % sid, 0) + 1
        elif isinstance(f, WindowUpdateFrame):
            key = "window.%d" % sid
            self.out[key] = self.out.get(key, 0) + f.window_increment
        elif isinstance(f, GoAwayFrame):
            self.note("goaway", CODES.get(f.error_code, f.error_code))
            self.note("goaway_last", f.last_stream_id)
        elif isinstance(f, PingFrame) and "ACK" not in f.flags:
            self.send(PingFrame(0, f.opaque_data, flags=["ACK"]))
        elif isinstance(f, PingFrame):
            self.note("ping_ack", f.opaque_data.decode("latin-1"))
        elif isinstance(f, SettingsFrame) and "ACK" not in f.flags:
            if SettingsFrame.HEADER_TABLE_SIZE in f.settings and not self.own_table:
                self.enc.header_table_size = f.settings[SettingsFrame.HEADER_TABLE_SIZE]
            for k, v in f.settings.items():
                self.note("setting.%d" % k, v)
            self.send(SettingsFrame(0, flags=["ACK"]))

    def ws(self, sid):
        """The WebSocket frames the server sent on stream sid so far."""
        return ws_frames(self.out.get("body.%d" % sid, "").encode("latin-1"))

    def note_ws(self, sid):
        """ws.N.K: the K-th data or close frame; ws.N.pong: the pong's payload (sent at once)."""
        k = 0
        for t, data in self.ws(sid):
            if t == "pong":
                self.note("ws.%d.pong" % sid, data.decode("latin-1"))
                continue
            k += 1
            code = ""
            if t == "close" and len(data) >= 2:
                code, data = "%d:" % struct.unpack(">H", data[:2])[0], data[2:]
            text = data.decode("utf-8", "replace") if len(data) <= 40 else "%d bytes" % len(data)
            self.note("ws.%d.%d" % (sid, k), "%s:%s%s" % (t, code, text))

    def connect_ws(self, sid, path="/ws", protocol="websocket", version="13"):
        """RFC 8441: an extended CONNECT opening a WebSocket on stream sid."""
        return self.headers(sid, end_stream=False, pseudo=[
            (":method", "CONNECT"), (":protocol", protocol), (":scheme", "http"),
            (":path", path), (":authority", "example.test")],
            extra=[("sec-websocket-version", version), ("sec-websocket-protocol", "chat, other")])

    def report(self):
        for k in sorted(self.out):
            print("%s=%s" % (k, str(self.out[k]).replace("\n", "\\n")))


def ended(sid):
    return lambda c: ("status.%d" % sid) in c.out or ("rst.%d" % sid) in c.out or "goaway" in c.out


def goaway(c):
    return "goaway" in c.out


def scenario(name, port):
    if name == "bad_preface":  # the reserved PRI method, then not the preface (RFC 9113 §3.4)
        c = Client(port, preface=False)
        c.send(PREFACE[:18] + b"XX\r\n\r\n" + SettingsFrame(0, {}).serialize())
        c.read(lambda c: "goaway" in c.out and c.closed, timeout=4)
        return c
    if name == "invalid_preface":  # not "PRI ": an HTTP/1 request line (h2spec's bytes)
        c = Client(port, preface=False)
        c.send(b"INVALID CONNECTION PREFACE\r\n\r\n")
        got, deadline = b"", time.time() + 4
        while time.time() < deadline:
            try:
                data = c.s.recv(65536)
            except OSError:
                data = b""
            if not data:
                c.note("closed", 1)
                break
            got += data
        c.note("http1", got.split(b"\r\n", 1)[0].decode("latin-1"))
        return c
    if name == "half_preface":  # read_header_timeout covers the preface
        c = Client(port, preface=False)
        c.send(PREFACE[:10])
        t = time.time()
        c.read(timeout=4)
        c.note("waited", "%.1f" % (time.time() - t))
        return c
    c = Client(port, settings={SettingsFrame.MAX_CONCURRENT_STREAMS: 100})
    if name == "get":
        c.send(c.headers(1, path="/host"))
        c.read(ended(1))
        c.read(timeout=0.3)
    elif name == "post":
        c.send(c.headers(1, path="/echo", method="POST", end_stream=False),
               DataFrame(1, b"hello", flags=["END_STREAM"]))
        c.read(ended(1))
        c.read(timeout=0.3)
    elif name.startswith("bad_"):  # one malformed request: stream 1
        rows = {
            "bad_no_path": dict(pseudo=[(":method", "GET"), (":scheme", "http"),
                                        (":authority", "a")]),
            "bad_no_method": dict(pseudo=[(":scheme", "http"), (":path", "/hello")]),
            "bad_unknown_pseudo": dict(extra=[(":foo", "1")]),
            "bad_pseudo_after_regular": dict(pseudo=[(":method", "GET"), (":scheme", "http"),
                                                     ("x-a", "1"), (":path", "/hello")]),
            "bad_uppercase_name": dict(extra=[("X-Upper", "1")]),
            "bad_connection_header": dict(extra=[("connection", "keep-alive")]),
            "bad_keep_alive_header": dict(extra=[("keep-alive", "5")]),
            "bad_transfer_encoding": dict(extra=[("transfer-encoding", "chunked")]),
            "bad_te_gzip": dict(extra=[("te", "gzip")]),
            "bad_empty_path": dict(pseudo=[(":method", "GET"), (":scheme", "http"),
                                           (":path", "")]),
            "bad_two_paths": dict(pseudo=[(":method", "GET"), (":scheme", "http"),
                                          (":path", "/hello"), (":path", "/x")]),
        }
        c.send(c.headers(1, **rows[name]))
        c.read(ended(1))
    elif name == "te_trailers":
        c.send(c.headers(1, extra=[("te", "trailers")]))
        c.read(ended(1))
    elif name == "length_mismatch":  # Content-Length 10, 5 bytes of DATA
        c.send(c.headers(1, path="/echo", method="POST", end_stream=False,
                         extra=[("content-length", "10")]),
               DataFrame(1, b"hello", flags=["END_STREAM"]))
        c.read(ended(1))
    elif name == "too_large":  # Content-Length past max_body_bytes: 413
        c.send(c.headers(1, path="/echo", method="POST", end_stream=False,
                         extra=[("content-length", "1000000")]))
        c.read(ended(1))
    elif name == "header_list":  # past max_header_bytes: 431
        c.send(c.headers(1, extra=[("x-big-%d" % i, "v" * 200) for i in range(40)]))
        c.read(ended(1))
    elif name == "rapid_reset":  # CVE-2023-44487: open, reset, again
        sid = 1
        for _ in range(40):
            batch = []
            for _ in range(100):
                batch += [c.headers(sid, path="/slow"), RstStreamFrame(sid, error_code=8)]
                sid += 2
            c.send(*batch)
            if c.closed:
                break
        c.read(goaway, timeout=3)
        c.note("opened", (sid - 1) // 2)
    elif name == "continuation_flood":  # no END_HEADERS, ever
        f = HeadersFrame(1, c.block())
        c.send(f)
        for i in range(2000):
            c.send(ContinuationFrame(1, c.enc.encode([("x-c%d" % i, "v" * 100)])))
            if c.closed:
                break
        c.read(goaway, timeout=3)
    elif name == "settings_flood":
        c.send(*[SettingsFrame(0, {SettingsFrame.ENABLE_PUSH: 0}) for _ in range(5000)])
        c.read(goaway, timeout=3)
    elif name == "priority_flood":  # CVE-2019-9513 churns the tree; here it costs a token
        c.send(*[PriorityFrame(2 * (i % 50) + 1, depends_on=2 * ((i + 1) % 50) + 1)
                 for i in range(5000)])
        c.read(goaway, timeout=3)
    elif name == "ping_flood":
        c.send(*[PingFrame(0, b"12345678") for _ in range(5000)])
        c.read(goaway, timeout=3)
    elif name == "empty_data_flood":
        c.send(c.headers(1, path="/stream", method="POST", end_stream=False))
        c.send(*[DataFrame(1, b"") for _ in range(5000)])
        c.read(goaway, timeout=3)
    elif name in ("max_streams", "max_streams_early"):
        # settings say 4: the 5th open stream is refused, the connection goes on (stream 11);
        # _early sends them before the server's SETTINGS are acknowledged
        if name == "max_streams":
            c.read(timeout=0.2)
        c.send(*[c.headers(2 * i + 1, path="/slow") for i in range(5)])
        c.read(lambda c: all(("status.%d" % (2 * i + 1)) in c.out for i in range(4)), timeout=4)
        c.send(c.headers(11, path="/hello"))
        c.read(ended(11))
    elif name == "refused_flood":  # 4 slow streams open, then new streams past the limit, again
        c.read(timeout=0.2)
        c.send(*[c.headers(2 * i + 1, path="/slow") for i in range(4)])
        sid = 9
        for _ in range(30):
            c.send(*[c.headers(sid + 2 * i, path="/hello") for i in range(100)])
            sid += 200
            if c.closed:
                break
        c.read(goaway, timeout=3)
        c.note("refused", sum(1 for k in c.out if k.startswith("rst.")))
    elif name == "even_stream":  # a client stream ID must be odd
        c.send(c.headers(2))
        c.read(goaway)
    elif name == "decreasing_stream":  # IDs only grow: HEADERS on a lower, never-opened one
        c.send(c.headers(5))
        c.read(ended(5))
        c.send(c.headers(3))
        c.read(goaway)
    elif name == "skipped_stream":  # 1, then 7 (3 and 5 skipped: closed), then 5
        c.send(c.headers(1))
        c.read(ended(1))
        c.send(c.headers(7))
        c.read(ended(7))
        c.send(c.headers(5))
        c.read(goaway)
    elif name == "trailers_lower":  # trailers on stream 1 after stream 3 opened: not an error
        c.send(c.headers(1, path="/echo", method="POST", end_stream=False),
               DataFrame(1, b"hello"), c.headers(3))
        c.read(ended(3))
        t = HeadersFrame(1, c.enc.encode([("x-trailer", "1")]))
        t.flags.add("END_HEADERS")
        t.flags.add("END_STREAM")
        c.send(t)
        c.read(ended(1))
        c.read(timeout=0.2)
    elif name == "hpack_bound":  # the client allows a 64 KiB table; the server keeps its bound
        c = Client(port, settings={SettingsFrame.HEADER_TABLE_SIZE: 65536})
        ok, biggest = 0, 0
        for i in range(200):
            sid = 2 * i + 1
            c.send(c.headers(sid, path="/hdr?v=%d" % i))
            c.read(ended(sid))
            if (c.out.get("header.%d.x-v" % sid) == "%d-%s" % (i, "v" * 100) and
                    c.out.get("body.%d" % sid) == str(i)):
                ok += 1
            table = c.dec.header_table.dynamic_entries  # RFC 7541 §4.1: an entry's size
            biggest = max(biggest, sum(len(k) + len(v) + 32 for k, v in table))
        c.out = {k: v for k, v in c.out.items() if not k.startswith(("header.", "body.", "status."))}
        c.note("ok", ok)
        c.note("table_max", c.dec.header_table.maxsize)
        c.note("table_biggest", biggest)
    elif name == "hpack_over_table":  # the encoder grows its table past what the server allows
        c.own_table = True
        c.read(timeout=0.2)  # SETTINGS acknowledged: the server's table size is in force
        c.enc.header_table_size = 4096
        c.send(c.headers(1, path="/hello"))
        c.read(goaway)
    elif name == "write_timeout":  # a handler slower than write_timeout: its stream is cut
        t = time.time()
        c.send(c.headers(1, path="/slow_producer"))
        c.read(lambda c: "rst.1" in c.out, timeout=4)
        c.note("waited", "%.1f" % (time.time() - t))
        c.send(c.headers(3, path="/hello"))
        c.read(ended(3))
    elif name == "split_cookies":  # RFC 9113 8.2.3: one cookie field per pair, joined by the server
        c.send(c.headers(1, path="/cookie",
                         extra=[("cookie", "c%d=%s" % (i, "v" * 50)) for i in range(30)]))
        c.read(ended(1))
    elif name == "ws_echo":  # RFC 8441: a WebSocket on stream 1, stream 3 served beside it
        c.send(c.connect_ws(1))
        c.read(lambda c: "status.1" in c.out or "rst.1" in c.out)
        c.send(DataFrame(1, ws_frame(1, "héllo".encode()) + ws_frame(2, b"\x00\x01\x02") +
                         ws_frame(9, b"p") + ws_frame(1, b"fr", fin=False) + ws_frame(0, b"ag")),
               c.headers(3))
        c.read(lambda c: len(c.ws(1)) >= 4 and "status.3" in c.out)
        c.send(DataFrame(1, ws_frame(8, b"\x03\xe8bye")))
        c.read(lambda c: "end.1" in c.out)
        c.note_ws(1)
    elif name == "ws_window":  # 2 x 60000 bytes: more than the stream's first window
        c.send(c.connect_ws(1))
        c.read(lambda c: "status.1" in c.out or "rst.1" in c.out)
        for i in range(2):
            msg = ws_frame(2, bytes([65 + i]) * 60000)
            for k in range(0, len(msg), 16384):
                c.send(DataFrame(1, msg[k:k + 16384]))
            c.read(lambda c: len(c.ws(1)) > i or "rst.1" in c.out or "goaway" in c.out, timeout=3)
        c.note_ws(1)
    elif name == "ws_split_header":  # a WebSocket frame header cut across DATA frames
        c.send(c.connect_ws(1))
        c.read(lambda c: "status.1" in c.out or "rst.1" in c.out)
        frame = ws_frame(1, b"split")
        c.send(DataFrame(1, frame[:1]))
        c.read(timeout=0.3)
        c.send(DataFrame(1, frame[1:]), c.headers(3))
        c.read(lambda c: len(c.ws(1)) >= 1 and "status.3" in c.out, timeout=3)
        c.note_ws(1)
    elif name == "ws_end_stream":  # the CONNECT's stream must stay open for the WebSocket
        f = c.connect_ws(1)
        f.flags.add("END_STREAM")
        c.send(f)
        c.read(ended(1))
    elif name == "ws_version":
        c.send(c.connect_ws(1, version="8"))
        c.read(ended(1))
        c.read(lambda c: "end.1" in c.out, timeout=0.5)
    elif name == "ws_other_protocol":
        c.send(c.connect_ws(1, protocol="something-else"))
        c.read(ended(1))
    elif name == "ws_get":  # over HTTP/2 a GET cannot switch
        c.send(c.headers(1, path="/ws", extra=[("sec-websocket-version", "13")]))
        c.read(ended(1))
    elif name == "connect_tunnel":  # plain CONNECT (RFC 9113 8.5): no tunnels here
        c.send(c.headers(1, end_stream=False, pseudo=[
            (":method", "CONNECT"), (":authority", "example.test:443")]))
        c.read(ended(1))
    elif name == "data_on_closed":  # DATA after the stream ended both ways, twice
        c.send(c.headers(1))
        c.read(ended(1))
        c.read(timeout=0.2)
        c.send(DataFrame(1, b"late"), DataFrame(1, b"later"), c.headers(3))
        c.read(lambda c: goaway(c) or (ended(3)(c) and "rst.1" in c.out))
        c.read(timeout=0.2)
    elif name == "data_on_closed_window":  # past half the connection window, on reset stream 1
        c.send(c.headers(1, path="/hello", method="POST", end_stream=False))
        c.read(lambda c: "rst.1" in c.out)
        c.read(timeout=0.2)
        c.out.pop("rst.1")  # the server's NO_ERROR after its 405
        c.out.pop("rsts.1")
        start = c.out.get("window.0", 0)  # the server's opening increment
        window, sent = start + 65535, 0
        while sent <= window // 2:
            c.send(DataFrame(1, b"w" * 16384))
            sent += 16384
        c.send(c.headers(3))
        c.read(lambda c: ended(3)(c) and c.out.get("window.0", 0) > start, timeout=4)
        c.read(timeout=0.2)
        # the bytes came back as WINDOW_UPDATE: nghttp2 counted them (RFC 9113 §6.9)
        c.note("window_back", int(c.out.get("window.0", 0) - start >= window // 2))
    elif name == "data_after_reset":  # the server reset stream 1; the client's DATA goes on
        c.send(c.headers(1, path="/hello", method="POST", end_stream=False))
        c.read(lambda c: "rst.1" in c.out or "end.1" in c.out)
        c.read(timeout=0.2)
        c.note("first_rst.1", c.out.get("rst.1"))
        c.send(DataFrame(1, b"late", flags=["END_STREAM"]), c.headers(3))
        c.read(lambda c: ended(3)(c) and c.out.get("rst.1") != c.out.get("first_rst.1"))
        c.read(timeout=0.2)
    elif name == "headers_on_closed":  # a second request head on stream 1, closed both ways
        c.send(c.headers(1))
        c.read(ended(1))
        c.read(timeout=0.2)
        c.send(c.headers(1), c.headers(3))
        c.read(lambda c: goaway(c) or (ended(3)(c) and "rst.1" in c.out))
        c.read(timeout=0.2)
    elif name == "unread_upload":  # POST /ignore: the body's start, then the rest of the window
        c.send(c.headers(1, path="/ignore", method="POST", end_stream=False), DataFrame(1, b"u" * 16384))
        c.read(lambda c: "rst.1" in c.out)
        c.note("first_rst.1", c.out.pop("rst.1"))
        for _ in range(3):  # in flight when the server reset the stream
            c.send(DataFrame(1, b"u" * 16383))
        c.send(c.headers(3))
        c.read(lambda c: ended(3)(c) and "rst.1" in c.out)
        # the window the server gave back on stream 1 (none: it read no more of the body)
        c.note("window_back", int(c.out.get("window.1", 0) > 0))
    elif name == "headers_after_reset":  # trailers on stream 1, which the server reset
        c.send(c.headers(1, path="/hello", method="POST", end_stream=False))
        c.read(lambda c: "rst.1" in c.out)
        c.read(timeout=0.2)
        c.note("first_rst.1", c.out.pop("rst.1"))
        t = HeadersFrame(1, c.enc.encode([("x-trailer", "1")]))
        t.flags.add("END_HEADERS")
        t.flags.add("END_STREAM")
        c.send(t, c.headers(3))
        c.read(lambda c: goaway(c) or (ended(3)(c) and "rst.1" in c.out))
        c.read(timeout=0.2)
    elif name == "headers_on_long_closed":  # stream 1 ended before the server's record of 16
        for sid in range(1, 2 * 17 + 2, 2):
            c.send(c.headers(sid))
            c.read(ended(sid))
        c.read(timeout=0.2)
        c.send(c.headers(1), c.headers(37))
        c.read(lambda c: goaway(c) or (ended(37)(c) and "rst.1" in c.out))
        c.read(timeout=0.2)
    elif name in ("goaway_ping", "goaway_idle"):
        # the client's GOAWAY: a PING 0.1 s later is answered while stream 1 (/slow, 0.5 s)
        # runs, then the server closes at once, not at idle_timeout (2 s); _idle: no stream,
        # a PING right behind the GOAWAY
        c.read(timeout=0.1)
        t = time.time()
        if name == "goaway_ping":
            c.send(c.headers(1, path="/slow"), GoAwayFrame(0, last_stream_id=0, error_code=0))
            c.read(timeout=0.1)
            c.send(PingFrame(0, b"after-ga"))
        else:
            c.send(GoAwayFrame(0, last_stream_id=0, error_code=0), PingFrame(0, b"after-ga"))
        c.read(lambda c: c.closed, timeout=4)
        c.note("prompt", int(time.time() - t < 1.5))
    elif name == "data_on_idle":  # DATA on a stream never opened
        c.send(DataFrame(7, b"x"))
        c.read(goaway)
    elif name == "oversized_frame":  # past SETTINGS_MAX_FRAME_SIZE (16384)
        c.send(c.headers(1, path="/echo", method="POST", end_stream=False),
               DataFrame(1, b"x" * 20000))
        c.read(goaway)
    elif name == "window_overflow":  # WINDOW_UPDATE past 2^31-1
        c.send(WindowUpdateFrame(0, 2 ** 31 - 1))
        c.read(goaway)
    elif name == "slow_reader":  # a zero window: the handler waits, then the stream is cut
        c = Client(port, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 0})
        c.send(c.headers(1, path="/big"))
        t = time.time()
        c.read(lambda c: "rst.1" in c.out, timeout=5)
        c.note("waited", "%.1f" % (time.time() - t))
    elif name == "err_after_head":  # a handler error after the head resets its stream only
        c.send(c.headers(1, path="/err_after_head"))
        c.read(ended(1))
        c.read(lambda c: "rst.1" in c.out, timeout=2)
        c.send(c.headers(3, path="/hello"))
        c.read(ended(3))
    elif name == "graceful":  # SIGTERM (cue) while stream 1 runs
        c.send(c.headers(1, path="/slow"))
        cue()
        c.read(goaway, timeout=4)
        c.send(c.headers(3, path="/hello"))
        c.read(ended(1), timeout=4)
        c.read(timeout=0.5)
    elif name == "ws_graceful":  # SIGTERM (cue) while a WebSocket is open on stream 1
        c.send(c.connect_ws(1))
        cue()
        c.read(lambda c: any(t == "close" for t, _ in c.ws(1)) or "rst.1" in c.out, timeout=4)
        c.send(DataFrame(1, ws_frame(8, b"\x03\xe9"), flags=["END_STREAM"]))  # the client's close
        c.read(lambda c: "end.1" in c.out or "rst.1" in c.out, timeout=4)
        c.read(timeout=0.3)
        c.note_ws(1)
    elif name == "idle":  # no stream at all: GOAWAY after idle_timeout
        t = time.time()
        c.read(goaway, timeout=6)
        c.note("waited", "%.1f" % (time.time() - t))
    elif name == "head_timeout":  # a header block that never ends: read_header_timeout
        c.read(timeout=0.2)  # SETTINGS acknowledged first: nothing may come between the frames
        c.send(HeadersFrame(1, c.block()))
        t = time.time()
        c.read(lambda c: "rst.1" in c.out or "goaway" in c.out, timeout=4)
        c.note("waited", "%.1f" % (time.time() - t))
    elif name == "reload":  # SIGHUP (cue) while stream 1 runs
        c.send(c.headers(1, path="/slow"))
        cue()
        c.read(timeout=0.4)
        c.send(c.headers(3, path="/hello"))
        c.read(lambda c: ended(1)(c) and ended(3)(c), timeout=4)
    elif name == "slow_producer":  # the handler, not the client, is slow: no send_timeout
        c.send(c.headers(1, path="/slow_producer"))
        c.read(lambda c: "rst.1" in c.out or c.out.get("body.1", "").endswith("late"), timeout=4)
    elif name == "body_stall":  # body_timeout (1 s): stalled bodies end, a steady one does not
        t0 = time.time()
        seen = {}

        def note_times(c):  # when each stalled stream ended, from the start
            for key in ("status.1", "rst.1", "rst.3"):
                if key in c.out and key not in seen:
                    seen[key] = time.time() - t0
        # 1: the handler waits in req:body() (408); 3: it does not read (RST_STREAM)
        c.send(c.headers(1, path="/echo", method="POST", end_stream=False), DataFrame(1, b"ab"),
               c.headers(3, path="/busy", method="POST", end_stream=False), DataFrame(3, b"ab"),
               c.headers(5, path="/echo", method="POST", end_stream=False))
        for _ in range(6):  # 5: one byte every 0.4 s, then the end
            c.read(timeout=0.4)
            note_times(c)
            c.send(DataFrame(5, b"x"))
        c.send(DataFrame(5, b"", flags=["END_STREAM"]))
        c.read(lambda c: ended(5)(c) and "rst.1" in c.out and "rst.3" in c.out, timeout=3)
        note_times(c)
        c.send(c.headers(7, path="/hello"))
        c.read(ended(7))
        for key, at in seen.items():
            c.note("at." + key, "%.2f" % at)
    elif name == "body_window":  # a shut window holds the client back: not a stall
        c.send(c.headers(1, path="/late", method="POST", end_stream=False))
        first = 65535  # the stream's whole first window; the handler reads 2.5 s later
        for k in range(0, first, 16384):
            c.send(DataFrame(1, b"y" * min(16384, first - k)))
        c.read(lambda c: c.out.get("window.1", 0) > 0 or ended(1)(c), timeout=5)
        c.send(DataFrame(1, b"z" * 10, flags=["END_STREAM"]))
        c.read(ended(1), timeout=3)
    elif name == "concurrent":  # a slow stream does not hold a fast one
        c.send(c.headers(1, path="/slow"), c.headers(3, path="/hello"))
        c.read(ended(3), timeout=4)
        c.note("slow_done_before_fast", int("status.1" in c.out))
        c.read(ended(1), timeout=4)
    elif name == "stream_then_wake":  # stream 1 (H2_STREAM) waits; stream 3 (H2_WAKE) wakes it
        first = lambda c: "data: first" in c.out.get("body.1", "")
        c.send(c.headers(1, path=os.environ["H2_STREAM"]))
        c.read(first, timeout=3)
        c.note("first_before_wake", int(first(c)))
        c.send(c.headers(3, path=os.environ["H2_WAKE"]))
        c.read(lambda c: "data: second" in c.out.get("body.1", "") and ended(3)(c), timeout=3)
    else:
        raise SystemExit("unknown scenario " + name)
    return c


if __name__ == "__main__":
    scenario(sys.argv[1], int(sys.argv[2])).report()
