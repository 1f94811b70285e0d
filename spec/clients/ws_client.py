"""A WebSocket client for spec/websocket_spec.lua: Debian's python3-websockets,
a third-party implementation that checks our handshake (Sec-WebSocket-Accept,
subprotocol) and framing. Prints one line per step; the spec compares them.

usage: ws_client.py URL SCENARIO
"""
import asyncio
import sys

import websockets


async def echo(url):
    async with websockets.connect(url, subprotocols=["nope", "echo"], max_size=2**21) as ws:
        print("protocol", ws.subprotocol)
        for msg in ["hello", "h\u00e9llo \u2603", b"\x00\x01\xffbin", "x" * 70000, b"y" * 300000, ""]:
            await ws.send(msg)
            got = await ws.recv()
            print(type(got).__name__, len(got), got == msg)
        pong = await ws.ping(b"are you there")
        await asyncio.wait_for(pong, 5)
        print("pong")
        await ws.close(4001, "bye now")
        print("closed", ws.close_code, ws.close_reason)


async def chat(url):
    async with websockets.connect(url) as a, websockets.connect(url) as b:
        await a.recv(), await b.recv()  # "welcome" to each
        await a.send("from a")
        print("a got", await a.recv())
        print("b got", await b.recv())


async def keepalive(url):
    # websockets answers the server's pings itself: the idle timeout must not cut us.
    async with websockets.connect(url, ping_interval=None) as ws:
        await asyncio.sleep(1.5)
        await ws.send("still here")
        print("got", await ws.recv())


async def stop(url):
    async with websockets.connect(url) as ws:
        print("ready", await ws.recv())
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except websockets.ConnectionClosed as e:
            print("closed", e.rcvd.code if e.rcvd else None, e.rcvd.reason if e.rcvd else None)


async def wss(url):
    # Over TLS: the CA file is argv[3]; the server name the certificate has, argv[4].
    import ssl
    ctx = ssl.create_default_context(cafile=sys.argv[3])
    async with websockets.connect(url, ssl=ctx, server_hostname=sys.argv[4]) as ws:
        for msg in ["over tls", b"\x00" * 100000]:
            await ws.send(msg)
            got = await ws.recv()
            print(type(got).__name__, len(got), got == msg)


url, scenario = sys.argv[1], sys.argv[2]
scenarios = {"echo": echo, "chat": chat, "keepalive": keepalive, "stop": stop, "wss": wss}
asyncio.run(scenarios[scenario](url))
