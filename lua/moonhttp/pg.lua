-- A PostgreSQL client over http.tcp(): a pool per worker, the extended
-- protocol with $n parameters (never interpolated), prepared statements
-- cached per connection, SCRAM-SHA-256 / md5 / trust, TLS via SSLRequest,
-- transactions, cancellation on timeout, LISTEN/NOTIFY. This file is the
-- pool and the API; one server session is moonhttp.pg.conn (pg/conn.lua).
--
-- Sockets belong to the task that opened them, so a pooled connection is
-- not a socket kept in a Lua table: between uses its socket is parked with
-- sock:keepalive() under a pool name of its own ("pg:<pool>:<n>"), and the
-- next user connects with that name to get it back. What the server knows
-- about the session (prepared statements, the cancel key) is kept here per
-- name; a connect that comes back fresh (sock:reused() == 0: the parked
-- socket timed out or died) starts a new session and forgets the old.
--
-- Errors: server errors are tables (message, code, detail, hint, position,
-- severity; tostring gives one line); transport failures are the sockets'
-- short strings ("timeout", "closed", "connection refused", ...); misuse
-- (a function as a parameter, NUL in SQL text) raises.
local http = require "moonhttp"
local proto = require "moonhttp.pg.proto"
local types = require "moonhttp.pg.types"
local session = require "moonhttp.pg.conn"
local crypto = require "moonhttp.pgauth"
local core = require "moonhttp.core"
local new_waiter = require("moonhttp.waiter").new

local M = {
  null = types.null,
  json = types.json,
  bytea = types.bytea,
  Error = proto.Error,
}

local Conn, new_conn, is_fatal = session.Conn, session.new, session.is_fatal
local check_sql, encode_args, query_args = session.check_sql, session.encode_args, session.query_args
local NO_TIMEOUT = session.NO_TIMEOUT

-- Pool ---------------------------------------------------------------------

local Pool = {}
Pool.__index = Pool

local POOL_KEYS = { "host", "port", "path", "user", "password", "database", "tls", "size",
  "idle_timeout", "connect_timeout", "acquire_timeout", "query_timeout", "statement_cache",
  "on_notice", "application_name" }
-- What sock:connect's and sock:tls_handshake's tls table accepts (lua_socket.c, read_tls_opts).
local TLS_KEYS = { "verify", "ca", "cert", "key", "server_name", "min_version" }

local function check_opts(o)
  if type(o) ~= "table" then error("pg.pool: expects a table of options", 3) end
  core.check_opts(o, "pg.pool", POOL_KEYS, 3)
  if type(o.tls) == "table" then
    core.check_opts(o.tls, "pg.pool: tls", TLS_KEYS, 3)
    local v = o.tls.min_version
    if v ~= nil and v ~= "1.2" and v ~= "1.3" then
      error('pg.pool: tls.min_version: expected "1.2" or "1.3"', 3)
    end
    if (o.tls.cert == nil) ~= (o.tls.key == nil) then
      error("pg.pool: tls.cert and tls.key go together", 3)
    end
  end
  -- num is called here, for pg.pool's caller: 4 up
  local function num(k, default, min) return core.opt_number(o, k, default, min, "pg.pool", 4) end
  local tls = o.tls
  if tls == true then tls = {} end
  if tls ~= nil and tls ~= false and type(tls) ~= "table" then
    error("pg.pool: tls must be false, true or { verify =, ca =, cert =, key =, server_name =, min_version = }", 3)
  end
  if tls and o.path then error("pg.pool: tls does not apply to a unix socket (path)", 3) end
  local user = o.user or "postgres"
  local database = o.database or user
  return {
    host = o.host or "127.0.0.1",
    port = math.tointeger(num("port", 5432, 1)) or error("pg.pool: port must be an integer", 3),
    path = o.path,
    user = user,
    password = o.password,
    database = database,
    tls = tls or nil,
    size = math.tointeger(num("size", 10, 1)) or error("pg.pool: size must be an integer", 3),
    idle_timeout = num("idle_timeout", 60, 0),
    connect_timeout = num("connect_timeout", 10, 0.001),
    acquire_timeout = num("acquire_timeout", o.connect_timeout or 10, 0),
    query_timeout = o.query_timeout and num("query_timeout", nil, 0.001) or nil,
    statement_cache = math.tointeger(num("statement_cache", 100, 0)),
    on_notice = o.on_notice,
    startup_params = {
      { "user", user }, { "database", database },
      { "application_name", o.application_name or "moonhttp" },
      { "client_encoding", "UTF8" }, { "DateStyle", "ISO, YMD" },
    },
  }
