-- Every data-client timeout is honoured against a server that stops
-- answering: a peer that accepts TCP and never says a word (a listener in
-- this process that never accepts: the kernel completes the handshake), a
-- listener whose backlog is full (a connect that never completes), and a
-- real PostgreSQL and redis-server stopped with SIGSTOP. Each row runs in a
-- handler of one server, which measures the call with http.clock(); the
-- spec checks the error and that the time is the timeout's value, within
-- +10% and not much shorter, and then that the server still answers.
local H = require "helper"
local P = require "pg_helper"
local socket = require "socket"

local T = 1.0       -- every timeout under test, in seconds
local EARLY = 0.05  -- timers run off the loop's cached clock: a little early is not a bug
local SLACK = 0.10  -- the bound: T + 10%

local SERVER = [==[
local http = require "moonhttp"
local pg = require "moonhttp.pg"
local redis = require "moonhttp.redis"
local T = %s
local PG_PORT, REDIS_PORT, REDIS_PW_PORT = %d, %d, %d
local PG = { host = "127.0.0.1", port = PG_PORT, user = "postgres", database = "postgres" }

local function with(base, extra)
  local o = {}
  for k, v in pairs(base) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end

-- Pools made once, so a row can warm one up before the server is stopped.
local pools = {
  query = pg.pool(with(PG, { query_timeout = T, connect_timeout = 5 })),
  connect = pg.pool(with(PG, { connect_timeout = T })),
}

-- rows[name](port, prepared): the call under test, timed (or only the one call
-- of it that waited, when the row sets `waited`); before[name](port): what it
-- needs first (a warm pool, a connection held), outside the clock.
local rows, before = {}, {}
local waited

-- http.tcp() ----------------------------------------------------------------

rows.sock_connect = function(port) -- the backlog is full: the SYN is never answered
  local s = http.tcp()
  s:settimeouts(T, 5, 5)
  return s:connect("127.0.0.1", port)
end
rows.sock_connect_tls = function(port) -- connected, and the TLS handshake gets no answer
  local s = http.tcp()
  s:settimeouts(T, 5, 5)
  return s:connect("127.0.0.1", port, { tls = { verify = false } })
end
-- The peer never reads: the buffers fill, then a send waits. Timed from the
-- send that waited: filling the buffers first (megabytes) took 0.27 s more
-- under ASan on a loaded machine.
rows.sock_send = function(port)
  local s = http.tcp()
  s:settimeouts(5, T, 5)
  assert(s:connect("127.0.0.1", port))
  local chunk = string.rep("x", 1024 * 1024)
  for _ = 1, 256 do
    local t0 = http.clock()
    local ok, err = s:send(chunk)
    if not ok then
      waited = http.clock() - t0
      return nil, err
    end
  end
  return nil, "never blocked"
end
rows.sock_read = function(port)
  local s = http.tcp()
  s:settimeouts(5, 5, T)
  assert(s:connect("127.0.0.1", port))
  return s:receive(10)
end
rows.sock_deadline = function(port) -- a trickling peer: the per-wait read timeout never fires
  local s = http.tcp()
  s:settimeouts(5, 5, 0.6)
  assert(s:connect("127.0.0.1", port))
  s:setdeadline(T)
  assert(s:send("go\r\n"))
  assert(s:receive("l"))
  return s:receive(100)
end
before.sock_pool_wait = function(port) -- pool_size 1 and the one connection is in use
  local a = http.tcp()
  a:settimeouts(T, 5, 5)
  assert(a:connect("127.0.0.1", port, { pool = "one", pool_size = 1 }))
  return a
end
rows.sock_pool_wait = function(port)
  local b = http.tcp()
  b:settimeouts(T, 5, 5)
  return b:connect("127.0.0.1", port, { pool = "one", pool_size = 1 })
end

-- PostgreSQL ----------------------------------------------------------------

rows.pg_connect_silent = function(port) -- accepts, never answers the startup
  return pg.pool{ port = port, connect_timeout = T }:query("select 1")
end
rows.pg_connect_tls_silent = function(port) -- never answers the SSLRequest
  return pg.pool{ port = port, connect_timeout = T, tls = { verify = false } }:query("select 1")
end
rows.pg_connect_trickle = function(port) -- the startup's answer never ends
  return pg.pool{ port = port, connect_timeout = T }:query("select 1")
end
before.pg_query_trickle = function(port) -- connected at once; the query's answer never ends
  return assert(pg.pool{ port = port, query_timeout = T, connect_timeout = 5 }:acquire())
end
rows.pg_query_trickle = function(_, pin) return pin:query("select 1") end
before.pg_acquire = function() -- size 1, the connection pinned by this very task
  local db = pg.pool(with(PG, { size = 1, acquire_timeout = T }))
  return { db = db, pin = assert(db:acquire()) }
end
rows.pg_acquire = function(_, p) return p.db:query("select 1") end
before.pg_slow_query = function() assert(pools.query:query("select 1")) end
rows.pg_slow_query = function() -- a healthy server, a query longer than query_timeout
  return pools.query:query("select pg_sleep(5)")
end
rows.pg_warm = function()
  local r, e = pools.query:query("select 1 as one")
  if not r then return nil, e end
  return pools.connect:query("select 1 as one")
end
rows.pg_query_stopped = function() return pools.query:query("select 1 as one") end
rows.pg_connect_stopped = function()
  return pg.pool(with(PG, { connect_timeout = T })):query("select 1")
end

-- Redis ---------------------------------------------------------------------

local parked = {}
rows.redis_warm = function()
  local r, e = redis.connect{ port = REDIS_PORT, timeout = T }
  if not r then return nil, e end
  local ok, e2 = r:set("k", "v")
  r:keepalive()
  return ok, e2
end
rows.redis_command_stopped = function() -- the parked connection, to a stopped server
  local r <close> = assert(redis.connect{ port = REDIS_PORT, timeout = T }) -- parked again unless broken
  parked.reused = r:reused()
  return r:get("k")
end
rows.redis_connect_stopped = function() -- a new connection: AUTH and SELECT go unanswered
  return redis.connect{ port = REDIS_PW_PORT, password = "pw", db = 1, timeout = T }
end
rows.redis_connect_silent = function(port)
  return redis.connect{ port = port, password = "pw", db = 2, timeout = T }
end
rows.redis_command_silent = function(port)
  local r = assert(redis.connect{ port = port, timeout = T })
  return r:get("k")
end
rows.redis_command_trickle = function(port) -- a bulk reply that never ends
  local r = assert(redis.connect{ port = port, timeout = T })
  return r:get("k")
end
before.redis_pool_wait = function() -- pool_size 1 and the one connection is held
  return assert(redis.connect{ port = REDIS_PORT, timeout = T, pool_size = 1 })
end
rows.redis_pool_wait = function()
  return redis.connect{ port = REDIS_PORT, timeout = T, pool_size = 1 }
end

-- http.fetch ----------------------------------------------------------------

rows.fetch_total = function(port)
  return http.fetch("http://127.0.0.1:" .. port .. "/", { timeout = T })
end
rows.fetch_connect = function(port)
  return http.client{ connect_timeout = T }:fetch("http://127.0.0.1:" .. port .. "/", { timeout = 5 })
end
rows.fetch_tls = function(port)
  return http.client{ tls_timeout = T }:fetch("https://127.0.0.1:" .. port .. "/", { timeout = 5 })
end

http.handle("GET /row/{name}/{port}", function(req, res)
  local name = req:pathvalue("name")
  local port = tonumber(req:pathvalue("port"))
  local prepared = before[name] and before[name](port)
  waited = nil
  local t0 = http.clock()
  local ok, err = rows[name](port, prepared)
  local elapsed = waited or http.clock() - t0
  res:json({ ok = ok ~= nil and ok ~= false, err = err ~= nil and tostring(err) or nil, elapsed = elapsed })
end)

http.handle("GET /stats", function(req, res)
  local s = pools.query:stats()
  res:json({ open = s.open, dropped = s.dropped, reuses = s.reuses, redis_reused = parked.reused })
end)

http.handle("GET /sum", function(req, res)
  local rows_, err = pools.query:query("select 40 + $1::int as n", 2)
  if not rows_ then return res:json({ err = tostring(err) }, 503) end
  res:json({ n = rows_[1].n })
end)

http.handle("GET /redis", function(req, res)
  local r = assert(redis.connect{ port = REDIS_PORT, timeout = T })
  local v, err = r:get("k")
  local reused = r:reused()
  r:keepalive()
  res:json({ v = v, err = err, reused = reused })
end)

http.handle("GET /redis_parked", function(req, res) -- does a connect get a parked connection?
  local r = assert(redis.connect{ port = REDIS_PORT, timeout = T })
  res:json({ reused = r:reused() })
  r:close()
end)

http.handle("GET /ok", function(req, res) res:write("ok") end)
]==]

