#!/usr/bin/python3
"""The soak test's driver (run it through bench/soak.sh).

Starts its own redis-server and PostgreSQL cluster on free loopback ports,
then moonhttp with two workers serving examples/linkboard.lua over HTTP/1.1
(and h2c) and HTTPS (h2), and for SOAK_SECONDS runs a modest load mix: plain
GETs and static files, DB reads and writes, a Redis route, an HTTP/2 client,
WebSocket clients that stay connected and exchange messages, SSE clients, and
one short wrk burst. On a schedule scaled to the duration it opens quiet gaps
(no traffic and no client connection at all) longer than the pools' idle
timeout, sends SIGHUP, SIGKILLs a worker twice and restarts Redis and
PostgreSQL once each. Every fault opens a fault window; failures inside one
are expected and counted apart. Every SAMPLE_EVERY seconds it reads each
worker's and the master's RSS and open descriptors from /proc, the worker
pids, and the connections Redis and PostgreSQL see.

It exits 1 on any process exit it did not cause, any failed request outside
the fault windows, RSS/fd growth past the bounds below, or a sanitizer report
(or an error logged as "(error object is not a string)") in the server's log; 2 when it could not set up; 0 otherwise. Debian's python3-h2 and python3-websockets (the
system /usr/bin/python3), redis-server, postgresql 15, openssl and wrk.
"""
import asyncio
import datetime
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import websockets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("MOONHTTP_BIN") or os.path.join(ROOT, "build", "moonhttp")
APP = os.path.join(ROOT, "examples", "linkboard.lua")
DURATION = float(os.environ.get("SOAK_SECONDS", "600"))
OUT_DIR = os.environ.get("SOAK_OUT") or os.path.join(ROOT, "build", "soak")
STATE = os.environ.get("SOAK_STATE")  # where soak.sh's trap finds what to stop
PG_BIN = os.environ.get("PG_BINDIR", "/usr/lib/postgresql/15/bin")
HOST = "127.0.0.1"

# --- The bounds (also in bench/notes/2026-12-02-lab-notebook.md) ---------------------------------
POOL_IDLE = 2.0          # LINKBOARD_IDLE: the PostgreSQL and Redis pools' idle_timeout
GAP = 3 * POOL_IDLE + 2  # a quiet gap: every parked connection expires in it
FAULT_GRACE = 5.0        # a fault window ends this long after the fault is over
WARMUP = min(20.0, DURATION / 9)  # the RSS/fd baseline is taken after it
RSS_GROWTH = (0.5, 20 << 20)      # last <= first * 1.5 + 20 MiB, per process
# The load holds at most 12 client connections, 5 PostgreSQL and a few Redis
# connections and 3 cached static files: a worker's descriptors move by ~20
# between an idle and a busy sample, while a leak of one per request or per
# reload passes 32 within seconds.
FD_GROWTH = 32                    # last <= first + 32 open descriptors, per process


def sanitized(binary):
    """Whether binary is an ASan build (make asan)."""
    try:
        with open(binary, "rb") as f:
            return b"__asan_init" in f.read()
    except OSError:
        return False


# An ASan build keeps freed memory in its quarantine until the quarantine is
# full, and shadows it (an eighth more): its RSS may rise by that much with no
# leak at all. The soak caps the quarantine (ASAN_OPTIONS quarantine_size_mb)
# and allows for it, so RSS is judged in both builds (LeakSanitizer also
# judges leaks, at exit).
ASAN_QUARANTINE_MB = 64
RSS_SLACK = (ASAN_QUARANTINE_MB << 20) * 9 // 8 if sanitized(BIN) else 0


def rss_within(first, last):
    """The RSS bound: last <= first * 1.5 + 20 MiB (+ the quarantine in ASan)."""
    return last <= first * (1 + RSS_GROWTH[0]) + RSS_GROWTH[1] + RSS_SLACK


SAMPLE_EVERY = 2.0
REQUEST_TIMEOUT = 10.0


def log(*a):
    print(f"[soak {time.time() - T0:7.1f}s]", *a, flush=True)


T0 = time.time()


def now():
    return time.time() - T0


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


# --- Outcomes ---------------------------------------------------------------
class Stats:
    """Outcomes by class; a failure is judged against the fault windows at the end."""

    def __init__(self):
        self.ok = {}
        self.failures = []   # (class, start, end, what)
        self.notes = {}      # (class, what) -> count: expected events that are not failures
        self.windows = []    # [kind, start, end]

    def good(self, cls, n=1):
        self.ok[cls] = self.ok.get(cls, 0) + n

    def fail(self, cls, start, what):
        self.failures.append((cls, start, now(), what))

    def note(self, cls, what):
        self.notes[(cls, what)] = self.notes.get((cls, what), 0) + 1

    def window_of(self, start, end):
        """The faults whose windows [start, end] overlaps ("sighup+worker kill"), or None."""
        kinds = [kind for kind, ws, we in self.windows
                 if start <= (we if we is not None else 1e18) and end >= ws]
        return "+".join(dict.fromkeys(kinds)) or None


STATS = Stats()


class Gate:
    """Open while load runs; closed for a quiet gap: clients close every connection."""

    def __init__(self):
        self.open = asyncio.Event()
        self.open.set()
        self.stop = False
        self.connected = 0  # clients holding a connection now

    def closed(self):
        return self.stop or not self.open.is_set()

    async def wait(self):
        await self.open.wait()


GATE = None


# --- HTTP/1.1 ----------------------------------------------------------------
class Retry(Exception):
    pass


