"""Requests and WebSockets through a binary upgrade, for spec/upgrade_spec.lua.

usage: upgrade_client.py PORT PID NWS

Opens NWS WebSockets on /ws (each first says its code's VERSION, "v1"),
starts request loops on /version (half with a new connection per request,
half keeping their connection alive until the server says close), sends
SIGUSR2 to PID (the old master; the spec has written v2 of the app
already), and goes on until PID has exited and a little after. Every
failure is counted by kind: a refused connection, a reset or cut one, a
status other than 200. Each WebSocket sends a message once v2 answers new
requests (the echo tells which code still serves it) and then waits for
its close. Prints one JSON object.
"""
import asyncio
import json
import os
import re
import signal
import struct
import sys

from ws_frames import frame, open_ws, read_frame

PORT, PID, NWS = (int(a) for a in sys.argv[1:4])
LOOPS = 4  # of each kind
AFTER_EXIT = 0.5  # seconds of load once the old master is gone
LIMIT = 30  # seconds: the old master must have left by then
TIMEOUT = 5  # seconds for one request: a connection queued where nobody accepts is a failure


class Tally:
    def __init__(self):
        self.requests = 0
        self.refused = 0
        self.cut = 0  # reset, or closed before a whole response
        self.bad_status = 0
        self.timeout = 0
        self.errors = []
        self.versions = []  # in the order seen, runs collapsed (both codes answer while both serve)
        self.old_gone = False
        self.old_after_exit = 0  # answers of the old code after the old master exited
        self.done = False
        self.new_serves = asyncio.Event()

    def fail(self, kind, e):
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.errors) < 5:
            self.errors.append("%s: %r" % (kind, e))

    def saw(self, version):
        self.requests += 1
        if not self.versions or self.versions[-1] != version:
            self.versions.append(version)
        if version == "v2":
            self.new_serves.set()
        elif self.old_gone:
            self.old_after_exit += 1


async def read_response(reader):
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
    body = await reader.readexactly(length)
    closing = re.search(rb"(?i)\r\nconnection: *close", head) is not None
    return status, body, closing


async def request_loop(t, keep_alive):
    reader = writer = None
    while not t.done:
        try:
            if writer is None:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection("127.0.0.1", PORT), TIMEOUT)
            writer.write(b"GET /version HTTP/1.1\r\nHost: a\r\n%s\r\n" %
                         (b"" if keep_alive else b"Connection: close\r\n"))
            status, body, closing = await asyncio.wait_for(read_response(reader), TIMEOUT)
            if status != 200:
                t.fail("bad_status", status)
            else:
                t.saw(body.decode().split("=")[1])
            if closing or not keep_alive:
                writer.close()
                writer = None
        except ConnectionRefusedError as e:
            t.fail("refused", e)
            writer = None
        except asyncio.TimeoutError as e:
            t.fail("timeout", e)
            if writer:
                writer.close()
            writer = None
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            t.fail("cut", e)
            writer = None
        await asyncio.sleep(0.005)
    if writer:
        writer.close()


async def watch_ws(t, reader, writer, i, report):
    await t.new_serves.wait()
    writer.write(frame("m%d" % i))
    try:
        while True:
            op, payload = await asyncio.wait_for(read_frame(reader), LIMIT)
            if op == 8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                report["close_codes"][str(code)] = report["close_codes"].get(str(code), 0) + 1
                writer.write(bytes([0x88, 0x82]) + b"\0\0\0\0" + payload[:2])
                break
            if payload.decode() == "v1:m%d" % i:
                report["echo_old"] += 1
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.TimeoutError) as e:
        report["ws_errors"].append("ws %d: %r" % (i, e))
    writer.close()


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


async def main():
    t = Tally()
    report = {"echo_old": 0, "close_codes": {}, "ws_errors": []}
    wss = [await open_ws(PORT) for _ in range(NWS)]
    report["ws_first"] = sorted({f for _, _, f in wss})
    loops = [asyncio.create_task(request_loop(t, k)) for k in (False, True) for _ in range(LOOPS)]
    watchers = [asyncio.create_task(watch_ws(t, r, w, i, report)) for i, (r, w, _) in enumerate(wss)]
    await asyncio.sleep(0.3)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    os.kill(PID, signal.SIGUSR2)
    while alive(PID) and loop.time() - t0 < LIMIT:
        await asyncio.sleep(0.05)
    report["old_master_left_after"] = loop.time() - t0 if not alive(PID) else None
    t.old_gone = True
    await asyncio.sleep(AFTER_EXIT)
    t.done = True
    await asyncio.gather(*loops)
    t.new_serves.set()  # the WebSockets send their message even if v2 never answered
    await asyncio.wait_for(asyncio.gather(*watchers), LIMIT + 5)
    report.update({"requests": t.requests, "refused": t.refused, "cut": t.cut,
                   "bad_status": t.bad_status, "timeout": t.timeout, "errors": t.errors,
                   "first": t.versions[:1], "last": t.versions[-1:], "old_after_exit": t.old_after_exit})
    print(json.dumps(report))


asyncio.run(main())
