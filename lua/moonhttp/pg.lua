-- A PostgreSQL client over http.tcp(): a pool per worker, the extended
-- protocol with $n parameters (never interpolated), prepared statements
-- cached per connection, SCRAM-SHA-256 / md5 / trust, TLS via SSLRequest,
-- transactions, cancellation on timeout, LISTEN/NOTIFY.
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
local auth = require "moonhttp.pg.auth"
local crypto = require "moonhttp.pgauth"
local core = require "moonhttp.core"
local scan = require("moonhttp.pgrows").scan
local bind = require("moonhttp.pgbind").bind
local new_waiter = require("moonhttp.waiter").new

local M = {
  null = types.null,
  json = types.json,
  bytea = types.bytea,
  Error = proto.Error,
}

local null, encode_param, decoder = types.null, types.encode_param, types.decoder
local decode_row = proto.decode_row
local NO_OIDS = {} -- never written: a statement whose parameter types the server infers
local MAX_PARAMS = 65535 -- Bind counts parameters in 16 bits
local sunpack, ssub = string.unpack, string.sub
local tunpack = table.unpack
local tconcat = table.concat

local CANCEL_GRACE = 5       -- seconds the background CancelRequest waits for the server to close
local NO_TIMEOUT = 0         -- sockets: 0 = wait as long as it takes
local MIN_LEFT = 0.001       -- a deadline already past still needs a positive setdeadline

-- Bounds every wait of sock's calls to end by `deadline` (http.now() time).
local function deadline_at(sock, deadline)
  sock:setdeadline(math.max(deadline - http.now(), MIN_LEFT))
end

local function is_fatal(e) return e.severity == "FATAL" or e.severity == "PANIC" end

-- Conn: one server session -------------------------------------------------

local Conn = {}
Conn.__index = Conn

local function new_conn(pool, name)
  return setmetatable({
    pool = pool, name = name, status = "I", params = {},
    stmts = {}, nstmts = 0, seq = 0, tick = 0, closes = {}, inbuf = "", inpos = 1,
  }, Conn)
end

-- Forgets what the server knew: the session behind the name is a new one.
function Conn:reset()
  self.stmts, self.nstmts, self.closes, self.params = {}, 0, {}, {}
  self.pid, self.secret, self.status = nil, nil, "I"
end

function Conn:fail(err)
  self.broken = true
  if self.sock then self.sock:close(); self.sock = nil end
  return nil, err
end

-- A message that does not parse (a broken or hostile server) makes the
-- decoders raise: that is a protocol error, which breaks the connection,
-- never an error raised into the handler.
local function guarded(fn)
  return function(self, ...)
    local ok, a, b = pcall(fn, self, ...)
    if ok then return a, b end
    self.busy = false
    http.log("debug", "postgres: malformed message: " .. tostring(a))
    return self:fail("protocol error")
  end
end

function Conn:send(data)
  local ok, err = self.sock:send(data)
  if not ok then return self:fail(err) end
  return true
end

-- Input is read in whatever pieces arrive (sock:receiveany) into a buffer
-- of the session, self.inbuf from byte self.inpos on, and messages are cut
-- from it: one socket call takes a whole answer (BindComplete, DataRows,
-- CommandComplete, ReadyForQuery) rather than two per message. A timeout
-- keeps what had arrived, so a message cut by it stays whole for the next
-- read. A body longer than what has arrived is read with one exact receive.
local RECV_MAX = 64 * 1024
local MAX_MESSAGE = proto.MAX_MESSAGE

-- One message: type, body; or nil, err.
function Conn:read_message()
  local buf, pos = self.inbuf, self.inpos
  while true do
    local avail = #buf - pos + 1
    local more, err, partial
    if avail >= 5 then
      local t, len = sunpack(">c1I4", buf, pos)
      if len < 4 or len > MAX_MESSAGE then return nil, "protocol error" end
      if avail > len then
        self.inpos = pos + len + 1
        return t, ssub(buf, pos + 5, pos + len)
      end
      more, err, partial = self.sock:receive(len + 1 - avail)
    else
      more, err, partial = self.sock:receiveany(RECV_MAX)
    end
    more = more or partial
    if avail > 0 then buf = ssub(buf, pos) .. more else buf = more end
    pos = 1
    self.inbuf, self.inpos = buf, pos
    if err then return nil, err end
  end