end

function M.pool(opts)
  local p = check_opts(opts)
  p.idle, p.nidle = {}, 0         -- parked connections, used last-in first-out
  p.open = 0                      -- connections counted against size (idle + in use)
  p.waiters, p.whead, p.wtail = {}, 1, 0
  p.id, p.next = crypto.nonce():gsub("[^%w]", ""), 0
  p.scram_cache = {}
  p.counters = { connects = 0, reuses = 0, dropped = 0, waits = 0 }
  return setmetatable(p, Pool)
end

-- A NoticeResponse: to on_notice when the app asked for them; else a
-- WARNING is logged as a warning and everything milder (NOTICE, INFO, LOG,
-- DEBUG: "relation already exists, skipping" of every `create table if not
-- exists` at start) only at debug level.
function Pool:_notice(e)
  if self.on_notice then return self.on_notice(e) end
  http.log(e.severity == "WARNING" and "warn" or "debug", "postgres: " .. tostring(e))
end

-- Waiting for a connection: a first-come-first-served queue. A released
-- connection (or a free slot) is handed to the first waiter, which its
-- moonhttp.waiter wakes, so no newcomer overtakes it and nobody polls. A waiter
-- that ends while waiting (its task killed, an error) passes on what it
-- was handed.
local Waiter = {}
Waiter.__index = Waiter

function Waiter:__close()
  if self.taken then return end
  self.gone = true
  local pool, c = self.pool, self.conn
  if c then
    self.conn = nil
    c.out = true
    pool:_put(c)
  elseif self.slot then
    self.slot = false
    pool.open = pool.open - 1
    pool:_pass_slot()
  end
end

function Waiter:hand(what)
  if what == true then self.slot = true else self.conn = what end
  self.turn:wake(true)
end

local function wait_turn(pool, deadline)
  local w <close> = setmetatable({ pool = pool, seq = pool.wtail + 1, turn = new_waiter() }, Waiter)
  pool.wtail = w.seq
  pool.waiters[w.seq] = w
  pool.counters.waits = pool.counters.waits + 1
  while not (w.conn or w.slot) do
    local left = deadline - http.now()
    if left <= 0 or not w.turn:wait(left) then return nil, "timeout" end
  end
  w.taken = true
  return w.conn or true
end

local function next_waiter(pool)
  while pool.whead <= pool.wtail do
    local w = pool.waiters[pool.whead]
    pool.waiters[pool.whead] = nil
    pool.whead = pool.whead + 1
    if not w.gone then return w end
  end
end

function Pool:_new_conn()
  self.next = self.next + 1
  return new_conn(self, "pg:" .. self.id .. ":" .. self.next)
end

-- A connection ready to use (checked out: give it back with put), or nil, err.
function Pool:_get()
  local deadline
  while true do
    local c = self.idle[self.nidle]
    if c then
      self.idle[self.nidle] = nil
      self.nidle = self.nidle - 1
    elseif self.open < self.size then
      self.open = self.open + 1
      c = self:_new_conn()
    else
      deadline = deadline or http.now() + self.acquire_timeout
      local got, err = wait_turn(self, deadline)
      if not got then return nil, err end
      c = got ~= true and got or self:_new_conn() -- handed a connection, or a free slot
    end
    c.out = true
    local ok, err = c:open()
    if ok then
      local k = c.reused and "reuses" or "connects"
      self.counters[k] = self.counters[k] + 1
      return c
    end
    self:_drop(c)
    if err ~= "stale pooled session" then return nil, err end
  end
end

-- Hands a free slot (room for one more connection) to the first waiter.
function Pool:_pass_slot()
  local w = next_waiter(self)
  if w then
    self.open = self.open + 1
    w:hand(true)
  end
end

-- Gives back the slot of a checked-out connection that will not be used again.
function Pool:_drop(c)
  if not c.out then return end
  c.out = false
  if c.sock then c.sock:close(); c.sock = nil end
  self.open = self.open - 1
  self.counters.dropped = self.counters.dropped + 1
  self:_pass_slot()
end

