# A WebSocket server on python3-websockets for the client specs: prints
# "port N silent M" once listening on 127.0.0.1. On port N it speaks the
# subprotocols "chat" and "superchat" and answers each message: "frag" with
# the text "fragments" sent in three frames, "header" with the request's
# X-Token header, "close" with a close 4001 "py bye", anything else echoed.
# Port M accepts connections and never answers (a handshake that stalls).
# websockets rejects unmasked client frames (RFC 6455 5.1), so every echo
# here also proves the client masks.
import asyncio, websockets

async def handler(ws, path=None):
    async for msg in ws:
        if msg == "frag":
            await ws.send(["frag", "men", "ts"])
        elif msg == "header":
            await ws.send(ws.request_headers.get("X-Token", "-"))
        elif msg == "close":
            await ws.close(4001, "py bye")
            return
        else:
            await ws.send(msg)

async def silent(reader, writer):
    await asyncio.sleep(3600)

async def main():
    server = await websockets.serve(handler, "127.0.0.1", 0, subprotocols=["chat", "superchat"])
    quiet = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    qport = quiet.sockets[0].getsockname()[1]
    print("port %d silent %d" % (port, qport), flush=True)
    await asyncio.Future()

asyncio.run(main())