end

-- What has arrived, into the emptied input buffer (for pgrows.scan, which
-- takes a whole answer in one call): true, or nil, err with the connection
-- failed as read fails it.
function Conn:fill()
  local more, err, partial = self.sock:receiveany(RECV_MAX)
  self.inbuf, self.inpos = more or partial or "", 1
  if err then
    if err == "timeout" and self.busy then self:cancel_later() end
    return self:fail(err)
  end
  return true
end

-- The next message that matters; notices, parameter changes and stray
-- notifications are handled here. Returns type, body or nil, err. With
-- soft set (a listener), a timeout is returned and the session kept (recv
-- keeps what had arrived); otherwise any failure breaks the connection. A
-- query that timed out is cancelled on the server in the background: its
-- answer would come on a connection we no longer read, so it is closed.
function Conn:read(soft)
  while true do
    local t, body = self:read_message()
    if not t then
      if body == "timeout" and soft then return nil, body end
      if body == "timeout" and self.busy then self:cancel_later() end
      return self:fail(body)
    elseif t == "N" then
      self.pool:notice(proto.parse_fields(body))
    elseif t == "S" then
      local k, v = proto.parse_parameter_status(body)
      self.params[k] = v
    elseif t == "A" and not self.listening then -- a notification nobody listens for here
    else
      self.received = self.received + 1
      return t, body
    end
  end
end