-- Returns a checked-out connection: parked for the next user when it is
-- healthy and idle, dropped when it broke or is inside a (failed)
-- transaction. Idempotent.
function Pool:_put(c)
  if not c.out then return end
  if c.broken or c.busy or c.status ~= "I" or not c.sock then return self:_drop(c) end
  -- bytes read past ReadyForQuery would be lost with the buffer: never park such a session
  if c.inpos <= #c.inbuf then return self:_drop(c) end
  c.out = false
  local sock = c.sock
  c.sock = nil
  if not sock:keepalive(self.idle_timeout, 1) then
    c.pid = nil -- the socket is gone: the next open starts a new session
  end
  local w = next_waiter(self)
  if w then
    w:hand(c)
  else
    self.nidle = self.nidle + 1
    self.idle[self.nidle] = c
  end
end

-- `local c <close> = conn` gives it back however the scope ends; an error
-- (or a killed task) on the way means its protocol state is unknown.
function Conn:__close(e)
  if e ~= nil then self.broken = true end
  self.pool:_put(self)
end

-- A failure on a connection that came from the pool, before any answer, is
-- the server having dropped it while it sat idle (restart, terminated
-- backend): one retry on a fresh connection.
local function stale(c, rows, err)
  if rows or not c.reused or err == "timeout" then return false end
  if c.received == 0 and type(err) == "string" then return true end
  return type(err) == "table" and is_fatal(err) and c.received == 1
end

local function run(pool, method, ...)
  local deadline
  for attempt = 1, 2 do
    local c, err = pool:_get()
    if not c then return nil, err end
    local rows, qerr
    do
      local _ <close> = c
      c.retry_deadline, c.deadline = deadline, nil
      rows, qerr = method(c, ...)
      deadline = c.deadline
    end
    if attempt == 2 or not stale(c, rows, qerr) then return rows, qerr end
  end
end

function Pool:query(sql, ...)
  return run(self, Conn.extended, query_args(sql, select("#", ...), ...))
end

function Pool:exec(sql)
  check_sql(sql, 2)
  return run(self, Conn.simple, sql)
end

-- The queries fn queues with p:query(sql, ...), as query records; misuse
-- raises here, before any connection is taken.
local Queue = {}
Queue.__index = Queue

function Queue:query(sql, ...)
  if self.sent then error("pg: pipeline already sent", 2) end
  check_sql(sql, 2)
  self.n = self.n + 1
  self.qs[self.n] = encode_args(sql, select("#", ...), ...)
end

local function queued(fn)
  if type(fn) ~= "function" then error("pg: pipeline expects a function(p)", 3) end
  local q = setmetatable({ qs = {}, n = 0 }, Queue)
  fn(q)
  q.sent = true
  return q.qs
end

function Pool:pipeline(fn)
  local qs = queued(fn)
  if #qs == 0 then return {} end
  return run(self, Conn.pipeline, qs)
end

-- A class of handles on one connection (a transaction's tx, a pinned
-- connection): query and exec on self._c, which is nil once the handle is
-- finished (using it then raises `finished`).
local function conn_handle(finished)
  local class = {}
  class.__index = class
  local function conn_of(h)
    local c = h._c
    if not c then error("pg: " .. finished, 3) end
    return c
  end
  function class:query(sql, ...)
    return conn_of(self):extended(query_args(sql, select("#", ...), ...))
  end
  function class:exec(sql)
    local c = conn_of(self)
    check_sql(sql, 2)
    return c:simple(sql)
  end
  function class:pipeline(fn)
    local c = conn_of(self)
    local qs = queued(fn)
    if #qs == 0 then return {} end
    return c:pipeline(qs)
  end
  return class, conn_of
end

-- Runs fn(tx) between BEGIN and COMMIT on one connection. fn returning
-- normally commits (its results are returned, or true); returning nil, err
-- rolls back and returns nil, err; raising rolls back and re-raises. A
-- transaction that failed inside (an ignored error) is rolled back by
-- COMMIT and reported as nil, err.
local Tx = conn_handle("transaction already finished")

local RAISE = {} -- transaction()'s first result when fn raised: re-raise the second