class H1:
    """One keep-alive HTTP/1.1 connection. A request that finds its reused
    connection closed before any byte of the answer is sent again once, on a
    new connection, as browsers do (RFC 9112 §9.3.1); that is counted."""

    def __init__(self, port, cls):
        self.port, self.cls = port, cls
        self.r = self.w = None
        self.used = 0
        self.cookie = None

    async def close(self):
        if self.w:
            GATE.connected -= 1
            self.w.close()
            try:
                await self.w.wait_closed()
            except Exception:
                pass
        self.r = self.w = None

    async def head(self, method, path, body=b"", headers=()):
        if self.w is None:
            self.r, self.w = await asyncio.open_connection(HOST, self.port)
            GATE.connected += 1
            self.used = 0
        lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}:{self.port}"]
        if body or method in ("PUT", "POST"):
            lines.append(f"Content-Length: {len(body)}")
        if self.cookie:
            lines.append("Cookie: " + self.cookie)
        lines += list(headers)
        self.w.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await self.w.drain()
        line = await self.r.readline()
        if not line:
            raise Retry("closed before the status line")
        status = int(line.split()[1])
        hdrs = {}
        while True:
            h = await self.r.readline()
            if not h:
                raise ConnectionError("closed in the head")
            if h == b"\r\n":
                break
            k, v = h.decode("latin-1").split(":", 1)
            hdrs.setdefault(k.strip().lower(), []).append(v.strip())
        return status, hdrs

    async def body(self, hdrs):
        if "chunked" in ",".join(hdrs.get("transfer-encoding", [])):
            out = b""
            while True:
                size = int((await self.r.readline()).split(b";")[0], 16)
                data = await self.r.readexactly(size + 2)
                if size == 0:
                    return out
                out += data[:-2]
        n = int(hdrs.get("content-length", ["0"])[0])
        return await self.r.readexactly(n)

    async def request(self, method, path, body=b"", headers=()):
        for attempt in (0, 1):
            reused = self.w is not None and self.used > 0
            try:
                status, hdrs = await self.head(method, path, body, headers)
                data = await self.body(hdrs)
            except (Retry, ConnectionError, OSError) as e:
                await self.close()
                if reused and attempt == 0 and (isinstance(e, Retry) or isinstance(e, (BrokenPipeError, ConnectionResetError))):
                    STATS.note(self.cls, "resent: kept-alive connection closed before the answer")
                    continue
                raise
            except BaseException:
                await self.close()
                raise
            self.used += 1
            if "close" in ",".join(hdrs.get("connection", [])).lower():
                await self.close()
            return status, hdrs, data


def check_answer(path, data):
    """What is wrong with a 2xx answer's body, or None: the routes' own contracts."""
    try:
        if path == "/health":
            return None if data == b"ok\n" else "body is not ok"
        if path.startswith("/static/"):
            return None if data else "empty file"
        doc = json.loads(data)
        if path == "/links":
            return None if isinstance(doc.get("links"), list) else "links is not a list"
        if path.endswith("/vote"):
            return None if isinstance(doc.get("votes"), int) else "votes is not a number"
        if path.startswith("/links/"):
            return None if doc.get("id") == path.rsplit("/", 1)[1] else "wrong id"
        if path == "/stats":
            return None if isinstance(doc.get("requests"), int) else "no request count"
    except ValueError as e:
        return f"not JSON: {e}"
    return None


async def http_client(port, cls, pick, rate):
    """`rate` requests a second of pick(i) -> (method, path, body) while the gate is open."""
    c = H1(port, cls)
    i = 0
    while not GATE.stop:
        if GATE.closed():
            await c.close()
            await GATE.wait()
            continue
        i += 1
        method, path, body = pick(i)
        t = now()
        try:
            if cls == "db-write" and not c.cookie:
                st, hd, _ = await asyncio.wait_for(c.request("POST", "/login", b"name=soak",
                    ("Content-Type: application/x-www-form-urlencoded",)), REQUEST_TIMEOUT)
                if st != 200:
                    raise ConnectionError(f"login answered {st}")
                c.cookie = hd["set-cookie"][0].split(";")[0]
            st, _, data = await asyncio.wait_for(c.request(method, path, body), REQUEST_TIMEOUT)
            bad = check_answer(path, data) if 200 <= st < 300 else None
            if bad:
                STATS.fail(cls, t, f"{method} {path} -> {st}, {bad}: {data[:120]!r}")
            elif 200 <= st < 300:
                STATS.good(cls)
            else:
                STATS.fail(cls, t, f"{method} {path} -> {st} {data[:120]!r}")
        except asyncio.TimeoutError:
            await c.close()
            STATS.fail(cls, t, f"{method} {path}: no answer in {REQUEST_TIMEOUT:g} s")
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError, Retry) as e:
            await c.close()
            STATS.fail(cls, t, f"{method} {path}: {type(e).__name__}: {e}")
        await asyncio.sleep(1 / rate)
    await c.close()


