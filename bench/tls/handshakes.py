"""TLS handshakes against a server, one after another, each followed by one
request (GET /, Connection: close) read to the end, so the server has sent
its session tickets before the next. Used by bench/tls/callgrind.sh.

  handshakes.py PORT N full|resumed 1.3|1.2 [SESSION_FILE]

resumed: every connection offers the session of one priming connection
(made first and not counted), as `openssl s_time -reuse` does, and fails if
the server did not resume it. Python's ssl module is OpenSSL's client with
its defaults: X25519 first, psk_dhe_ke for TLS 1.3 resumption."""
import socket
import ssl
import sys

port, n, mode, version = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
v = ssl.TLSVersion.TLSv1_3 if version == "1.3" else ssl.TLSVersion.TLSv1_2
ctx.minimum_version = ctx.maximum_version = v
REQUEST = b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"


def one(session=None):
    raw = socket.create_connection(("127.0.0.1", port))
    s = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
    s.sendall(REQUEST)
    body = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    if b"200" not in body.split(b"\r\n", 1)[0]:
        sys.exit("unexpected answer: %r" % body[:80])
    reused = s.session_reused
    sess = s.session
    s.close()
    return sess, reused


session = None
if mode == "resumed":
    session, _ = one()
for _ in range(n):
    _, reused = one(session)
    if mode == "resumed" and not reused:
        sys.exit("the server did not resume the session")
