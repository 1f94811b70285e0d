"""WebSocket client frames over asyncio streams, for the spec clients
(drain_client.py, upgrade_client.py): masked text frames out, frames in, and
the opening handshake of a WebSocket on 127.0.0.1."""
import asyncio
import base64
import os
import struct


def frame(payload, opcode=1):
    data = payload.encode()
    mask = os.urandom(4)
    head = bytes([0x80 | opcode])
    if len(data) < 126:
        head += bytes([0x80 | len(data)])
    else:
        head += bytes([0x80 | 126]) + struct.pack("!H", len(data))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data))


async def read_frame(reader):
    """(opcode, payload) of the next frame."""
    b0, b1 = await reader.readexactly(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", await reader.readexactly(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", await reader.readexactly(8))[0]
    return b0 & 0x0F, await reader.readexactly(n)


async def open_ws(port, path="/ws"):
    """Opens a WebSocket; returns reader, writer and the text of its first message."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        ("GET %s HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (path, key)).encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    _, first = await read_frame(reader)
    return reader, writer, first.decode()