async def slow_upload_client(port):
    """A link PUT whose 1 KiB body trickles in, 64 bytes every 0.5 s (8 s in
    all): slow but steady, so no timeout may cut it (issue 29's body_timeout
    is about bodies that stop, not slow ones)."""
    cls = "slow-upload"
    c = H1(port, cls)
    i = 0
    while not GATE.stop:
        if GATE.closed():
            await c.close()
            await GATE.wait()
            continue
        i += 1
        t = now()
        body = b'{"url":"https://example.com/slow","title":"%s"}' % (b"s" * 180)
        body += b" " * (1024 - len(body))
        try:
            if not c.cookie:
                st, hd, _ = await asyncio.wait_for(c.request("POST", "/login", b"name=slow",
                    ("Content-Type: application/x-www-form-urlencoded",)), REQUEST_TIMEOUT)
                c.cookie = hd["set-cookie"][0].split(";")[0]
            await c.close()  # a fresh connection: the trickle must not race a keep-alive close
            c.r, c.w = await asyncio.open_connection(HOST, port)
            GATE.connected += 1
            c.w.write((f"PUT /links/slow-{i % 20} HTTP/1.1\r\nHost: {HOST}\r\nCookie: {c.cookie}\r\n"
                       f"Content-Length: {len(body)}\r\n\r\n").encode())
            for k in range(0, len(body), 64):
                c.w.write(body[k:k + 64])
                await c.w.drain()
                await asyncio.sleep(0.5)
            line = await asyncio.wait_for(c.r.readline(), REQUEST_TIMEOUT)
            if not line.startswith(b"HTTP/1.1 200"):
                raise ConnectionError(f"answered {line.strip()!r}" if line else "closed during the upload")
            STATS.good(cls)
        except asyncio.TimeoutError:
            STATS.fail(cls, t, "no answer")
        except (ConnectionError, OSError, KeyError) as e:
            STATS.fail(cls, t, f"PUT: {type(e).__name__}: {e}")
        await c.close()
        await asyncio.sleep(1)
    await c.close()


# --- Server-sent events ------------------------------------------------------
async def sse_client(port, n):
    """Follows /events?every=1 and resumes after Last-Event-ID when a stream
    ends cleanly (a reload ends it: http.sleep returns "stopping")."""
    cls = "sse"
    last = 0
    while not GATE.stop:
        if GATE.closed():
            await GATE.wait()
            continue
        c = H1(port, cls)
        t = now()
        try:
            st, hdrs = await asyncio.wait_for(c.head("GET", "/events?every=1", b"",
                (f"Last-Event-ID: {last}",)), REQUEST_TIMEOUT)
            if st != 200:
                raise ConnectionError(f"answered {st}")
            STATS.note(cls, "streams opened")
            buf = b""
            while not GATE.closed():
                line = await asyncio.wait_for(c.r.readline(), 5)
                if not line:
                    raise ConnectionError("stream cut before its last chunk")
                size = int(line.split(b";")[0], 16)
                chunk = await asyncio.wait_for(c.r.readexactly(size + 2), 5)
                if size == 0:
                    STATS.note(cls, "streams ended by the server (reload or stop): resumed")
                    break
                buf += chunk[:-2]
                while b"\n\n" in buf:
                    ev, buf = buf.split(b"\n\n", 1)
                    m = re.search(rb"^id: (\d+)", ev, re.M)
                    if m:
                        last = int(m.group(1))
                        STATS.good(cls)
                t = now()
        except asyncio.TimeoutError:
            STATS.fail(cls, t, "no event for 5 s (every=1)")
        except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError, Retry) as e:
            STATS.fail(cls, t, f"stream: {type(e).__name__}: {e}")
        await c.close()
        await asyncio.sleep(0.2)


# --- WebSocket -----------------------------------------------------------------
async def ws_client(port, n):
    """Stays connected and sends "ping N" every second, expecting "pong N".
    A close with 1001 (the server going away on a reload) is reconnected."""
    cls = "websocket"
    seq = 0
    while not GATE.stop:
        if GATE.closed():
            await GATE.wait()
            continue
        t = now()
        try:
            async with websockets.connect(f"ws://{HOST}:{port}/ws", open_timeout=5, close_timeout=2,
                                          ping_interval=None) as ws:
                GATE.connected += 1
                try:
                    STATS.note(cls, "connections opened")
                    while not GATE.closed():
                        seq += 1
                        t = now()
                        await ws.send(f"ping {seq}")
                        while True:
                            msg = await asyncio.wait_for(ws.recv(), 5)
                            if msg == f"pong {seq}":
                                STATS.good(cls)
                                break
                            STATS.note(cls, "new-link messages received")
                        await asyncio.sleep(1)
                finally:
                    GATE.connected -= 1
        except websockets.ConnectionClosed as e:
            code = e.rcvd.code if e.rcvd else 1006
            if code == 1001:
                STATS.note(cls, "closed 1001 by the server (reload): reconnected")
            else:
                STATS.fail(cls, t, f"closed {code}")
        except asyncio.TimeoutError:
            STATS.fail(cls, t, "no pong in 5 s")
        except (OSError, websockets.WebSocketException) as e:
            STATS.fail(cls, t, f"{type(e).__name__}: {e}")
        await asyncio.sleep(0.2)