-- Opens the socket (getting the parked one back when there is one) and,
-- for a new TCP connection, runs TLS negotiation and the startup.
-- One socket object per connection: connecting it again takes its parked
-- socket back (a socket object outlives its task's ownership of the socket).
function Conn:open()
  local pool = self.pool
  local sock = self.so
  if not sock then
    sock = http.tcp()
    self.so, self.popts = sock, { pool = self.name }
  end
  -- connect_timeout bounds all of it: TCP (or TLS) connect, SSLRequest and the startup and
  -- authentication exchange, so a server that accepts and then never answers is cut at it
  sock:settimeouts(pool.connect_timeout, pool.connect_timeout, pool.connect_timeout)
  sock:setdeadline(pool.connect_timeout)
  local ok, err
  local popts = self.popts
  if pool.path then
    ok, err = sock:connect("unix:" .. pool.path .. "/.s.PGSQL." .. pool.port, popts)
  else
    ok, err = sock:connect(pool.host, pool.port, popts)
  end
  if not ok then return nil, err end
  self.sock, self.broken, self.received = sock, false, 0
  self.inbuf, self.inpos = "", 1
  if sock:reused() > 0 then
    if self.pid then
      self.reused = true
      return true
    end
    -- a parked session we have no record of: never talk to it
    return self:fail("stale pooled session")
  end
  self.reused = false
  self:reset()
  return self:startup()
end

function Conn:start_tls()
  local pool = self.pool
  local ok, err = self:send(proto.ssl_request)
  if not ok then return nil, err end
  local answer
  answer, err = self.sock:receive(1)
  if not answer then return self:fail(err) end
  if answer ~= "S" then return self:fail("server does not accept TLS") end
  local tls = pool.tls
  ok, err = self.sock:tls_handshake({
    server_name = tls.server_name or pool.host,
    verify = tls.verify ~= false,
    ca = tls.ca,
    min_version = tls.min_version,
  })
  if not ok then return self:fail(err) end
  return true
end

-- The authentication exchange; returns true once the server said AuthenticationOk.
function Conn:authenticate(code, rest, scram)
  local pool = self.pool
  if code == 0 then
    if scram.started and not scram.verified then
      return nil, "SCRAM: server skipped its signature"
    end
    return "ok"
  end
  local pw = pool.password
  if code == 3 or code == 5 or code == 10 then
    if not pw then return nil, "the server asks for a password and none was given" end
  end
  if code == 3 then
    return self:send(proto.password(pw))
  elseif code == 5 then
    return self:send(proto.password(crypto.md5_password(pool.user, pw, rest:sub(1, 4))))
  elseif code == 10 then
    local offered = false
    for _, m in ipairs(proto.parse_mechanisms(rest)) do
      if m == auth.MECHANISM then offered = true end
    end
    if not offered then return nil, "the server offers no SASL mechanism we speak" end
    scram.started = true
    return self:send(proto.sasl_initial(auth.MECHANISM, scram:first()))
  elseif code == 11 then
    local final, err = scram:final(rest)
    if not final then return nil, err end
    return self:send(proto.sasl_response(final))
  elseif code == 12 then
    local ok, err = scram:verify(rest)
    if not ok then return nil, err end
    scram.verified = true
    return true
  end
  return nil, "unsupported authentication method " .. code
end

local function startup(self)
  local pool = self.pool
  local ok, err
  if pool.tls then
    ok, err = self:start_tls()
    if not ok then return nil, err end
  end
  ok, err = self:send(proto.startup(pool.startup_params))
  if not ok then return nil, err end
  local scram = auth.scram(crypto, pool.password or "", { cache = pool.scram_cache })
  while true do
    local t, body = self:read()
    if not t then return nil, body end
    if t == "R" then
      local code, rest = proto.parse_auth(body)
      local r
      r, err = self:authenticate(code, rest, scram)
      if not r then return self:fail(err) end
    elseif t == "K" then
      self.pid, self.secret = proto.parse_backend_key(body)
    elseif t == "Z" then
      self.status = body
      return true
    elseif t == "E" then
      return self:fail(proto.parse_fields(body))
    end -- 'v' (NegotiateProtocolVersion) and others: nothing to do
  end
end

Conn.startup = guarded(startup)

-- CancelRequest goes on a connection of its own, carrying the backend's key.
local function send_cancel(pool, pid, secret)
  local sock = http.tcp()
  sock:settimeouts(pool.connect_timeout, pool.connect_timeout, CANCEL_GRACE)
  local ok
  if pool.path then
    ok = sock:connect("unix:" .. pool.path .. "/.s.PGSQL." .. pool.port)
  else
    ok = sock:connect(pool.host, pool.port)
  end
  if ok and sock:send(proto.cancel(pid, secret)) then
    sock:receive(1) -- the server closes once it has read the request
  end
  sock:close()
end

-- Cancels the running query from a task of its own, so the caller gets its
-- "timeout" at query_timeout, not after a round trip to a server that may
-- have stopped answering.
function Conn:cancel_later()
  if not self.pid then return end
  local ok, err = http.timer(0, send_cancel, self.pool, self.pid, self.secret)
  if not ok then http.log("warn", "postgres: query not cancelled on the server: " .. err) end
end

-- Statement cache: LRU by a use counter. Room is made before a new
-- statement is parsed, and the evicted one is closed in the same batch, so
-- the server never holds more than the bound.
function Conn:make_room()
  local bound = self.pool.statement_cache
  if bound == 0 or self.nstmts < bound then return end
  local lru_key, lru
  for k, st in pairs(self.stmts) do
    if not lru or st.used < lru.used then lru_key, lru = k, st end
  end
  self:forget(lru_key)
end

function Conn:forget(key)
  local st = self.stmts[key]
  self.stmts[key] = nil
  self.nstmts = self.nstmts - 1
  self.closes[#self.closes + 1] = st.name
end

local function prepare_columns(cols)
  local public = {}
  for i, c in ipairs(cols) do
    c.decode, c.kind = decoder(c.oid), types.kind(c.oid)
    public[i] = { name = c.name, oid = c.oid, type = types.names[c.oid] }
  end
  return cols, public
end

-- query_timeout is a deadline for the whole statement (sending it,
-- preparing it when new, and reading every row up to ReadyForQuery), not a
-- bound per read. A retry (see `stale`) keeps the first attempt's deadline.
local function begin_io(self)
  if self.busy then error("pg: connection used by two tasks at once", 3) end
  if not self.sock then return nil, "closed" end
  self.busy, self.received = true, 0
  local qt, sock = self.pool.query_timeout, self.sock
  sock:settimeouts(self.pool.connect_timeout, qt or NO_TIMEOUT, qt or NO_TIMEOUT)
  if qt then
    local deadline = self.retry_deadline or http.now() + qt
    self.retry_deadline, self.deadline = nil, deadline
    deadline_at(sock, deadline)
  else
    sock:setdeadline(nil)
  end
  return true
end

-- Reads the answer to one batch up to ReadyForQuery. st: the statement of
-- an extended query (nil for a simple query). Returns rows, or nil, err.
local function collect(self, st)
  local rows, n, cols, err = {}, 0, st and st.cols, nil
  while true do
    local t, body
    -- an extended query's answer: what has arrived of it is read in C
    -- (pgrows.scan), up to ReadyForQuery or a message it leaves to us;
    -- an empty buffer is filled straight from the socket for it
    if st and cols and self.inpos > #self.inbuf then
      local ok, ferr = self:fill()
      if not ok then
        self.busy = false
        return nil, ferr
      end
    end
    if st and cols and self.inpos <= #self.inbuf then
      local pos, got, tag
      pos, n, got, tag, body = scan(self.inbuf, self.inpos, cols, rows, n, null)
      self.inpos, self.received = pos, self.received + got
      if tag then
        self.tag = tag
        rows.affected = proto.affected(tag)
      end
      if body then t = "Z" end
    end
    if not t then
      t, body = self:read()
      if not t then
        self.busy = false
        return nil, body
      end
    end
    if t == "D" then
      n = n + 1
      rows[n] = decode_row(body, cols, null)
    elseif t == "C" then
      local tag = proto.cstring(body)
      self.tag = tag
      rows.affected = proto.affected(tag)
      if not st then -- simple query: a statement ended; the next one starts afresh
        rows.columns = rows.columns or {}
        self.last = rows
        rows, n = {}, 0
      end
    elseif t == "T" then
      local public
      cols, public = prepare_columns(proto.parse_row_description(body))
      if st then st.cols, st.columns = cols, public else rows.columns = public end
    elseif t == "n" then
      if st then st.cols, st.columns = {}, {} end
    elseif t == "t" then
      st.ptypes = proto.parse_parameter_description(body)
    elseif t == "E" then
      local e = proto.parse_fields(body)
      if is_fatal(e) then
        self.busy = false
        return self:fail(e)
      end
      err = err or e
    elseif t == "Z" then
      self.status = body
      self.busy = false
      if err then
        self.last_error = err
        return nil, err
      end
      if not st then
        local last = self.last or rows
        self.last = nil
        last.columns = last.columns or {}
        return last
      end
      rows.columns = st.columns
      return rows
    end -- '1' ParseComplete, '2' BindComplete, '3' CloseComplete, 'I' EmptyQuery: nothing to keep
  end
end

-- A query's parameters the server cannot take, as a server error would
-- come (the query fails, the connection stays usable).
local function param_error(code, message)
  return setmetatable({ severity = "ERROR", code = code, message = message }, proto.Error)
end

local function too_many(n)
  return param_error("54000", "too many parameters: " .. n .. " (at most " .. MAX_PARAMS .. ")")
end

-- The batch (Bind, Execute, Sync) of a query on st with parameters ...,
-- built in C (moonhttp.pgbind): strings go in text unless the server said
-- the parameter is bytea, then in binary, byte for byte. Text cannot carry
-- NUL, so such a string for a text parameter is refused here, as the
-- server would refuse it. Returns the batch or nil, err.
local function bind_batch(st, ...)
  local batch, e, i = bind(st.name, st.ptypes, null, ...)
  if batch then return batch end
  if e == "nul" then
    return nil, param_error("22021",
      "parameter $" .. i .. " contains a NUL byte, which text cannot carry (send bytes as bytea)")
  end
  return nil, param_error("54000", "parameters too large for one message")
end

-- Parse and Describe a new statement (one round trip, so Bind knows the
-- parameter types), cached under key; returns it, or nil, err.
function Conn:prepare(key, sql, oids)
  local name = ""
  if self.pool.statement_cache > 0 then
    self:make_room()
    self.seq = self.seq + 1
    name = "mh" .. self.seq
  end
  local parts = {}
  for i, closed in ipairs(self.closes) do parts[i] = proto.close_statement(closed) end
  self.closes = {}
  parts[#parts + 1] = proto.parse(name, sql, oids)
  parts[#parts + 1] = proto.describe_statement(name)
  parts[#parts + 1] = proto.sync
  local ok, err = self:send(tconcat(parts))
  if not ok then return nil, err end
  local st = { name = name, ptypes = {} }
  local rows
  rows, err = self:collect(st)
  if not rows then return nil, err end
  if name ~= "" then
    self.stmts[key] = st
    self.nstmts = self.nstmts + 1
  end
  return st
end

Conn.collect = guarded(collect)

-- An extended-protocol query (its arguments from query_args): Bind,
-- Execute, Sync on the statement cached under key, prepared first when
-- new. Returns rows or nil, err.
function Conn:extended(key, sql, oids, ...)
  if select("#", ...) > MAX_PARAMS then return nil, too_many(select("#", ...)) end
  local ok, err = begin_io(self)
  if not ok then return nil, err end
  self.tick = self.tick + 1
  local st = self.stmts[key]
  local cached = st ~= nil
  if not st then
    st, err = self:prepare(key, sql, oids)
    if not st then
      self.busy = false
      return nil, err
    end
    self.busy = true
  end
  st.used = self.tick
  local batch
  batch, err = bind_batch(st, ...)
  if not batch then
    self.busy = false
    return nil, err
  end
  if #self.closes > 0 then
    local parts = {}
    for i, closed in ipairs(self.closes) do parts[i] = proto.close_statement(closed) end
    self.closes = {}
    batch = tconcat(parts) .. batch
  end
  ok, err = self:send(batch)
  if not ok then
    self.busy = false
    return nil, err
  end
  local rows
  rows, err = self:collect(st)
  if cached and type(err) == "table" and (err.code == "0A000" or err.code == "26000") then
    -- "cached plan must not change result type" (the table changed under us), or
    -- the statement is gone (DEALLOCATE ALL, DISCARD ALL): prepare it afresh next time
    self:forget(key)
  end
  return rows, err
end

-- A simple-protocol query (several statements, no parameters): the rows
-- of the last statement.
function Conn:simple(sql)
  local ok, err = begin_io(self)
  if not ok then return nil, err end
  ok, err = self:send(proto.query(sql))
  if not ok then
    self.busy = false
    return nil, err
  end
  return self:collect(nil)
end

-- Pipelines -----------------------------------------------------------------
-- The queries of a pipeline go to one connection at once: Bind, Execute and
-- Sync for each, in one write, then the answers read in order, so n queries
-- cost one pool checkout, one write and a few reads instead of n of each.
-- A Sync per query keeps them as independent as n queries one after the
-- other: an error ends its own query only (outside a transaction each is
-- its own implicit one) and stands in its place in the results. Statements
-- new to the connection are prepared first, a round trip each, as for one
-- query. The requests in flight are cut into windows of PIPELINE_WINDOW
-- bytes, each answered before the next is sent: the server stops reading
-- while its answers wait to be read, so an unbounded write could wait
-- forever on a server waiting on us.
local PIPELINE_WINDOW = 32 * 1024

-- The results of a pipeline run one query at a time: when its statements
-- do not all fit the statement cache (or there is none), preparing one
-- could evict (close) another that a queued Bind names.
local function pipeline_each(self, qs)
  local results = {}
  for i = 1, #qs do
    local q = qs[i]
    local rows, err = self:extended(q.key, q.sql, q.oids, tunpack(q, 1, q.n))
    if not rows and (type(err) ~= "table" or self.broken) then return nil, err end
    results[i] = rows or err
  end
  return results
end

-- Each query's statement, prepared when new; a statement the server
-- refused is its query's error in results. Returns the list (false for a
-- refused one) or nil, err when the connection failed.
local function pipeline_statements(self, qs, results)
  local tick, sts = self.tick, {}
  -- touched first, so preparing the new ones evicts none of these
  for i = 1, #qs do
    local st = self.stmts[qs[i].key]
    if st then st.used = tick end
  end
  for i = 1, #qs do
    local q = qs[i]
    local st, err = self.stmts[q.key], nil
    if q.n > MAX_PARAMS then
      st, results[i] = false, too_many(q.n)
    elseif not st then
      st, err = self:prepare(q.key, q.sql, q.oids)
      if not st then
        if type(err) ~= "table" or self.broken then return nil, err end
        st, results[i] = false, err
      else
        st.used = tick
      end
      self.busy = true
    end
    sts[i] = st
  end
  return sts
end

-- Reads the answers of queries first..last into results; nil, err when the
-- connection failed.
local function pipeline_answers(self, qs, sts, results, first, last)
  for i = first, last do
    local st = sts[i]
    if st then
      self.busy = true
      local rows, err = self:collect(st)
      if not rows then
        if type(err) ~= "table" or self.broken then return nil, err end
        -- as in Conn:extended: a statement the server no longer has or can no longer run
        if (err.code == "0A000" or err.code == "26000") and self.stmts[qs[i].key] == st then
          self:forget(qs[i].key)
        end
      end
      results[i] = rows or err
    end
  end
  return true
end

-- qs: query records (encode_args). Returns the list of results, each rows
-- or the query's server error, or nil, err when the connection failed.
function Conn:pipeline(qs)
  local n, bound = #qs, self.pool.statement_cache
  local distinct, count = {}, 0
  for i = 1, n do
    local k = qs[i].key
    if not distinct[k] then distinct[k], count = true, count + 1 end
  end
  if count > bound then return pipeline_each(self, qs) end
  local ok, err = begin_io(self)
  if not ok then return nil, err end
  self.tick = self.tick + 1
  local results, sts = {}, nil
  sts, err = pipeline_statements(self, qs, results)
  if not sts then return nil, err end
  local parts, bytes, first = {}, 0, 1
  for i = 1, n do
    local q, st = qs[i], sts[i]
    if st then
      local b, berr = bind_batch(st, tunpack(q, 1, q.n))
      if not b then
        sts[i], results[i] = false, berr
      else
        parts[#parts + 1], bytes = b, bytes + #b
      end
    end
    if bytes >= PIPELINE_WINDOW or i == n then
      if #parts > 0 then
        for j, closed in ipairs(self.closes) do table.insert(parts, j, proto.close_statement(closed)) end
        self.closes = {}
        ok, err = self:send(tconcat(parts))
        if not ok then return nil, err end
        ok, err = pipeline_answers(self, qs, sts, results, first, i)
        if not ok then return nil, err end
      end
      parts, bytes, first = {}, 0, i + 1
    end
  end
  self.busy = false
  return results
end

-- Raises for SQL that is not a string or holds a NUL, at the given level
-- (1: the function calling check_sql, 2: its caller).
local function check_sql(sql, level)
  if type(sql) ~= "string" then error("pg: query expects SQL text as a string", level + 1) end
  if sql:find("\0", 1, true) then error("pg: SQL text must not contain NUL", level + 1) end
end

-- A query record: { sql =, key =, oids =, n =, the parameters 1..n }, the
-- arguments with tables (pg.json, pg.bytea, arrays) turned into the
-- strings moonhttp.pgbind sends; the rest go as they are. key names the
-- statement in the cache: the SQL, and the types it was parsed with when
-- any is given (pg.bytea). Raises on misuse, before any connection is
-- taken (the caller checks sql with check_sql).
local function encode_args(sql, n, ...)
  local q = { sql = sql, key = sql, oids = NO_OIDS, n = n, ... }
  local oids
  for i = 1, n do
    local a = q[i]
    local ta = type(a)
    if ta == "table" or ta == "function" or ta == "thread" or (ta == "userdata" and a ~= null) then
      local v, _, oid = encode_param(a, i)
      q[i] = v
      if oid ~= 0 then
        oids = oids or {}
        oids[i] = oid
      end
    end
  end
  if oids then
    for i = 1, n do oids[i] = oids[i] or 0 end
    q.oids, q.key = oids, sql .. "\0" .. tconcat(oids, ",")
  end
  return q
end

-- A query's arguments as Conn:extended takes them (key, sql, oids, the
-- parameters): a few plain values (nil, pg.null, booleans, numbers,
-- strings) as they are, without a record; anything else through
-- encode_args.
local PLAIN = { ["nil"] = true, boolean = true, number = true, string = true }
local FEW = 4
local function query_args(sql, n, ...)
  check_sql(sql, 3)
  if n <= FEW then
    local plain = true
    for i = 1, n do
      local a = select(i, ...)
      if not PLAIN[type(a)] and a ~= null then plain = false; break end
    end
    if plain then
      return sql, sql, NO_OIDS, ...
    end
  end
  local q = encode_args(sql, n, ...)
  return q.key, sql, q.oids, tunpack(q, 1, n)
end

-- Pool ---------------------------------------------------------------------

local Pool = {}
Pool.__index = Pool

local POOL_KEYS = { "host", "port", "path", "user", "password", "database", "tls", "size",
  "idle_timeout", "connect_timeout", "acquire_timeout", "query_timeout", "statement_cache",
  "on_notice", "application_name" }
local TLS_KEYS = { "verify", "ca", "server_name", "min_version" }

local function check_opts(o)
  if type(o) ~= "table" then error("pg.pool: expects a table of options", 3) end
  core.check_opts(o, "pg.pool", POOL_KEYS, 3)
  if type(o.tls) == "table" then
    core.check_opts(o.tls, "pg.pool: tls", TLS_KEYS, 3)
    local v = o.tls.min_version
    if v ~= nil and v ~= "1.2" and v ~= "1.3" then
      error('pg.pool: tls.min_version: expected "1.2" or "1.3"', 3)
    end
  end
  -- num is called here, for pg.pool's caller: 4 up
  local function num(k, default, min) return core.opt_number(o, k, default, min, "pg.pool", 4) end
  local tls = o.tls
  if tls == true then tls = {} end
  if tls ~= nil and tls ~= false and type(tls) ~= "table" then
    error("pg.pool: tls must be false, true or { verify =, ca =, server_name =, min_version = }", 3)
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
function Pool:notice(e)
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
    pool:put(c)
  elseif self.slot then
    self.slot = false
    pool.open = pool.open - 1
    pool:pass_slot()
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

function Pool:new_conn()
  self.next = self.next + 1
  return new_conn(self, "pg:" .. self.id .. ":" .. self.next)
end

-- A connection ready to use (checked out: give it back with put), or nil, err.
function Pool:get()
  local deadline
  while true do
    local c = self.idle[self.nidle]
    if c then
      self.idle[self.nidle] = nil
      self.nidle = self.nidle - 1
    elseif self.open < self.size then
      self.open = self.open + 1
      c = self:new_conn()
    else
      deadline = deadline or http.now() + self.acquire_timeout
      local got, err = wait_turn(self, deadline)
      if not got then return nil, err end
      c = got ~= true and got or self:new_conn() -- handed a connection, or a free slot
    end
    c.out = true
    local ok, err = c:open()
    if ok then
      local k = c.reused and "reuses" or "connects"
      self.counters[k] = self.counters[k] + 1
      return c
    end
    self:drop(c)
    if err ~= "stale pooled session" then return nil, err end
  end
end

-- Hands a free slot (room for one more connection) to the first waiter.
function Pool:pass_slot()
  local w = next_waiter(self)
  if w then
    self.open = self.open + 1
    w:hand(true)
  end
end

-- Gives back the slot of a checked-out connection that will not be used again.
function Pool:drop(c)
  if not c.out then return end
  c.out = false
  if c.sock then c.sock:close(); c.sock = nil end
  self.open = self.open - 1
  self.counters.dropped = self.counters.dropped + 1
  self:pass_slot()
end

-- Returns a checked-out connection: parked for the next user when it is
-- healthy and idle, dropped when it broke or is inside a (failed)
-- transaction. Idempotent.
function Pool:put(c)
  if not c.out then return end
  if c.broken or c.busy or c.status ~= "I" or not c.sock then return self:drop(c) end
  -- bytes read past ReadyForQuery would be lost with the buffer: never park such a session
  if c.inpos <= #c.inbuf then return self:drop(c) end
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
  self.pool:put(self)
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
    local c, err = pool:get()
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
  local c, err = self:get()
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
  self._pool:put(c)
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
    self._pool:drop(c)
  end
end

function Pool:acquire()
  local c, err = self:get()
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
