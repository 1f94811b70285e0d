-- moonhttp.pg against a real PostgreSQL 15 (a throw-away cluster from
-- spec/pg_helper.lua): every type both ways, hostile parameters, errors,
-- transactions, cancellation, the pool under load and under faults,
-- authentication methods, TLS and LISTEN/NOTIFY. Most cases are `moonhttp
-- run` scripts that assert inside and print `key value` lines.
local H = require "helper"
local P = require "pg_helper"
local socket = require "socket"

-- The client is built on http.tcp(); without it (a build before the sockets
-- landed) there is nothing to run against the server.
local PRELUDE = [[
local http = require "moonhttp"
local pg = require "moonhttp.pg"
local cjson = require "cjson"
local function same(a, b)
  if type(a) == "number" and type(b) == "number" then
    return a == b or (a ~= a and b ~= b) or math.abs(a - b) <= 1e-6 * math.abs(b)
  end
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end
local function show(v) return type(v) == "table" and cjson.encode(v) or tostring(v) end
]]

describe("moonhttp.pg against PostgreSQL", function()
  local cluster

  setup(function() cluster = P.start() end)
  teardown(function() if cluster then cluster:stop() end end)

  -- Runs a script with `db` made from pool options (kind: a P.users key).
  local function run(source, kind, extra)
    return H.run_kv(PRELUDE .. "local OPTS = " .. cluster:pool_opts(kind, extra)
      .. "\nlocal db = pg.pool(OPTS)\n", source)
  end

  local test = it

  test("round-trips every supported type", function()
    local kv = run([==[
-- { SQL type, Lua value sent, Lua value expected back }
local rows = {
  { "int2", 7, 7 }, { "int2", -32768, -32768 },
  { "int4", 2147483647, 2147483647 }, { "int8", math.maxinteger, math.maxinteger },
  { "int8", math.mininteger, math.mininteger },
  { "float4", 1.5, 1.5 }, { "float8", 0.1, 0.1 }, { "float8", -math.huge, -math.huge },
  { "float8", 0/0, 0/0 },
  { "numeric", "3.14159265358979323846264338327950288", "3.14159265358979323846264338327950288" },
  { "bool", true, true }, { "bool", false, false },
  { "text", "héllo ☃", "héllo ☃" }, { "varchar", "v", "v" }, { "name", "n", "n" },
  { "bytea", pg.bytea("\0\1\255\\x00"), "\0\1\255\\x00" }, { "bytea", "\0only", "\0only" },
  { "bytea", "\\x41", "\\x41" }, -- a plain string for a bytea parameter is bytes, not bytea syntax
  { "json", pg.json({ a = { 1, 2 } }), { a = { 1, 2 } } },
  { "jsonb", pg.json({ k = "v", n = 1.5 }), { k = "v", n = 1.5 } },
  { "jsonb", '{"s": "from a string"}', { s = "from a string" } },
  { "uuid", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" },
  { "date", "2024-02-29", "2024-02-29" },
  { "timestamp", "2024-01-02T03:04:05.123456", "2024-01-02 03:04:05.123456" },
  { "timestamptz", "2024-01-02 03:04:05+02", "2024-01-02 01:04:05+00" },
  { "int4[]", { 1, pg.null, 3 }, { 1, pg.null, 3 } },
  { "int8[]", { { 1, 2 }, { 3, 4 } }, { { 1, 2 }, { 3, 4 } } },
  { "text[]", { "a,b", '"', "NULL", pg.null, "\\", "{}", " sp " }, { "a,b", '"', "NULL", pg.null, "\\", "{}", " sp " } },
  { "float8[]", { 1.5, -2 }, { 1.5, -2 } }, { "bool[]", { true, false }, { true, false } },
  { "numeric[]", { "1.10", "2" }, { "1.10", "2" } },
  { "uuid[]", { "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" }, { "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" } },
  { "date[]", { "2024-01-01" }, { "2024-01-01" } },
  { "jsonb[]", { pg.json({ a = 1 }) }, { { a = 1 } } },
  { "bytea[]", { pg.bytea("\0\255") }, { "\0\255" } },
  { "text[]", {}, {} },
  { "int4", pg.null, pg.null }, { "text", nil, pg.null },
}
local n = 0
for i, r in ipairs(rows) do
  local res, err = db:query("select $1::" .. r[1] .. " as v", r[2])
  assert(res, "row " .. i .. " (" .. r[1] .. "): " .. tostring(err))
  assert(same(res[1].v, r[3]), "row " .. i .. " (" .. r[1] .. "): got " .. show(res[1].v))
  n = n + 1
end
-- values made by the server, decoded on the way in
local res = assert(db:query([[select 1::int2 a, 'x'::bpchar b, 'infinity'::timestamp c,
  '1 day'::interval d, 12::oid e, '\x00'::bytea f, 'null'::json g, inet '10.0.0.1' h]]))
local r = res[1]
assert(r.a == 1 and math.type(r.a) == "integer" and r.b == "x" and r.c == "infinity")
assert(r.d == "1 day" and r.e == 12 and r.f == "\0" and r.g == cjson.null and r.h == "10.0.0.1")
print("types", n)
print("columns", #res.columns, res.columns[1].name, res.columns[1].type)
]==])
    assert.equal(38, kv.types)
    assert.equal("8\ta\tint2", kv.columns)
  end)

  -- Answers are read in pieces of up to 64 KiB and cut into messages: rows
  -- that straddle pieces, a value larger than a piece, many rows in one answer.
  test("reads answers of any size: big values, many rows, messages split across reads", function()
    local kv = run([==[
local big = string.rep("0123456789abcdef", 40000) -- 640,000 bytes
local res = assert(db:query("select $1::text as v, length($1::text) as n", big))
print("big", res[1].v == big and res[1].n == #big and "ok" or "bad")
res = assert(db:query("select g, repeat('x', g % 300) as pad from generate_series(1, 5000) g"))
local ok = #res == 5000
for i = 1, #res do ok = ok and res[i].g == i and #res[i].pad == i % 300 end
print("rows", ok and #res or "bad")
print("after", db:query("select 1 as one")[1].one)
]==])
    assert.equal("ok", kv.big)
    assert.equal(5000, kv.rows)
    assert.equal(1, kv.after)
  end)

  test("logs a server's NOTICE at debug level and a WARNING as a warning, unless on_notice takes them", function()
    local kv, out = run([==[
assert(db:exec("create table if not exists notice_t (id int)"))
assert(db:exec("create table if not exists notice_t (id int)")) -- NOTICE: already exists, skipping
assert(db:exec("do $$ begin raise warning 'careful: %', 42; end $$"))
local seen = {}
local asked = pg.pool(setmetatable({ on_notice = function(e) seen[#seen + 1] = e.severity .. " " .. e.message end }, { __index = OPTS }))
assert(asked:exec("create table if not exists notice_t (id int)"))
print("asked", seen[1])
]==])
    assert.equal('NOTICE relation "notice_t" already exists, skipping', kv.asked)
    assert.falsy(out:find("postgres: NOTICE", 1, true), out)
    assert.truthy(out:find("%[warn%][^\n]*postgres: WARNING: careful: 42"), out)
  end)

  test("keeps hostile parameters as data", function()
    local kv = run([=[
assert(db:exec("create table hostile(id serial primary key, t text, b bytea)"))
local hostile = { "'", "''", "'; drop table hostile; --", "\\", '"', "$1", "\r\n", ("x"):rep(100000) }
for _, s in ipairs(hostile) do
  local r = assert(db:query("insert into hostile(t) values ($1) returning t", s))
  assert(r[1].t == s and r.affected == 1)
end
print("count", db:query("select count(*) as n from hostile")[1].n)
-- NUL cannot be in text; strings with NUL travel as bytea, byte for byte
local bin = "a\0b\255\254'\\"
local r = assert(db:query("insert into hostile(b) values ($1) returning b", bin))
assert(r[1].b == bin)
local r2, err = db:query("insert into hostile(t) values ($1)", "a\0b")
print("nul_in_text", err.code)
-- invalid UTF-8: refused as text by the server, exact as bytea
local bad = "\255\254\xc3("
r2, err = db:query("select $1::text", bad)
print("bad_utf8_text", err.code)
r = assert(db:query("select $1::bytea as v", pg.bytea(bad)))
assert(r[1].v == bad)
local ok, e = pcall(db.query, db, "select 1\0")
print("nul_in_sql", not ok and e:match("SQL text must not contain NUL") ~= nil)
ok, e = pcall(db.query, db, "select $1", print)
print("function_param", not ok and e:match("cannot send a function") ~= nil)
print("open", db:stats().open)
print("dropped", db:stats().dropped)
]=])
    assert.equal(8, kv.count)
    assert.equal(22021, kv.nul_in_text) -- text cannot carry NUL: refused before it is sent
    assert.equal(22021, kv.bad_utf8_text) -- invalid byte sequence for UTF8
    assert.equal("true", kv.nul_in_sql)
    assert.equal("true", kv.function_param)
    assert.equal(1, kv.open) -- errors did not cost the connection
    assert.equal(0, kv.dropped)
  end)

  test("returns server errors as tables with SQLSTATE, and keeps the connection", function()
    local kv = run([==[
local r, e = db:query("selec 1")
print("syntax", e.code, e.position, e.severity)
r, e = db:query("select * from no_such_table")
print("undefined", e.code)
print("tostring", tostring(e))
assert(db:exec("create table u(id int primary key)"))
assert(db:query("insert into u values ($1)", 1))
r, e = db:query("insert into u values ($1)", 1)
print("unique", e.code, e.constraint)
print("detail", e.detail)
r, e = db:exec("do $$ begin raise exception 'custom' using hint = 'try again', errcode = 'P0042'; end $$")
print("raised", e.code, e.message, e.hint)
r, e = db:query("select $1::int", "not a number")
print("bad_param", e.code)
r, e = db:query("select $1, $2", 1)
print("arity", e.code)
r, e = db:exec("select 1; select 1/0; select 3")
print("exec_error", e.code)
local rows = assert(db:exec("create temp table x(a int); insert into x values (1), (2); select a from x order by a"))
print("exec_rows", #rows, rows[2].a, rows.affected)
rows = assert(db:query("update u set id = id + 10 where id > $1", 0))
print("affected", rows.affected, #rows)
print("open", db:stats().open)
print("dropped", db:stats().dropped)
]==])
    assert.equal("42601\t1\tERROR", kv.syntax)
    assert.equal("42P01", kv.undefined)
    assert.equal('ERROR: relation "no_such_table" does not exist (SQLSTATE 42P01)', kv.tostring)
    assert.equal("23505\tu_pkey", kv.unique)
    assert.equal("Key (id)=(1) already exists.", kv.detail)
    assert.equal("P0042\tcustom\ttry again", kv.raised)
    assert.equal("22P02", kv.bad_param)
    assert.equal("08P01", kv.arity)
    assert.equal(22012, kv.exec_error)
    assert.equal("2\t2\t2", kv.exec_rows)
    assert.equal("1\t0", kv.affected)
    assert.equal(1, kv.open)
    assert.equal(0, kv.dropped)
  end)

  test("commits, rolls back on nil, err and on errors (re-raised), and reports failed transactions", function()
    local kv = run([==[
assert(db:exec("create table acct(id int primary key, n int)"))
local function count() return db:query("select count(*) as c from acct")[1].c end
print("commit", db:transaction(function(tx)
  assert(tx:query("insert into acct values ($1, $2)", 1, 10))
  assert(tx:query("insert into acct values ($1, $2)", 2, 20))
  return "done", 2
end))
print("after_commit", count())
print("soft", db:transaction(function(tx)
  assert(tx:query("insert into acct values (3, 30)"))
  return nil, "changed my mind"
end))
print("after_soft", count())
local ok, e = pcall(db.transaction, db, function(tx)
  assert(tx:query("insert into acct values (4, 40)"))
  error({ reason = "boom" })
end)
print("raised", ok, e.reason)
print("after_raise", count())
local r, err = db:transaction(function(tx)
  tx:query("insert into acct values (5, 50)")
  tx:query("insert into acct values (1, 0)") -- fails: the transaction is now aborted
  return "ignored the error"
end)
print("failed", r, err.code)
print("after_failed", count())
local stale
db:transaction(function(tx) stale = tx end)
print("tx_after", (pcall(stale.query, stale, "select 1")))
print("sees_own_writes", db:transaction(function(tx)
  tx:query("insert into acct values (6, 60)")
  return tx:query("select count(*) as c from acct")[1].c
end))
print("open", db:stats().open)
print("dropped", db:stats().dropped)
]==])
    assert.equal("done\t2", kv.commit)
    assert.equal(2, kv.after_commit)
    assert.equal("nil\tchanged my mind", kv.soft)
    assert.equal(2, kv.after_soft)
    assert.equal("false\tboom", kv.raised)
    assert.equal(2, kv.after_raise)
    assert.equal("nil\t23505", kv.failed)
    assert.equal(2, kv.after_failed)
    assert.equal("false", kv.tx_after)
    assert.equal(3, kv.sees_own_writes)
    assert.equal(1, kv.open)
    assert.equal(0, kv.dropped)
  end)

  test("pins a connection with acquire and gives it back on <close>", function()
    local kv = run([==[
do
  local c <close> = assert(db:acquire())
  local a = c:query("select pg_backend_pid() as p")[1].p
  assert(c:exec("create temp table mine(a int)")) -- temp tables live in the session
  assert(c:query("insert into mine values ($1)", 5))
  print("same_session", a == c:query("select pg_backend_pid() as p")[1].p,
    c:query("select a from mine")[1].a)
  print("in_use", db:stats().open, db:stats().idle)
end
print("returned", db:stats().open, db:stats().idle)
local c = assert(db:acquire())
c:release()
print("released", (pcall(c.query, c, "select 1")))
]==])
    assert.equal("true\t5", kv.same_session)
    assert.equal("1\t0", kv.in_use)
    assert.equal("1\t1", kv.returned)
    assert.equal("false", kv.released)
  end)

  test("cancels a query past query_timeout, returns at it and closes the connection", function()
    local kv = run([==[
assert(db:query("select 1")) -- connected: the clock below is the query's alone
local t0 = http.clock()
local r, e = db:query("select pg_sleep(10)")
print("result", r, e)
print("on_time", http.clock() - t0 < 0.3 * 1.1)
local probe = pg.pool(OPTS) -- another connection looks at what the server is doing
local active
for _ = 1, 100 do -- the CancelRequest goes from a task of its own
  active = probe:query([[select count(*) as n from pg_stat_activity
    where query = 'select pg_sleep(10)' and state = 'active']])[1].n
  if active == 0 then break end
  http.sleep(0.02)
end
print("still_running", active)
print("dropped", db:stats().dropped)
print("next", db:query("select 1 as one")[1].one)
print("open", db:stats().open)
print("connects", db:stats().connects)
]==], "trust", "query_timeout = 0.3")
    assert.equal("nil\ttimeout", kv.result)
    assert.equal("true", kv.on_time)
    assert.equal(0, kv.still_running)
    assert.equal(1, kv.dropped) -- its answer may still come: never parked half-read
    assert.equal(1, kv.next)
    assert.equal(1, kv.open)
    assert.equal(2, kv.connects)
  end)

  test("bounds the prepared statement cache per connection", function()
    local kv = run([==[
for round = 1, 3 do
  for i = 1, 5 do assert(db:query("select " .. i .. " as v, $1::int as w", round)) end
end
local on_server = db:query("select count(*) as n from pg_prepared_statements")[1].n
print("on_server", on_server)
for i = 1, 3 do assert(db:query("select 42 as same")) end
print("reused", db:query("select count(*) as n from pg_prepared_statements where statement = 'select 42 as same'")[1].n)
]==], "trust", "statement_cache = 3")
    assert.equal(3, kv.on_server)
    assert.equal(1, kv.reused)
  end)

  test("authenticates with SCRAM-SHA-256, md5 and trust, and refuses wrong passwords", function()
    for _, kind in ipairs({ "scram", "md5", "trust" }) do
      local kv = run([==[
print("user", db:query("select current_user as u")[1].u)
local bad = {}
for k, v in pairs(OPTS) do bad[k] = v end
bad.password = "wrong"
local r, e = pg.pool(bad):query("select 1")
print("wrong", e and e.code or tostring(r))
]==], kind)
      assert.equal(P.users[kind].user, kv.user)
      if kind ~= "trust" then assert.equal("28P01", kv.wrong) end
    end
  end)

  test("connects over a unix socket", function()
    local kv = run(string.format([==[
local u = pg.pool{ path = %q, port = %d, user = "postgres" }
print("over_unix", u:query("select inet_server_addr() is null as yes")[1].yes)
]==], cluster.dir, cluster.port))
    assert.equal("true", kv.over_unix)
  end)

  test("delivers LISTEN/NOTIFY on a dedicated connection", function()
    local kv = run([==[
local l = assert(db:listen('jobs "a"'))
assert(db:query("select pg_notify($1, $2)", 'jobs "a"', "payload 1"))
assert(db:query("select pg_notify($1, $2)", 'jobs "a"', "payload 2"))
local got = {}
for n in l do
  got[#got + 1] = n.payload
  if #got == 2 then break end
end
print("got", table.concat(got, ","))
local l2 = assert(db:listen("quiet", { timeout = 0.2 }))
local t0 = http.now()
local n, err = l2()
print("timeout", n, err, http.now() - t0 < 2)
assert(db:query("notify quiet, 'late'"))
print("after_timeout", l2().payload)
l2:close()
print("closed", l2())
print("pool_untouched", db:stats().open)
]==])
    assert.equal("payload 1,payload 2", kv.got)
    assert.equal("nil\ttimeout\ttrue", kv.timeout)
    assert.equal("late", kv.after_timeout)
    assert.equal("nil\tclosed", kv.closed)
    assert.equal(1, kv.pool_untouched)
  end)

  test("drops connections the server terminated, idle or busy", function()
    local kv = run([==[
local probe = pg.pool(OPTS)
local pid = db:query("select pg_backend_pid() as p")[1].p
assert(probe:query("select pg_terminate_backend($1)", pid))
http.sleep(0.1)
-- the idle connection died in the pool: the next query gets a new one
-- (from the socket pool noticing, or by one retry)
local r, e = db:query("select pg_backend_pid() as p")
print("after_idle_kill", r and r[1].p ~= pid, e)
local s = db:stats()
print("idle_kill_stats", s.open, s.connects)
-- a backend terminated in the middle of a transaction: an error, and the connection is not reused
local r2, e2 = db:transaction(function(tx)
  return tx:query("select pg_terminate_backend(pg_backend_pid())")
end)
print("busy_kill", r2, e2.code, e2.severity)
s = db:stats()
print("busy_kill_stats", s.open, s.dropped)
print("next", db:query("select 7 as v")[1].v)
]==])
    assert.equal("true\tnil", kv.after_idle_kill)
    assert.equal("1\t2", kv.idle_kill_stats)
    assert.equal("nil\t57P01\tFATAL", kv.busy_kill)
    assert.equal("0\t1", kv.busy_kill_stats)
    assert.equal(7, kv.next)
  end)

  -- try(tls, column): a pool of OPTS with that tls table asks the server
  -- whether its connection is over TLS, and `column` of pg_stat_ssl.
  local TRY = [==[
local function try(tls, column)
  local o = {}
  for k, v in pairs(OPTS) do o[k] = v end
  o.tls = tls
  local r, e = pg.pool(o):query("select ssl, " .. column .. " as c from pg_stat_ssl where pid = pg_backend_pid()")
  if not r then return "error", tostring(e) end
  return tostring(r[1].ssl), r[1].c
end
]==]

  test("verifies the server's certificate over TLS (SSLRequest)", function()
    local kv = run(TRY .. string.format([==[
local try0 = try
local function try(tls) return try0(tls, "version") end
print("verified", try({ ca = %q, server_name = "localhost" }))
print("wrong_ca", try({ ca = %q, server_name = "localhost" }))
print("wrong_name", try({ ca = %q, server_name = "db.example" }))
print("unverified", try({ verify = false }))
print("plain", try(false))
]==], cluster.cert, cluster.other_ca, cluster.cert), "tls")
    assert.equal("true\tTLSv1.3", kv.verified)
    assert.matches("^error\t", kv.wrong_ca)
    assert.matches("^error\t", kv.wrong_name)
    assert.equal("true\tTLSv1.3", kv.unverified)
    assert.matches("^error\tFATAL: .*28000", kv.plain) -- pg_hba: tls_user only over TLS
  end)

  -- pg_hba's `cert` method: the server asks for a client certificate and
  -- takes the user from its CN (pg_helper: cert_user).
  test("presents a client certificate over TLS (tls.cert, tls.key)", function()
    local kv = run(TRY .. string.format([==[
local try0 = try
local function try(tls) return try0(tls, "client_dn") end
print("with_cert", try({ ca = %q, server_name = "localhost", cert = %q, key = %q }))
print("without", try({ ca = %q, server_name = "localhost" }))
print("half", select(2, pcall(pg.pool, { tls = { cert = "x.pem" } })))
]==], cluster.cert, cluster.client_cert, cluster.client_key, cluster.cert), "cert")
    assert.equal("true\t/CN=cert_user", kv.with_cert)
    assert.matches("^error\tFATAL: .*28000", kv.without)
    assert.matches("pg.pool: tls.cert and tls.key go together$", kv.half)
  end)

  -- An app serving one query per request, with a pool of `size`.
  local function start_app(size, extra)
    return H.start(PRELUDE .. string.format([==[
local db = pg.pool%s
http.handle("GET /q", function(req, res)
  local rows, err = db:query("select pg_backend_pid() as pid, pg_sleep($1::float8) as s", req:arg("sleep") or "0")
  if not rows then
    res:status(503)
    res:write(tostring(err))
    return
  end
  res:json({ pid = rows[1].pid })
end)
http.handle("GET /stats", function(req, res) res:json(db:stats()) end)
]==], cluster:pool_opts("trust", "size = " .. size .. (extra and ", " .. extra or ""))))
  end

  local function backends()
    return tonumber(cluster:scalar("select count(*) from pg_stat_activity where application_name = 'moonhttp'"))
  end

  test("keeps to its size under load: connections to the server equal the pool size", function()
    local app = start_app(3)
    local ok, err = pcall(function()
      local out = H.tmpname(".curl")
      os.execute(string.format("curl -s -Z --parallel-max 24 -o /dev/null -w '%%{http_code}\\n' "
        .. "'http://127.0.0.1:%d/q?sleep=0.3&i=[1-24]' >%s 2>&1 &", app.port, out))
      local most, deadline = 0, socket.gettime() + 15
      repeat
        socket.sleep(0.05)
        most = math.max(most, backends())
        local text = H.read_file(out) or ""
        local _, done = text:gsub("%d%d%d\n", "")
      until done == 24 or socket.gettime() > deadline
      local codes = H.read_file(out) or ""
      os.remove(out)
      local _, oks = codes:gsub("200\n", "")
      assert.equal(24, oks, codes)
      assert.equal(3, most)
      local stats = assert(H.request(app.port, "GET", "/stats")).body
      assert.matches('"open":3', stats)
      assert.matches('"connects":3', stats)
    end)
    app:stop()
    assert(ok, err)
  end)

  test("survives a server restart: the next query reconnects", function()
    local app = start_app(2)
    local ok, err = pcall(function()
      local before = assert(app:get("/q"))
      assert.equal(200, before.status, before.body)
      cluster:restart()
      for _ = 1, 5 do
        local after = assert(app:get("/q"))
        assert.equal(200, after.status, after.body)
        assert.are_not.equal(before.body, after.body) -- a new backend
      end
    end)
    app:stop()
    assert(ok, err)
  end)

  test("examples/bank.lua moves money in a transaction, all or nothing", function()
    local cjson = require "cjson"
    local app = H.start("examples/bank.lua", { env = string.format("PGPORT=%d PGUSER=trust_user PGDATABASE=postgres", cluster.port) })
    local ok, err = pcall(function()
      local a = assert(app:request("POST", "/accounts", {}, '{"owner":"ann","balance":100}'))
      assert.equal(201, a.status, a.body)
      local b = assert(app:request("POST", "/accounts", {}, '{"owner":"bob \'; drop table accounts; --","balance":0}'))
      assert.equal(201, b.status, b.body)
      local ida, idb = math.tointeger(cjson.decode(a.body).id), math.tointeger(cjson.decode(b.body).id)
      local t = assert(app:request("POST", "/transfers", {}, cjson.encode({ from = ida, to = idb, amount = 30 })))
      assert.equal(201, t.status, t.body)
      assert.equal(70, cjson.decode(t.body).from_balance, t.body)
      -- an overdraft: the credit would succeed, the debit's CHECK fails, nothing changes
      t = assert(app:request("POST", "/transfers", {}, cjson.encode({ from = ida, to = idb, amount = 1000 })))
      assert.equal(409, t.status, t.body)
      assert.equal(70, cjson.decode(assert(app:get("/accounts/" .. ida)).body).balance)
      assert.equal(30, cjson.decode(assert(app:get("/accounts/" .. idb)).body).balance)
      assert.equal("bob '; drop table accounts; --", cjson.decode(assert(app:get("/accounts/" .. idb)).body).owner)
      t = assert(app:request("POST", "/transfers", {}, cjson.encode({ from = ida, to = 999, amount = 1 })))
      assert.equal(404, t.status, t.body)
      assert.equal(70, cjson.decode(assert(app:get("/accounts/" .. ida)).body).balance)
      assert.equal(400, assert(app:get("/accounts/not-a-number")).status)
      assert.equal(404, assert(app:get("/accounts/424242")).status)
      assert.equal("1", cluster:scalar("select count(*) from transfers"))
    end)
    app:stop()
    assert(ok, err)
  end)
end)