# --- HTTP/2 over TLS -----------------------------------------------------------
class H2:
    def __init__(self, port, ca):
        self.port, self.ca = port, ca
        self.w = None

    async def connect(self):
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.set_alpn_protocols(["h2"])
        self.r, self.w = await asyncio.open_connection(HOST, self.port, ssl=ctx, server_hostname="localhost")
        GATE.connected += 1
        if self.w.get_extra_info("ssl_object").selected_alpn_protocol() != "h2":
            raise ConnectionError("ALPN did not choose h2")
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.streams = {}
        self.goaway = None
        self.dead = None
        self.w.write(self.conn.data_to_send())
        self.reader = asyncio.create_task(self.read_loop())

    async def read_loop(self):
        try:
            while True:
                data = await self.r.read(65536)
                if not data:
                    raise ConnectionError("closed")
                for ev in self.conn.receive_data(data):
                    s = self.streams.get(getattr(ev, "stream_id", None))
                    if isinstance(ev, h2.events.ResponseReceived) and s:
                        s["status"] = int(dict(ev.headers)[b":status"])
                    elif isinstance(ev, h2.events.DataReceived):
                        self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                        if s:
                            s["body"] += ev.data
                    elif isinstance(ev, h2.events.StreamEnded) and s and not s["fut"].done():
                        s["fut"].set_result(s)
                    elif isinstance(ev, h2.events.StreamReset) and s and not s["fut"].done():
                        s["fut"].set_exception(ConnectionError(f"RST_STREAM {ev.error_code}"))
                    elif isinstance(ev, h2.events.ConnectionTerminated):
                        self.goaway = ev.last_stream_id
                        for sid, st in self.streams.items():
                            if sid > ev.last_stream_id and not st["fut"].done():
                                st["fut"].set_exception(Retry("after GOAWAY"))
                self.w.write(self.conn.data_to_send())
        except Exception as e:
            # After a GOAWAY, python-h2 refuses the frames of the streams the
            # server still finishes (its state machine is CLOSED): those GETs
            # are sent again on a new connection, as after the connection's end.
            self.dead = e
            if self.conn.state_machine.state == h2.connection.ConnectionState.CLOSED and self.goaway is None:
                self.goaway = -1  # the GOAWAY came in the same read as the frames refused after it
            for st in self.streams.values():
                if not st["fut"].done():
                    st["fut"].set_exception(e if self.goaway is None else Retry("connection ended after GOAWAY"))

    async def close(self):
        if self.w:
            GATE.connected -= 1
            self.reader.cancel()
            self.w.close()
            try:
                await self.w.wait_closed()
            except Exception:
                pass
        self.w = None

    async def get(self, path):
        for attempt in (0, 1):
            if self.w is None or self.goaway is not None or self.dead is not None:
                if self.w is not None:
                    STATS.note("h2", "reconnected after GOAWAY (reload)" if self.goaway is not None
                               else "reconnected")
                await self.close()
                await self.connect()
            sid = self.conn.get_next_available_stream_id()
            fut = asyncio.get_running_loop().create_future()
            self.streams[sid] = {"status": None, "body": b"", "fut": fut}
            self.conn.send_headers(sid, [(":method", "GET"), (":path", path), (":scheme", "https"),
                                         (":authority", f"localhost:{self.port}")], end_stream=True)
            self.w.write(self.conn.data_to_send())
            try:
                s = await fut
                return s["status"], s["body"]
            except Retry:
                if attempt == 1:
                    raise
                STATS.note("h2", "resent on a new connection after a GOAWAY (reload)")
            finally:
                self.streams.pop(sid, None)


async def h2_client(port, ca):
    cls = "h2"
    c = H2(port, ca)
    paths = ["/health", "/links", "/stats", "/static/style.css"]
    i = 0
    while not GATE.stop:
        if GATE.closed():
            await c.close()
            await GATE.wait()
            continue
        i += 1
        path = paths[i % len(paths)]
        t = now()
        try:
            st, body = await asyncio.wait_for(c.get(path), REQUEST_TIMEOUT)
            bad = check_answer(path, body) if 200 <= st < 300 else None
            if bad:
                STATS.fail(cls, t, f"GET {path} -> {st}, {bad}: {body[:120]!r}")
            elif 200 <= st < 300:
                STATS.good(cls)
            else:
                STATS.fail(cls, t, f"GET {path} -> {st} {body[:120]!r}")
        except asyncio.TimeoutError:
            await c.close()
            STATS.fail(cls, t, f"GET {path}: no answer in {REQUEST_TIMEOUT:g} s")
        except (ConnectionError, OSError, Retry, ssl.SSLError, h2.exceptions.ProtocolError) as e:
            await c.close()
            STATS.fail(cls, t, f"GET {path}: {type(e).__name__}: {e}")
        await asyncio.sleep(0.5)
    await c.close()


# --- Services --------------------------------------------------------------------
def run(cmd, **kw):
    r = subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({r.returncode}): {r.stdout}{r.stderr}")
    return r.stdout


def as_postgres(cmd):
    return ["runuser", "-u", "postgres", "--"] + cmd if os.geteuid() == 0 else cmd


def remember(line):
    if STATE:
        with open(STATE, "a") as f:
            f.write(line + "\n")


class Services:
    def __init__(self, tmp):
        self.tmp = tmp
        self.redis_port, self.pg_port = free_port(), free_port()
        self.redis = None
        self.pgdata = os.path.join(tmp, "pg", "data")

    def start_redis(self):
        self.redis = subprocess.Popen(["redis-server", "--port", str(self.redis_port), "--bind", HOST,
                                       "--save", "", "--appendonly", "no", "--dir", self.tmp],
                                      stdout=open(os.path.join(self.tmp, "redis.log"), "a"),
                                      stderr=subprocess.STDOUT)
        remember(f"pid {self.redis.pid}")
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(self.redis_port), "ping"], capture_output=True,
                              text=True).stdout.strip() == "PONG":
                return
            time.sleep(0.05)
        raise RuntimeError("redis-server did not answer")

    def stop_redis(self):
        if self.redis and self.redis.poll() is None:
            self.redis.terminate()
            try:
                self.redis.wait(10)
            except subprocess.TimeoutExpired:
                self.redis.kill()
                self.redis.wait()

    def pg_ctl(self, *args):
        return run(as_postgres([f"{PG_BIN}/pg_ctl", "-D", self.pgdata, "-l",
                                os.path.join(self.tmp, "pg", "server.log"), "-w", "-t", "60"] + list(args)))

    def start_pg(self):
        pgdir = os.path.join(self.tmp, "pg")
        os.mkdir(pgdir)
        if os.geteuid() == 0:
            shutil.chown(pgdir, "postgres")
        run(as_postgres([f"{PG_BIN}/initdb", "-D", self.pgdata, "-U", "postgres", "--auth=trust",
                         "-E", "UTF8", "--locale=C", "--no-sync"]))
        with open(os.path.join(self.pgdata, "postgresql.conf"), "a") as f:
            f.write(f"listen_addresses = '{HOST}'\nport = {self.pg_port}\nunix_socket_directories = '{pgdir}'\n"
                    "max_connections = 60\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n")
        remember(f"pgdata {self.pgdata}")
        self.pg_ctl("start")
        self.psql("create table if not exists links (id text primary key, url text not null, "
                  "title text not null, author text not null, created timestamptz not null default now())")

    def psql(self, sql, timeout=10):
        return run([f"{PG_BIN}/psql", "-X", "-q", "-A", "-t", "-h", HOST, "-p", str(self.pg_port),
                    "-U", "postgres", "-d", "postgres", "-c", sql], timeout=timeout)

    def stop_pg(self):
        if os.path.exists(os.path.join(self.pgdata, "postmaster.pid")):
            subprocess.run(as_postgres([f"{PG_BIN}/pg_ctl", "-D", self.pgdata, "-w", "-t", "30", "stop",
                                        "-m", "immediate"]), capture_output=True)

    def connections(self):
        """(redis, pg) connections held by others than this query, None when it failed."""
        rc = pg = None
        try:
            out = run(["redis-cli", "-p", str(self.redis_port), "info", "clients"], timeout=3)
            rc = int(re.search(r"connected_clients:(\d+)", out).group(1)) - 1
        except Exception:
            pass
        try:
            pg = int(self.psql("select count(*) from pg_stat_activity where backend_type = 'client backend' "
                               "and pid <> pg_backend_pid()", timeout=3).strip())
        except Exception:
            pass
        return rc, pg


