"""Many WebSockets and SSE streams through a reload or a stop, for
spec/drain_spec.lua and spec/drain_stop_spec.lua.

usage: drain_client.py PORT PID NWS NSSE [hup|term]

Opens NWS WebSockets on /ws and NSSE event streams on /sse (each first says
its code's VERSION, "v1"), sends SIGHUP to PID (the spec has written v2 of
the app already), and then watches every connection: what the old code
still says (each WebSocket echoes a message and hears its on_drain; each
stream's events say http.draining()), what a new connection gets, and when
each one is closed, in seconds after the SIGHUP. With "term", SIGTERM
instead: the same code drains, and a new connection is refused (the
listeners closed). Prints one JSON object.
Plain sockets and asyncio: luasocket's select stops at 1,024 descriptors.
"""
import asyncio
import json
import re
import os
import signal
import struct
import sys

from ws_frames import frame, read_frame
from ws_frames import open_ws as open_ws_on

PORT, PID, NWS, NSSE = (int(a) for a in sys.argv[1:5])
STOP = sys.argv[5:6] == ["term"]
OPEN_AT_ONCE = 50


def open_ws():
    return open_ws_on(PORT)


async def open_sse():
    reader, writer = await asyncio.open_connection("127.0.0.1", PORT, limit=1 << 20)
    writer.write(b"GET /sse HTTP/1.1\r\nHost: a\r\n\r\n")
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    line = await reader.readuntil(b"\n\n")
    return reader, writer, line.split(b"data: ", 1)[1].split()[0].decode()


class Watch:
    def __init__(self):
        self.t0 = None
        self.closes = []  # seconds after the SIGHUP
        self.echo_old = 0  # WebSockets whose message after the reload came back from v1
        self.drain_msgs = 0  # WebSockets that heard "drain:v1:true" (on_drain, ws:draining())
        self.sse_draining = 0  # streams with an event saying v1, http.draining() true
        self.close_codes = {}
        self.errors = []

    def now(self):
        return asyncio.get_running_loop().time() - self.t0

    def lost(self, what, e):
        """A connection that ended without its proper close: still a close, and an error."""
        self.closes.append(self.now())
        self.errors.append("%s: %r" % (what, e))


async def watch_ws(w, reader, writer, i, reloaded):
    await reloaded.wait()
    writer.write(frame("m%d" % i))
    saw_echo = saw_drain = False
    try:
        while True:
            op, payload = await read_frame(reader)
            if op == 8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                w.close_codes[code] = w.close_codes.get(code, 0) + 1
                w.closes.append(w.now())
                writer.write(bytes([0x88, 0x82]) + b"\0\0\0\0" + payload[:2])
                break
            text = payload.decode()
            if text == "v1:m%d" % i and not saw_echo:
                saw_echo = True
                w.echo_old += 1
            elif text == "drain:v1:true" and not saw_drain:
                saw_drain = True
                w.drain_msgs += 1
    except (asyncio.IncompleteReadError, ConnectionError) as e:
        w.lost("ws %d" % i, e)
    writer.close()


async def watch_sse(w, reader, writer, i):
    saw = False
    try:
        while True:
            chunk = await reader.readuntil(b"\n")
            if chunk == b"0\r\n":  # the last chunk: the stream ended
                w.closes.append(w.now())
                break
            if b"data: v1 true" in chunk and not saw:
                saw = True
                w.sse_draining += 1
    except (asyncio.IncompleteReadError, ConnectionError) as e:
        w.lost("sse %d" % i, e)
    writer.close()


async def get(path):
    reader, writer = await asyncio.open_connection("127.0.0.1", PORT)
    writer.write(b"GET %s HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n" % path)
    data = await reader.read()
    writer.close()
    return data


async def get_version():
    m = re.search(rb"version=(v\d+)", await get(b"/version"))
    return m and m.group(1).decode()


async def draining_gauge():
    """moonhttp_connections_draining of the start's code (generation 0), None when not shown."""
    m = re.search(rb'moonhttp_connections_draining\{generation="0"\} (\d+)', await get(b"/metrics"))
    return m and int(m.group(1))


async def gauge_until(want, tries):
    got = None
    for _ in range(tries):
        got = await draining_gauge()
        if got == want:
            break
        await asyncio.sleep(0.1)
    return got


async def main():
    w = Watch()
    gate = asyncio.Semaphore(OPEN_AT_ONCE)

    async def gated(opener):
        async with gate:
            return await opener()

    wss = await asyncio.gather(*(gated(open_ws) for _ in range(NWS)))
    sses = await asyncio.gather(*(gated(open_sse) for _ in range(NSSE)))
    firsts = sorted({f for _, _, f in wss} | {f for _, _, f in sses})
    reloaded = asyncio.Event()
    tasks = [asyncio.create_task(watch_ws(w, r, wr, i, reloaded)) for i, (r, wr, _) in enumerate(wss)]
    tasks += [asyncio.create_task(watch_sse(w, r, wr, i)) for i, (r, wr, _) in enumerate(sses)]
    w.t0 = asyncio.get_running_loop().time()
    if STOP:
        os.kill(PID, signal.SIGTERM)
        await asyncio.sleep(0.3)
        try:
            await get(b"/version")
            refused = False
        except ConnectionRefusedError:
            refused = True
        reloaded.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        print(json.dumps({
            "opened_ws": len(wss), "opened_sse": len(sses), "first_versions": firsts,
            "refused": refused, "echo_old": w.echo_old, "drain_msgs": w.drain_msgs,
            "sse_draining": w.sse_draining, "close_codes": {str(k): v for k, v in w.close_codes.items()},
            "closes": sorted(w.closes), "errors": w.errors[:5],
        }))
        return
    os.kill(PID, signal.SIGHUP)
    new_version, waited = None, 0
    while new_version != "v2" and waited < 100:
        await asyncio.sleep(0.05)
        waited += 1
        try:
            new_version = await get_version()
        except OSError:
            pass
    reloaded.set()
    r, wr, new_ws = await open_ws()  # a new WebSocket during the drain window
    new_after = w.now()
    wr.close()
    gauge = await gauge_until(NWS + NSSE, 20)  # published every 0.5 s
    await asyncio.wait_for(asyncio.gather(*tasks), 60)
    gauge_after = await gauge_until(None, 30)
    print(json.dumps({
        "opened_ws": len(wss), "opened_sse": len(sses), "first_versions": firsts,
        "new_version": new_version, "new_ws": new_ws, "new_after": new_after, "gauge": gauge, "gauge_after": gauge_after,
        "echo_old": w.echo_old, "drain_msgs": w.drain_msgs, "sse_draining": w.sse_draining,
        "close_codes": {str(k): v for k, v in w.close_codes.items()},
        "closes": sorted(w.closes), "errors": w.errors[:5],
    }))


asyncio.run(main())
