-- One PostgreSQL server session for moonhttp.pg (lua/moonhttp/pg.lua, the
-- pool and the API): the socket and its input buffer, TLS negotiation,
-- startup and authentication, the extended and simple query protocols,
-- pipelines, the cache of prepared statements, cancellation; and the
-- checks and encoding of a query's arguments, which run before a
-- connection is taken. The messages themselves are moonhttp.pg.proto's.
local http = require "moonhttp"
local proto = require "moonhttp.pg.proto"
local types = require "moonhttp.pg.types"
local auth = require "moonhttp.pg.auth"
local crypto = require "moonhttp.pgauth"
local scan = require("moonhttp.pgrows").scan
local bind = require("moonhttp.pgbind").bind

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
      self.pool:_notice(proto.parse_fields(body))
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
    cert = tls.cert,
    key = tls.key,
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


return {
  Conn = Conn,
  new = new_conn,
  is_fatal = is_fatal,
  check_sql = check_sql,
  encode_args = encode_args,
  query_args = query_args,
  NO_TIMEOUT = NO_TIMEOUT,
}