# --- The server and its processes ------------------------------------------------------
def proc_stat(pid):
    """(RSS bytes, open fds) of a process, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = int(re.search(r"VmRSS:\s+(\d+) kB", f.read()).group(1)) << 10
        return rss, len(os.listdir(f"/proc/{pid}/fd"))
    except (OSError, AttributeError):
        return None


def children(pid):
    r = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return sorted(int(p) for p in r.stdout.split())


def start_time(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except OSError:
        return 0


class Sampler:
    def __init__(self, master, services):
        self.master, self.services = master, services
        self.samples = {}     # pid -> [(t, rss, fds)]
        self.seen = {}        # pid -> (first seen, last seen)
        self.conns = []       # (t, redis, pg, in_gap)
        self.in_gap = False
        self.master_exit = None

    async def run(self):
        while not GATE.stop:
            self.sample()
            rc, pg = await asyncio.to_thread(self.services.connections)
            self.conns.append((now(), rc, pg, self.in_gap))
            await asyncio.sleep(SAMPLE_EVERY)

    def save(self, path):
        """Every sample as a table, for a look beyond the report's first -> last."""
        with open(path, "w") as f:
            f.write("t\tpid\trole\trss_kib\tfds\n")
            for pid, ss in sorted(self.samples.items()):
                role = "master" if pid == self.master.pid else "worker"
                for t, rss, fds in ss:
                    f.write(f"{t:.1f}\t{pid}\t{role}\t{rss >> 10}\t{fds}\n")
            for t, rc, pg, gap in self.conns:
                f.write(f"{t:.1f}\t-\tconnections\tredis={rc}\tpostgres={pg}{' gap' if gap else ''}\n")

    def sample(self):
        t = now()
        if self.master.poll() is not None and self.master_exit is None:
            self.master_exit = (t, self.master.returncode)
        for pid in [self.master.pid] + children(self.master.pid):
            st = proc_stat(pid)
            if st:
                self.samples.setdefault(pid, []).append((t, *st))
                first = self.seen.get(pid, (t, t))[0]
                self.seen[pid] = (first, t)