-- A listener that never accepts: connections complete in the kernel and
-- sit in its queue; nothing is ever read or written.
local function silent()
  local l = assert(socket.bind("127.0.0.1", 0))
  local _, port = l:getsockname()
  return l, tonumber(port)
end

-- A listener whose accept queue is full: a new connect's SYN is dropped,
-- so the connect never completes.
local function backlog_full()
  local l = socket.tcp()
  assert(l:bind("127.0.0.1", 0))
  assert(l:listen(0))
  local _, port = l:getsockname()
  local held = {}
  for _ = 1, 4 do -- until one no longer connects
    local c = socket.tcp()
    c:settimeout(0.2)
    local ok = c:connect("127.0.0.1", port)
    held[#held + 1] = c
    if not ok then break end
  end
  return { close = function()
    for _, c in ipairs(held) do c:close() end
    l:close()
  end }, tonumber(port)
end

local cjson = require "cjson"

describe("client timeouts against a server that stops answering", function()
  local cluster, rsrv, rpw, srv
  local trickles = {}
  local stopped = {}

  -- SIGSTOP / SIGCONT a process and its children, by pid (never by name).
  local function signal_tree(pid, sig)
    local kids = H.sh("pgrep -P " .. pid)
    os.execute(string.format("kill -%s %d %s 2>/dev/null", sig, pid, kids:gsub("%s+", " ")))
  end
  local function pg_pid() return tonumber(H.read_file(cluster.data .. "/postmaster.pid"):match("^(%d+)")) end
  local function stop(pid) stopped[#stopped + 1] = pid; signal_tree(pid, "STOP") end
  local function cont(pid) signal_tree(pid, "CONT") end

  setup(function()
    cluster = P.start()
    rsrv = H.redis()
    rpw = H.redis("--requirepass pw")
    for _, mode in ipairs({ "redis", "pg-connect", "pg-query" }) do
      trickles[mode] = H.service("/usr/bin/python3 spec/servers/trickle.py " .. mode, function(text)
        return text:match("port (%d+)")
      end)
    end
    srv = H.start(string.format(SERVER, T, cluster.port, rsrv.port, rpw.port))
  end)
  teardown(function()
    for _, pid in ipairs(stopped) do cont(pid) end
    if srv then srv:stop() end
    if rsrv then rsrv:stop() end
    if rpw then rpw:stop() end
    if cluster then cluster:stop() end
    for _, t in pairs(trickles) do t:stop() end
  end)

  local function row(name, port)
    local res = srv:get("/row/" .. name .. "/" .. (port or 0))
    assert.equal(200, res.status, res.body)
    return cjson.decode(res.body)
  end

  -- The call failed with `err` after T (within +10%), and the server still answers.
  local function timed_out(r, err)
    assert.is_false(r.ok, cjson.encode(r))
    assert.equal(err or "timeout", r.err)
    assert.is_true(r.elapsed >= T - EARLY, "returned early: " .. r.elapsed)
    assert.is_true(r.elapsed <= T * (1 + SLACK), "returned late: " .. r.elapsed)
    assert.equal("ok", srv:get("/ok").body)
  end

  local function trickle(mode)
    return function() return { close = function() end }, trickles[mode].port end
  end
  local SAYS = { [silent] = "a peer that accepts and never answers",
    [backlog_full] = "a connect that is never answered" }

  -- Rows with a peer of their own, made per row and closed after it.
  local PEERS = {
    { "sock_connect", backlog_full },
    { "sock_connect_tls", silent },
    { "sock_send", silent },
    { "sock_read", silent },
    { "sock_deadline", trickle("redis") },
    { "sock_pool_wait", silent },
    { "pg_connect_silent", silent },
    { "pg_connect_tls_silent", silent },
    { "pg_connect_trickle", trickle("pg-connect") },
    { "pg_query_trickle", trickle("pg-query") },
    { "redis_command_trickle", trickle("redis") },
    { "redis_connect_silent", silent },
    { "redis_command_silent", silent },
    { "fetch_total", silent }, -- fetch's kind is "timeout" too; docs/reference/fetch.md lists the details
    { "fetch_connect", backlog_full },
    { "fetch_tls", silent },
  }
  for _, p in ipairs(PEERS) do
    local name, make, err = p[1], p[2], p[3]
    local peer = SAYS[make] or "a peer whose answer trickles and never ends"
    it(name .. ": " .. peer .. " is cut at the timeout", function()
      local l, port = make()
      local ok, e = pcall(function() timed_out(row(name, port), err) end)
      l:close()
      assert(ok, e)
    end)
  end

  it("pg_acquire: waiting for a connection of a full pool is cut at acquire_timeout", function()
    timed_out(row("pg_acquire"))
  end)

  it("pg_slow_query: a query longer than query_timeout returns at it and is cancelled on the server", function()
    timed_out(row("pg_slow_query"))
    local deadline = H.now() + 3 -- the CancelRequest goes from a task of its own
    local running
    repeat
      running = cluster:scalar("select count(*) from pg_stat_activity where query = 'select pg_sleep(5)'")
      if running == "0" then break end
      H.sleep(0.05)
    until H.now() > deadline
    assert.equal("0", running)
  end)

  it("redis_pool_wait: a connect past pool_size is cut at the timeout", function()
    timed_out(row("redis_pool_wait"))
  end)

  it("PostgreSQL stopped with SIGSTOP: query and connect timeouts, then no half-read connection is reused", function()
    local w = row("pg_warm")
    assert.is_true(w.ok, cjson.encode(w))
    local before = cjson.decode(srv:get("/stats").body)
    local pid = pg_pid()
    stop(pid)
    local ok, e = pcall(function()
      timed_out(row("pg_query_stopped"))
      timed_out(row("pg_connect_stopped"))
    end)
    cont(pid)
    assert(ok, e)
    -- the connection that timed out was closed, not parked: the next query has a new one
    assert.same({ n = 42 }, cjson.decode(srv:get("/sum").body))
    local after = cjson.decode(srv:get("/stats").body)
    assert.equal(before.dropped + 1, after.dropped)
    assert.equal(1, after.open)
  end)

  it("Redis stopped with SIGSTOP: command and connect timeouts, then no half-read connection is reused", function()
    local w = row("redis_warm")
    assert.is_true(w.ok, cjson.encode(w))
    stop(rsrv.pid)
    stop(rpw.pid)
    local ok, e = pcall(function()
      timed_out(row("redis_command_stopped"))
      -- the timed-out connection was closed, not parked: a connect now makes a new one
      assert.same({ reused = 0 }, cjson.decode(srv:get("/redis_parked").body))
      timed_out(row("redis_connect_stopped"))
    end)
    cont(rsrv.pid)
    cont(rpw.pid)
    assert(ok, e)
    assert.equal(1, cjson.decode(srv:get("/stats").body).redis_reused) -- the row used the parked one
    local after = cjson.decode(srv:get("/redis").body)
    assert.same({ v = "v", reused = 0 }, after) -- a new connection: the timed-out one was closed
  end)
end)
