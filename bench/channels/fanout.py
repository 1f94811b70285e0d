"""One publish to N WebSocket subscribers of bench/channels/app.lua: the
server-side delay from the publish to each subscriber's resume.

usage: fanout.py PORT N [ROUNDS]   (python3-websockets; ulimit -n above N)
"""
import asyncio
import sys
import urllib.request

import websockets

port, n = int(sys.argv[1]), int(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3


async def main():
    async def one():
        ws = await websockets.connect("ws://127.0.0.1:%d/chat" % port, max_queue=None,
                                      close_timeout=0.5)
        await ws.recv()
        return ws
    clients = await asyncio.gather(*(one() for _ in range(n)))
    for _ in range(rounds):
        await asyncio.to_thread(
            lambda: urllib.request.urlopen("http://127.0.0.1:%d/pub" % port).read())
        ms = sorted([float(await asyncio.wait_for(c.recv(), 10)) for c in clients])
        print("%d subscribers: min %.1f p50 %.1f p99 %.1f max %.1f ms" % (
            n, ms[0], ms[len(ms) // 2], ms[int(len(ms) * 0.99) - 1], ms[-1]))
    await asyncio.gather(*(c.close() for c in clients))

asyncio.run(main())