-- transaction()'s results, packed, as the caller's (re-raising fn's error).
local function finish(res)
  if res[1] == RAISE then error(res[2], 0) end
  return table.unpack(res, 1, res.n)
end

local function transaction(c, fn)
  local ok, err = c:simple("BEGIN")
  if not ok then return nil, err end
  local tx = setmetatable({ _c = c }, Tx)
  local res = table.pack(pcall(fn, tx))
  tx._c = nil
  if not res[1] or (not res[2] and res.n >= 3) then
    if c.sock and not c.busy then c:simple("ROLLBACK") end
    if not res[1] then return RAISE, res[2] end
    return nil, res[3]
  end
  local r
  r, err = c:simple("COMMIT")
  if not r then return nil, err end
  if c.tag == "ROLLBACK" then return nil, c.last_error or "transaction rolled back" end
  if res.n < 2 then return true end
  return table.unpack(res, 2, res.n)
end

function Pool:transaction(fn)
  if type(fn) ~= "function" then error("pg: transaction expects a function(tx)", 2) end
  local c, err = self:_get()
  if not c then return nil, err end
  local res
  do
    local _ <close> = c
    res = table.pack(transaction(c, fn))
  end
  return finish(res)
end

-- A pinned connection: db:acquire() -> handle with :query, :exec,
-- :transaction and :release (also by <close>, and by garbage collection as
-- a last resort, which only gives the slot back).
local Pinned, pinned_conn = conn_handle("connection already released")

function Pinned:transaction(fn)
  if type(fn) ~= "function" then error("pg: transaction expects a function(tx)", 2) end
  return finish(table.pack(transaction(pinned_conn(self), fn)))
end

function Pinned:release()
  local c = self._c
  if not c then return end
  self._c = nil
  self._pool:_put(c)
end

function Pinned:__close(e)
  local c = self._c
  if c and e ~= nil then c.broken = true end
  self:release()
end

function Pinned:__gc()
  local c = self._c
  if c then
    self._c = nil
    c.sock = nil -- its task owns and closes it; no I/O from a finalizer
    self._pool:_drop(c)
  end
end

function Pool:acquire()
  local c, err = self:_get()
  if not c then return nil, err end
  return setmetatable({ _c = c, _pool = self }, Pinned)
end

-- db:listen(channel [, opts]) -> an iterator of notifications { channel,
-- payload, pid } on a connection of its own (not one of the pool's). With
-- opts.timeout, the iterator returns nil, "timeout" after that many seconds
-- without one (ending a for loop). The connection closes when the loop
-- ends (the iterator's closing value) or with :close() on the listener.
local Listener = {}
Listener.__index = Listener

function Listener:close()
  local c = self._c
  if c then
    self._c = nil
    if c.sock then
      c.sock:send(proto.terminate)
      c.sock:close()
      c.sock = nil
    end
  end
end
Listener.__close = Listener.close
Listener.__gc = function(self) self._c = nil end

function Listener:next()
  local c = self._c
  if not c then return nil, "closed" end
  local t = self.timeout or NO_TIMEOUT
  if c.sock then
    c.sock:settimeouts(c.pool.connect_timeout, t, t)
    c.sock:setdeadline(t) -- for this call as a whole, however many messages come
  end
  while c.sock do
    local mt, body = c:read(true) -- a timeout leaves the session as it was
    if not mt then return nil, body end
    if mt == "A" then return proto.parse_notification(body) end
    if mt == "E" then
      local e = proto.parse_fields(body)
      if is_fatal(e) then return c:fail(e) end
    end
  end
  return nil, "closed"
end
Listener.__call = Listener.next

local LISTEN_KEYS = { "timeout" }

function Pool:listen(channel, opts)
  if type(channel) ~= "string" then error("pg: listen expects a channel name", 2) end
  core.check_opts(opts, "db:listen", LISTEN_KEYS)
  local sql = "LISTEN " .. proto.quote_ident(channel)
  self.next = self.next + 1
  local c = new_conn(self, "pg:" .. self.id .. ":listen:" .. self.next)
  c.out = true
  local ok, err = c:open()
  if not ok then return nil, err end
  ok, err = c:simple(sql)
  if not ok then
    if c.sock then c.sock:close() end
    return nil, err
  end
  c.listening = true
  local l = setmetatable({ _c = c, timeout = opts and opts.timeout }, Listener)
  return l, nil, nil, l
end

-- Counters for tests and benchmarks: connections open and idle, new
-- sessions started, parked sockets reused, connections dropped, waits.
function Pool:stats()
  local s = { open = self.open, idle = self.nidle, size = self.size }
  for k, v in pairs(self.counters) do s[k] = v end
  return s
end

-- pg.connect: redis has it, and so do most PostgreSQL clients; here a pool opens connections
return core.strict_module(M, "pg", { connect = "pool" })