# --- Faults ---------------------------------------------------------------------------
class Faults:
    def __init__(self, master, services, sampler, http_port):
        self.master, self.services, self.sampler = master, services, sampler
        self.http_port = http_port
        self.killed = set()
        self.done = []  # (t, what)
        self.wrk = None

    def open_window(self, kind):
        w = [kind, now(), None]
        STATS.windows.append(w)
        return w

    async def close_window(self, w):
        await asyncio.sleep(FAULT_GRACE)
        w[2] = now()

    async def wait_workers(self, n, exclude=(), timeout=30):
        end = time.time() + timeout
        while time.time() < end:
            ws = [p for p in children(self.master.pid) if p not in exclude]
            if len(ws) >= n:
                return ws
            await asyncio.sleep(0.1)
        return []

    async def sighup(self):
        w = self.open_window("sighup")
        old = children(self.master.pid)
        self.master.send_signal(signal.SIGHUP)
        await self.wait_workers(2, exclude=old)
        self.done.append((now(), f"SIGHUP (workers {old} retire)"))
        asyncio.create_task(self.close_window(w))

    async def kill(self):
        ws = children(self.master.pid)
        if not ws:
            self.done.append((now(), "kill: no worker to kill"))
            return
        victim = max(ws, key=start_time)
        w = self.open_window("worker kill")
        self.killed.add(victim)
        os.kill(victim, signal.SIGKILL)
        await self.wait_workers(2, exclude=[victim])
        self.done.append((now(), f"SIGKILL worker {victim}"))
        asyncio.create_task(self.close_window(w))

    async def restart_redis(self):
        w = self.open_window("redis restart")
        await asyncio.to_thread(self.services.stop_redis)
        await asyncio.sleep(1)
        await asyncio.to_thread(self.services.start_redis)
        self.done.append((now(), "Redis restarted"))
        asyncio.create_task(self.close_window(w))

    async def restart_pg(self):
        w = self.open_window("postgres restart")
        await asyncio.to_thread(self.services.pg_ctl, "restart", "-m", "fast")
        self.done.append((now(), "PostgreSQL restarted (fast)"))
        asyncio.create_task(self.close_window(w))

    async def gap(self):
        GATE.open.clear()
        t = now()
        start = t
        while GATE.connected > 0 and now() - t < 10:
            await asyncio.sleep(0.05)
        self.sampler.in_gap = True
        await asyncio.sleep(GAP)
        self.sampler.in_gap = False
        self.done.append((now(), f"quiet gap {start:.1f}-{now():.1f}s (clients still connected after 10 s: "
                                f"{GATE.connected})"))
        GATE.open.set()

    async def burst(self):
        t = now()
        proc = await asyncio.create_subprocess_exec(
            "wrk", "-t1", "-c4", "-d2s", f"http://{HOST}:{self.http_port}/health",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out = (await proc.communicate())[0].decode()
        m = re.search(r"(\d+) requests in", out)
        n = int(m.group(1)) if m else 0
        bad = sum(int(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
        non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
        bad += int(non2xx.group(1)) if non2xx else 0
        STATS.good("wrk burst", n - bad)
        for _ in range(bad):
            STATS.fail("wrk burst", t, "wrk: socket error or non-2xx")
        self.done.append((now(), f"wrk burst: {n} requests, {bad} errors"))

    def schedule(self):
        d = DURATION
        hup = 60.0 if d >= 180 else d / 3
        gap_every = min(100.0, d / 3)
        ev = [(k * hup, "sighup", self.sighup) for k in range(1, int(d / hup)) if k * hup < d - 10]
        ev += [(gap_every / 2 + k * gap_every, "gap", self.gap) for k in range(int(d / gap_every))]
        ev += [(0.26 * d, "kill", self.kill), (0.71 * d, "kill", self.kill),
               (0.41 * d, "redis", self.restart_redis), (0.56 * d, "pg", self.restart_pg),
               (0.78 * d, "wrk", self.burst)]
        return sorted(((t, n, f) for t, n, f in ev if t < d - 5), key=lambda e: e[0])

    async def run(self):
        for t, name, fn in self.schedule():
            if GATE.stop:
                return
            if t > now():
                await asyncio.sleep(t - now())
            log(f"fault/event: {name}")
            await fn()


# --- The report -------------------------------------------------------------------------
EXIT_RE = [
    (re.compile(r"\] (\d+): worker (\d+) exited unexpectedly \(([^)]*)\)"), "exited unexpectedly"),
    (re.compile(r"\] (\d+): worker (\d+) stopped; replacing it"), "exited with status 0 while serving"),
    (re.compile(r"\] (\d+): old worker (\d+) stopped \(([^)]*)\)"), "retired by a reload"),
    (re.compile(r"\] (\d+): old worker (\d+) did not stop in shutdown_timeout"), "retiring, killed at shutdown_timeout"),
]


def exits_from_log(logtext, killed, master_pid):
    """Every worker exit the master logged: (pid, what, reason, explained)."""
    out = []
    lines = logtext.splitlines()
    for line in lines:
        for rx, what in EXIT_RE:
            m = rx.search(line)
            if not m or int(m.group(1)) != master_pid:
                continue
            pid = int(m.group(2))
            reason = m.group(3) if rx.groups >= 3 else "exit status 0"
            if what == "exited unexpectedly":
                explained = pid in killed and reason == "killed by signal 9"
                cause = "SIGKILL by the soak" if explained else reason
            elif what == "retired by a reload":
                explained, cause = True, f"SIGHUP ({reason})"
            elif what.startswith("retiring"):
                explained, cause = True, "SIGHUP, killed after shutdown_timeout"
            else:
                explained, cause = False, "exit status 0"
            own = [l for l in lines if f"] {pid}: " in l][-3:]
            out.append((pid, what, cause, explained, line, own, log_time(line)))
    return out


def log_time(line):
    """A log line's timestamp as seconds since the soak started (None if it has none)."""
    try:
        stamp = datetime.datetime.strptime(line[:24], "%Y-%m-%dT%H:%M:%S.%fZ")
    except ValueError:
        return None
    return stamp.replace(tzinfo=datetime.timezone.utc).timestamp() - T0


def report(sampler, faults, services, logtext, final_status):
    R = []
    p = R.append
    fails = False
    p(f"moonhttp soak: {DURATION:g} s of examples/linkboard.lua, 2 workers, {BIN}")
    p(f"bounds: RSS last <= first x {1 + RSS_GROWTH[0]:g} + {(RSS_GROWTH[1] + RSS_SLACK) >> 20} MiB"
      + (f" (ASan: {ASAN_QUARANTINE_MB} MiB of quarantine and its shadow)" if RSS_SLACK else "")
      + f" and fds last <= first + "
      f"{FD_GROWTH} per process (first: the first sample after {WARMUP:g} s of its life); pool idle_timeout "
      f"{POOL_IDLE:g} s, quiet gaps {GAP:g} s, fault windows end {FAULT_GRACE:g} s after the fault")
    p("")
    p("events:")
    for t, what in faults.done:
        p(f"  {t:7.1f}s  {what}")
    p("")
    p("requests by class and outcome (failures judged against the fault windows):")
    classes = sorted(set(STATS.ok) | {f[0] for f in STATS.failures})
    outside = []
    p(f"  {'class':12} {'ok':>8} {'failed in a fault window':>26} {'failed outside':>15}")
    for cls in classes:
        fin = {}
        fout = []
        for f in STATS.failures:
            if f[0] != cls:
                continue
            kind = STATS.window_of(f[1], f[2])
            if kind:
                fin[kind] = fin.get(kind, 0) + 1
            else:
                fout.append(f)
        outside += fout
        fin_s = ", ".join(f"{k}: {v}" for k, v in sorted(fin.items())) or "0"
        p(f"  {cls:12} {STATS.ok.get(cls, 0):8} {fin_s:>26} {len(fout):15}")
    p("  (websocket: pongs received; sse: events received)")
    reasons = {}
    for cls, a, b, what in STATS.failures:
        kind = STATS.window_of(a, b)
        if kind:
            key = (kind, cls, re.sub(r"soak-\d+", "soak-N", what))
            reasons.setdefault(key, []).append(f"{b:.0f}s")
    for (kind, cls, what), ts in sorted(reasons.items()):
        p(f"  in a {kind} window: {cls}: {what}: {len(ts)} (at {', '.join(ts)})")
    for (cls, what), n in sorted(STATS.notes.items()):
        p(f"  {cls}: {what}: {n}")
    # A reload promises not to drop a request: say so when one failed where
    # only a SIGHUP's window explains it (counted as expected, as the brief has it).
    hup_only = [f for f in STATS.failures if STATS.window_of(f[1], f[2]) == "sighup"]
    if hup_only:
        p(f"  WARNING: {len(hup_only)} failures in windows of a SIGHUP alone, where a reload should drop nothing")
    exits = exits_from_log(logtext, faults.killed, faults.master.pid)
    if outside:
        fails = True
        p("")
        p(f"FAIL: {len(outside)} failures outside the fault windows:")
        for cls, a, b, what in outside[:30]:
            near = [e for e in exits if not e[3] and e[6] is not None and a - 1 <= e[6] <= b + 1]
            why = f"   (worker {near[0][0]} exited at {near[0][6]:.1f}s: {near[0][2]})" if near else ""
            p(f"  {a:7.1f}s-{b:.1f}s {cls}: {what}{why}")
    p("")
    p("fault windows: " + ", ".join(f"{k} {a:.0f}-{b:.0f}s" for k, a, b in STATS.windows if b))
    p("")
    p("process exits:")
    logged = {e[0] for e in exits}
    final = set(children(faults.master.pid)) if faults.master.poll() is None else set()
    for pid, what, cause, explained, line, own, t in exits:
        at = f" at {t:.1f}s" if t is not None else ""
        p(f"  worker {pid}{at}: {what}: {cause}" + ("" if explained else "   <-- UNEXPLAINED"))
        if not explained:
            fails = True
            p(f"    master: {line.strip()}")
            for l in own:
                p(f"    worker: {l.strip()}")
            if not own:
                p("    worker: (logged nothing)")
    for pid, (first, last) in sorted(sampler.seen.items()):
        if pid != faults.master.pid and pid not in logged and last < sampler.end_t - SAMPLE_EVERY:
            fails = True
            p(f"  worker {pid}: gone after {last:.0f}s with no line in the master's log   <-- UNEXPLAINED")
    if sampler.master_exit:
        fails = True
        p(f"  master {faults.master.pid}: exited during the run at {sampler.master_exit[0]:.0f}s with "
          f"{sampler.master_exit[1]}   <-- UNEXPLAINED")
    p(f"  master {faults.master.pid}: stopped by the soak's SIGTERM at the end: {final_status}")
    if final_status != "exit status 0":
        fails = True
        p("    FAIL: the final graceful stop did not exit 0")
    p("")
    p("RSS and open fds per process (first sample after warm-up -> last):")
    for pid, ss in sorted(sampler.samples.items(), key=lambda kv: kv[1][0][0]):
        born = ss[0][0]
        base = [s for s in ss if s[0] >= born + WARMUP] if pid != faults.master.pid else \
            [s for s in ss if s[0] >= WARMUP]
        if len(base) < 2:
            continue
        (t1, r1, f1), (t2, r2, f2) = base[0], base[-1]
        rss_ok = rss_within(r1, r2)
        fd_ok = f2 <= f1 + FD_GROWTH
        name = "master" if pid == faults.master.pid else "worker"
        p(f"  {name} {pid:7} {t1:6.0f}s-{t2:4.0f}s  RSS {r1 / 2**20:6.1f} -> {r2 / 2**20:6.1f} MiB  "
          f"fds {f1:3} -> {f2:3}" + ("" if rss_ok and fd_ok else "   <-- OVER THE BOUND"))
        fails = fails or not (rss_ok and fd_ok)
    # Workers are replaced at every reload: compare the workers serving after
    # warm-up with those serving at the end as well.
    def gen_rss(t_from, t_to):
        v = [s[1] for pid, ss in sampler.samples.items() if pid != faults.master.pid
             for s in ss if t_from <= s[0] <= t_to]
        return (sum(v) / len(v)) if v else None
    a, b = gen_rss(WARMUP, WARMUP + 10), gen_rss(sampler.end_t - 10, sampler.end_t)
    if a and b:
        ok = rss_within(a, b)
        p(f"  workers' mean RSS, after warm-up {a / 2**20:.1f} MiB -> last 10 s {b / 2**20:.1f} MiB"
          + ("" if ok else "   <-- OVER THE BOUND"))
        fails = fails or not ok
    p("")
    p("connections held to Redis and PostgreSQL (sampled every %g s):" % SAMPLE_EVERY)
    for label, i in (("redis", 1), ("postgres", 2)):
        vals = [c[i] for c in sampler.conns if c[i] is not None]
        gap_vals = [c[i] for c in sampler.conns if c[i] is not None and c[3]]
        if vals:
            p(f"  {label:9} max {max(vals):3}  last {vals[-1]:3}  at the end of quiet gaps: "
              f"{gap_vals[-1] if gap_vals else '-'} (max {max(gap_vals) if gap_vals else '-'})")
    p("")
    # A build with -DMH_SANITIZE=ON (make asan) reports into the same log; an
    # error raised as a table must be logged through its __tostring (issue 29).
    san = [l for l in logtext.splitlines()
           if "ERROR: AddressSanitizer" in l or "ERROR: LeakSanitizer" in l or "runtime error:" in l
           or "(error object is not a string)" in l]
    if san:
        fails = True
        p(f"FAIL: {len(san)} sanitizer reports or errors that lost their message in the server log:")
        for l in san[:12]:
            p("  " + l.strip()[:240])
        p("")
    errs = [l for l in logtext.splitlines() if "[error]" in l]
    p(f"server log: {len(errs)} error lines" + (":" if errs else ""))
    for l in errs[:12]:
        p("  " + l.strip()[:240])
    p("")
    unexplained = sum(1 for e in exits if not e[3])
    p(f"summary: {sum(STATS.ok.values())} ok, {len(STATS.failures) - len(outside)} failed in fault windows, "
      f"{len(outside)} failed outside them; {len(exits)} worker exits, {unexplained} unexplained")
    p("SOAK FAILED" if fails else "SOAK PASSED")
    return "\n".join(R), fails


# --- Main -------------------------------------------------------------------------------
async def main(tmp):
    global GATE
    GATE = Gate()
    svc = Services(tmp)
    cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", key, "-out", cert])
    svc.start_redis()
    svc.start_pg()
    http_port, tls_port = free_port(), free_port()
    asan = os.environ.get("ASAN_OPTIONS", "")
    asan = (asan + ":" if asan else "") + f"quarantine_size_mb={ASAN_QUARANTINE_MB}"
    env = dict(os.environ, ASAN_OPTIONS=asan, LINKBOARD_PG=f"{HOST}:{svc.pg_port}", LINKBOARD_REDIS=f"{HOST}:{svc.redis_port}",
               LINKBOARD_IDLE=str(POOL_IDLE), LINKBOARD_SECRET="soak: a secret of at least 32 bytes....")
    logpath = os.path.join(OUT_DIR, "server.log")
    master = subprocess.Popen([BIN, "--workers", "2", "--listen", f"{HOST}:{http_port}",
                               "--listen", f"https://{HOST}:{tls_port}", "--tls-cert", cert, "--tls-key", key,
                               APP], env=env, stdout=open(logpath, "w"), stderr=subprocess.STDOUT)
    remember(f"pid {master.pid}")
    try:
        for _ in range(100):
            if len(children(master.pid)) >= 2:
                try:
                    socket.create_connection((HOST, http_port), 1).close()
                    break
                except OSError:
                    pass
            if master.poll() is not None:
                raise RuntimeError("moonhttp exited at start:\n" + open(logpath).read())
            await asyncio.sleep(0.1)
        log(f"moonhttp {master.pid} on {http_port} (h2c) and {tls_port} (TLS, h2); redis {svc.redis_port}, "
            f"postgres {svc.pg_port}; running {DURATION:g} s")
        sampler = Sampler(master, svc)
        faults = Faults(master, svc, sampler, http_port)
        P = http_port
        tasks = [
            http_client(P, "plain", lambda i: ("GET", ["/health", "/static/index.html", "/static/app.js"][i % 3], b""), 3),
            http_client(P, "db-read", lambda i: ("GET", "/links", b""), 2),
            http_client(P, "db-write", lambda i: ("PUT", f"/links/soak-{i % 200}",
                        b'{"url":"https://example.com/%d","title":"link %d"}' % (i, i)), 1),
            http_client(P, "redis", lambda i: ("POST", f"/links/soak-{i % 50}/vote", b""), 2),
            h2_client(tls_port, cert),
            slow_upload_client(P),
        ] + [ws_client(P, n) for n in range(3)] + [sse_client(P, n) for n in range(2)]
        running = [asyncio.create_task(t) for t in tasks]
        samp = asyncio.create_task(sampler.run())
        flt = asyncio.create_task(faults.run())
        await asyncio.sleep(DURATION)
        GATE.stop = True
        GATE.open.set()
        flt.cancel()
        sampler.end_t = now()
        sampler.sample()
        await asyncio.wait(running, timeout=15)
        for t in running:
            t.cancel()
        samp.cancel()
        if master.poll() is None:
            master.send_signal(signal.SIGTERM)
            try:
                master.wait(20)
            except subprocess.TimeoutExpired:
                master.kill()
                master.wait()
        rc = master.returncode
        status = f"exit status {rc}" if rc >= 0 else f"killed by signal {-rc}"
        sampler.save(os.path.join(OUT_DIR, "samples.tsv"))
        text, failed = report(sampler, faults, svc, open(logpath).read(), status)
        with open(os.path.join(OUT_DIR, "report.txt"), "w") as f:
            f.write(text + "\n")
        print(text, flush=True)
        print(f"(report: {OUT_DIR}/report.txt, every sample: {OUT_DIR}/samples.tsv, server log: {logpath})")
        return 1 if failed else 0
    finally:
        if master.poll() is None:
            for pid in children(master.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            master.kill()
            master.wait()
        svc.stop_redis()
        svc.stop_pg()


def on_signal(signum, frame):
    raise SystemExit(f"soak: stopped by signal {signum}")


if __name__ == "__main__":
    if not os.access(BIN, os.X_OK):
        sys.exit(f"soak: no moonhttp binary at {BIN} (build it, or set MOONHTTP_BIN)")
    os.makedirs(OUT_DIR, exist_ok=True)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tmp = tempfile.mkdtemp(prefix="mh-soak-")
    os.chmod(tmp, 0o755)  # the postgres user reaches its cluster inside
    code = 2
    try:
        code = asyncio.run(main(tmp))
    except RuntimeError as e:
        print(f"soak: setup failed: {e}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(code)
