"""WebSocket subscribers for spec/channel_spec.lua (Debian's python3-websockets).
Each client opens BASE/chat...; the server's first message is "ready <pid>".
Prints one line per finding; the spec compares them.

usage: chan_client.py BASE SCENARIO [ARG]
  fanout N   N clients, one publish: how many got it, over how many workers
  slow       a subscriber with a queue of 4 that sleeps while 20 are published
  stop       one subscriber; prints "ready", then how its connection ended
  kill PATH  20 clients; a publisher killed holding the lock (its pid is
             written to PATH), then another publish: who still gets it
"""
import asyncio
import collections
import os
import signal
import sys
import time
import urllib.request

import websockets

base = sys.argv[1]
ws_base = base.replace("http://", "ws://")


def get(path, timeout=5):
    with urllib.request.urlopen(base + path, timeout=timeout) as r:
        return r.read().decode()


async def connect(n, query=""):
    async def one():
        ws = await websockets.connect(ws_base + "/chat" + query, max_queue=None, close_timeout=0.5)
        ready = await asyncio.wait_for(ws.recv(), 5)
        return ws, ready.split()[1]
    return await asyncio.gather(*(one() for _ in range(n)))


async def recv_or_none(ws, timeout):
    try:
        return await asyncio.wait_for(ws.recv(), timeout)
    except (asyncio.TimeoutError, websockets.ConnectionClosed):
        return None


async def fanout(n):
    clients = await connect(int(n))
    per_worker = collections.Counter(pid for _, pid in clients)
    t0 = time.monotonic()
    await asyncio.to_thread(get, "/pub?m=hello")
    t_pub = time.monotonic() - t0

    async def timed(ws):
        m = await recv_or_none(ws, 5)
        return m, time.monotonic() - t0
    got = await asyncio.gather(*(timed(ws) for ws, _ in clients))
    print("got", sum(1 for m, _ in got if m == "hello"), "of", len(clients))
    print("workers", len(per_worker))
    # For bench/: from the publish request's start to each client's receive, client time included.
    ms = sorted(t * 1000 for _, t in got)
    print("publish request %.1f ms;" % (t_pub * 1000), "latency ms min %.1f p50 %.1f p99 %.1f max %.1f; per worker %s" % (
        ms[0], ms[len(ms) // 2], ms[int(len(ms) * 0.99) - 1], ms[-1],
        sorted(per_worker.values())), file=sys.stderr)
    await asyncio.gather(*(ws.close() for ws, _ in clients))


async def slow():
    (ws, _), = await connect(1, "?q=4&slow=1")
    t0 = time.monotonic()
    await asyncio.to_thread(get, "/pub?m=msg&n=20")
    print("published in under 0.5 s", str(time.monotonic() - t0 < 0.5).lower())
    while True:
        m = await recv_or_none(ws, 3)
        if m is None:
            break
        print(m)
    await ws.close()


async def kill(path):
    # Accepts are not balanced across workers: connect until both have some.
    clients = await connect(20)
    counts = collections.Counter
    while len(clients) < 300 and (len(counts(p for _, p in clients)) < 2
                                  or min(counts(p for _, p in clients).values()) < 3):
        clients += await connect(10)
    pub = asyncio.ensure_future(asyncio.to_thread(lambda: get_quietly("/pub?m=hold:x", 30)))
    for _ in range(100):
        if os.path.exists(path) and open(path).read().strip():
            break
        await asyncio.sleep(0.05)
    held_by = open(path).read().strip()
    print("held by a worker with subscribers", str(held_by in {p for _, p in clients}).lower())
    os.kill(int(held_by), signal.SIGKILL)
    survivors = [ws for ws, pid in clients if pid != held_by]
    # The killed worker's "hold:x" record was never made visible: survivors see only "after".
    await asyncio.to_thread(get, "/pub?m=after")
    got = await asyncio.gather(*(recv_or_none(ws, 3) for ws in survivors))
    print("survivors", str(len(survivors) > 0).lower(), "all got it",
          str(all(m == "after" for m in got)).lower())
    await pub
    await asyncio.gather(*(ws.close() for ws, _ in clients))


async def stop():
    (ws, _), = await connect(1)
    print("ready", flush=True)
    try:
        await asyncio.wait_for(ws.recv(), 8)
    except websockets.ConnectionClosed as e:
        print("closed", e.rcvd.code if e.rcvd else None)
    except asyncio.TimeoutError:
        print("still open")


def get_quietly(path, timeout):
    try:
        return get(path, timeout)
    except Exception:
        return None


scenario = sys.argv[2]
if scenario == "fanout":
    asyncio.run(fanout(sys.argv[3]))
elif scenario == "slow":
    asyncio.run(slow())
elif scenario == "stop":
    asyncio.run(stop())
elif scenario == "kill":
    asyncio.run(kill(sys.argv[3]))
