#!/usr/bin/env python3
"""Checks one implementation of bench/tfb against the TechEmpower test
requirements (and the seed's Redis routes) before anything is measured.

  verify.py --url http://127.0.0.1:PORT --pg-port N [--redis-port N]
            [--tests json,db,queries,fortunes,updates,plaintext,cached,redis]

Exits 0 when every selected test passes, 1 otherwise (each failure printed on
its own line, `FAIL test: why`). The database is read through psql (as
`postgres` on 127.0.0.1) to check that answers are the table's rows and that
updates were written; Redis through redis-cli, to check that each seed route
reads its key on every request. Python's standard library only.
"""
import argparse
import email.utils
import html
import html.parser
import http.client
import json
import random
import socket
import string
import subprocess
import sys
import urllib.parse

ALL_TESTS = ["json", "db", "queries", "fortunes", "updates", "plaintext", "cached", "redis"]
ROWS = 10000

# `queries` (and `count`) as sent, and the number of rows the answer must hold.
CLAMPS = [(None, 1), ("", 1), ("foo", 1), ("0", 1), ("-1", 1), ("1.5", 1), ("1", 1),
          ("7", 7), ("20", 20), ("500", 500), ("501", 500), ("100000", 500)]

FORTUNES = [
    (1, "fortune: No such file or directory"),
    (2, "A computer scientist is someone who fixes things that aren't broken."),
    (3, "After enough decimal places, nobody gives a damn."),
    (4, "A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1"),
    (5, "A computer program does what you tell it to do, not what you want it to do."),
    (6, "Emacs is a nice operating system, but I prefer UNIX. \u2014 Tom Christaensen"),
    (7, "Any program that runs right the first time is probably buggy."),
    (8, "A list is only as strong as its weakest link. \u2014 Donald Knuth"),
    (9, "Feature: A bug with seniority."),
    (10, "Computers make very fast, very accurate mistakes."),
    (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
    (12, "\u30d5\u30ec\u30fc\u30e0\u30ef\u30fc\u30af\u306e\u30d9\u30f3\u30c1\u30de\u30fc\u30af"),
    (0, "Additional fortune added at request time."),
]

# The seed's 12 routes: path, Redis key, the field beside "name", its empty value.
SEED_ROUTES = [("/api/users", "tfb:users", "users", []), ("/api/users/", "tfb:user", "user", {}),
               ("/api/orders", "tfb:orders", "orders", []), ("/api/orders/", "tfb:order", "order", {})]
SEED_ROUTES += [("/api/items/%d" % i, "tfb:item:%d" % i, "item", {}) for i in range(8)]


class Failed(Exception):
    pass


def expect(cond, why):
    if not cond:
        raise Failed(why)


class Checker:
    def __init__(self, args):
        u = urllib.parse.urlsplit(args.url)
        self.host, self.port = u.hostname, u.port or 80
        self.pg_port, self.redis_port = args.pg_port, args.redis_port
        self.conn = None

    # -- HTTP ---------------------------------------------------------------
    def get(self, path):
        """GET over one keep-alive connection: (status, headers dict lower-case, body bytes)."""
        for attempt in (1, 2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
            try:
                self.conn.request("GET", path, headers={"Host": "%s:%d" % (self.host, self.port)})
                r = self.conn.getresponse()
                body = r.read()
                headers = {}
                for k, v in r.getheaders():
                    headers.setdefault(k.lower(), v)
                if r.will_close:
                    self.conn.close()
                    self.conn = None
                return r.status, headers, body, r
            except (http.client.HTTPException, OSError):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise

    def fetch(self, path, ctype, charset_optional=False):
        """A 200 answer to path with the required headers and `ctype` (compared
        without case or spaces; with charset_optional, `; charset=utf-8` may
        follow it); returns the body."""
        status, h, body, r = self.get(path)
        expect(status == 200, "%s: status %d" % (path, status))
        expect("server" in h, "%s: no Server header" % path)
        expect("date" in h and email.utils.parsedate_to_datetime(h["date"]) is not None,
               "%s: no valid Date header" % path)
        chunked = "chunked" in h.get("transfer-encoding", "").lower()
        expect("content-length" in h or chunked, "%s: neither Content-Length nor chunked" % path)
        if "content-length" in h:
            expect(int(h["content-length"]) == len(body), "%s: Content-Length %s for %d bytes"
                   % (path, h["content-length"], len(body)))
        got = h.get("content-type", "").replace(" ", "").lower()
        if charset_optional and got.endswith(";charset=utf-8"):
            got = got[:-len(";charset=utf-8")]
        expect(got == ctype.replace(" ", "").lower(), "%s: Content-Type %r, want %r"
               % (path, h.get("content-type"), ctype))
        return body

    def fetch_json(self, path):
        body = self.fetch(path, "application/json", charset_optional=True)
        try:
            return json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise Failed("%s: not JSON (%s): %r" % (path, e, body[:120]))

    # -- services -------------------------------------------------------------
    def psql(self, sql):
        out = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-F", " ", "-v", "ON_ERROR_STOP=1",
                              "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "postgres", "-d", "postgres",
                              "-c", sql], capture_output=True, text=True)
        if out.returncode != 0:
            raise Failed("psql: " + out.stderr.strip())
        return out.stdout

    def table(self, name, ids):
        """{id: randomNumber} of the given ids in table `name`."""
        if not ids:
            return {}
        sql = "SELECT id, randomNumber FROM %s WHERE id IN (%s)" % (name, ",".join(str(i) for i in set(ids)))
        return {int(a): int(b) for a, b in (line.split() for line in self.psql(sql).splitlines() if line)}

    def redis(self, *words):
        out = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.redis_port)] + list(words),
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise Failed("redis-cli: " + out.stderr.strip())
        return out.stdout.strip()

    # -- shapes ---------------------------------------------------------------
    @staticmethod
    def world(path, w):
        """A World object: exactly id and randomNumber (names without case, as
        TechEmpower's verifier takes them), integers in 1..10000; returns (id, n)."""
        expect(isinstance(w, dict), "%s: %r is not an object" % (path, w))
        keys = {k.lower(): v for k, v in w.items()}
        expect(sorted(keys) == ["id", "randomnumber"], "%s: keys %s" % (path, sorted(w)))
        for k in ("id", "randomnumber"):
            v = keys[k]
            expect(type(v) is int, "%s: %s is %r, not an integer" % (path, k, v))
            expect(1 <= v <= ROWS, "%s: %s %d outside 1..%d" % (path, k, v, ROWS))
        return keys["id"], keys["randomnumber"]

    def worlds(self, base, arg, table):
        """The clamping table for a list test; every row checked against `table`
        (None: against nothing). Returns the pairs of the last answer."""
        pairs = []
        for value, n in CLAMPS:
            path = base if value is None else "%s?%s=%s" % (base, arg, urllib.parse.quote(value))
            got = self.fetch_json(path)
            expect(isinstance(got, list), "%s: not a JSON array" % path)
            expect(len(got) == n, "%s: %d rows, want %d" % (path, len(got), n))
            pairs = [self.world(path, w) for w in got]
            if table and n <= 20:
                have = self.table(table, [i for i, _ in pairs])
                for i, r in pairs:
                    expect(have.get(i) == r, "%s: row %d says %d, %s holds %s" % (path, i, r, table, have.get(i)))
        return pairs

    # -- the tests --------------------------------------------------------------
    def t_json(self):
        got = self.fetch_json("/json")
        expect(got == {"message": "Hello, World!"}, "/json: %r" % got)

    def t_db(self):
        seen = set()
        for _ in range(10):
            i, r = self.world("/db", self.fetch_json("/db"))
            expect(self.table("World", [i]).get(i) == r, "/db: row %d says %d, World differs" % (i, r))
            seen.add(i)
        expect(len(seen) > 1, "/db: the same id ten times: ids are not random")

    def t_queries(self):
        pairs = self.worlds("/queries", "queries", "World")
        expect(len({i for i, _ in pairs}) > 250, "/queries: ids are not random")

    def t_cached(self):
        self.worlds("/cached-queries", "count", "CachedWorld")

    def t_updates(self):
        for value, n in CLAMPS:
            path = "/updates" if value is None else "/updates?queries=" + urllib.parse.quote(value)
            got = self.fetch_json(path)
            expect(isinstance(got, list) and len(got) == n, "%s: want an array of %d rows" % (path, n))
            pairs = [self.world(path, w) for w in got]
            if n <= 20:
                self.persisted(path, pairs)
        # Twenty rows set to a known number, then updated: each answer must
        # be in the table, and a table left as it was means nothing was written.
        self.psql("UPDATE World SET randomNumber = 1 WHERE id <= 10000")
        pairs = [self.world("/updates", w) for w in self.fetch_json("/updates?queries=20")]
        self.persisted("/updates?queries=20", pairs)
        changed = [i for i, r in pairs if r != 1]
        expect(changed, "/updates: no row changed")
        have = self.table("World", changed)
        expect(all(have[i] != 1 for i in changed), "/updates: the new numbers were not written")

    def persisted(self, path, pairs):
        have = self.table("World", [i for i, _ in pairs])
        said = {}
        for i, r in pairs:
            said.setdefault(i, set()).add(r)
        for i, values in said.items():
            expect(have.get(i) in values, "%s: row %d answered %s, World holds %s"
                   % (path, i, sorted(values), have.get(i)))

    def t_fortunes(self):
        body = self.fetch("/fortunes", "text/html; charset=utf-8")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise Failed("/fortunes: not UTF-8")
        rows = sorted(FORTUNES, key=lambda f: f[1])
        want = ("<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"
                "<tr><th>id</th><th>message</th></tr>"
                + "".join("<tr><td>%d</td><td>%s</td></tr>" % (i, html.escape(m)) for i, m in rows)
                + "</table></body></html>")
        got, exp = tokens(text), tokens(want)
        if got != exp:
            for k, (a, b) in enumerate(zip(got, exp)):
                if a != b:
                    raise Failed("/fortunes: token %d is %r, want %r" % (k, a, b))
            raise Failed("/fortunes: %d tokens, want %d" % (len(got), len(exp)))

    def t_plaintext(self):
        body = self.fetch("/plaintext", "text/plain", charset_optional=True)
        expect(body == b"Hello, World!", "/plaintext: %r" % body[:60])
        # 16 requests in one write, as the plaintext test sends them.
        req = ("GET /plaintext HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (self.host, self.port)).encode() * 16
        with socket.create_connection((self.host, self.port), timeout=10) as s:
            s.sendall(req)
            f = s.makefile("rb")
            for k in range(16):
                status, got = read_response(f)
                expect(status == 200 and got == b"Hello, World!",
                       "/plaintext pipelined: answer %d is %d %r" % (k + 1, status, got[:60]))

    def t_redis(self):
        for path, key, field, empty in SEED_ROUTES:
            for _ in range(2):  # a new value each time: the handler must GET it per request
                token = "".join(random.choice(string.ascii_lowercase) for _ in range(12))
                self.redis("SET", key, token)
                got = self.fetch_json(path)
                expect(got == {"name": token, field: empty}, "%s: %r, want %r"
                       % (path, got, {"name": token, field: empty}))


def read_response(f):
    """One HTTP/1.1 response from a buffered reader: (status, body). The
    pipelined check reads 16 in a row, which http.client cannot."""
    line = f.readline()
    expect(line.startswith(b"HTTP/1.1 "), "pipelined: status line %r" % line[:60])
    status, length, chunked = int(line.split()[1]), None, False
    while True:
        line = f.readline()
        expect(line.endswith(b"\n"), "pipelined: connection closed in the head")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode("latin-1").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
        elif name.strip().lower() == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if not chunked:
        expect(length is not None, "pipelined: neither Content-Length nor chunked")
        return status, f.read(length)
    body = b""
    while True:
        size = int(f.readline().split(b";")[0], 16)
        if size == 0:
            while f.readline() not in (b"\r\n", b"\n", b""):
                pass
            return status, body
        body += f.read(size)
        f.readline()


class Tokens(html.parser.HTMLParser):
    """An HTML document as a list of (kind, value): tags lower-cased with
    their attributes, text with entities decoded and white space collapsed
    (empty text dropped), so two renderings that a browser shows alike
    compare equal whatever their white space or choice of entities."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.out = []

    def handle_decl(self, decl):
        self.out.append(("decl", " ".join(decl.lower().split())))

    def handle_starttag(self, tag, attrs):
        self.out.append(("start", tag, tuple(attrs)))

    def handle_endtag(self, tag):
        self.out.append(("end", tag))

    def handle_data(self, data):
        text = " ".join(data.split())
        if not text:
            return
        if self.out and self.out[-1][0] == "text":
            self.out[-1] = ("text", self.out[-1][1] + " " + text)
        else:
            self.out.append(("text", text))


def tokens(text):
    p = Tokens()
    p.feed(text)
    p.close()
    return p.out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--pg-port", type=int)
    ap.add_argument("--redis-port", type=int)
    ap.add_argument("--tests", default=",".join(ALL_TESTS))
    ap.add_argument("--name", default="")
    args = ap.parse_args()
    tests = [t for t in args.tests.split(",") if t]
    unknown = [t for t in tests if t not in ALL_TESTS]
    if unknown:
        ap.error("unknown tests: " + ",".join(unknown))
    needs_pg = {"db", "queries", "updates", "cached"} & set(tests)
    if needs_pg and not args.pg_port:
        ap.error("--pg-port is needed for " + ",".join(sorted(needs_pg)))
    if "redis" in tests and not args.redis_port:
        ap.error("--redis-port is needed for redis")
    c = Checker(args)
    failed = 0
    for t in tests:
        try:
            getattr(c, "t_" + t)()
            print(" ".join(w for w in ("PASS", args.name, t) if w))
        except Failed as e:
            failed += 1
            print(" ".join(w for w in ("FAIL", args.name, t + ":", str(e)) if w))
        except (OSError, http.client.HTTPException) as e:
            failed += 1
            print(" ".join(w for w in ("FAIL", args.name, t + ":", type(e).__name__, str(e)) if w))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
