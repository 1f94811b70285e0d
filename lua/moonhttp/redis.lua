-- A Redis client (RESP2) over http.tcp(): redis.connect{...} → a client whose
-- methods are Redis commands (r:get(k), r:hset(k, f, v), or r:call("GET", k)).
--
-- Replies: status and bulk strings as strings, integers as integers, arrays
-- as lists, nil bulk/array as redis.null. An error reply returns
-- nil, "ERR ..." (its message, which starts with Redis's uppercase code);
-- a transport failure returns nil, err with the socket's lowercase fixed
-- strings ("timeout", "closed", "connection refused", ...) or
-- "protocol error", and closes the connection. `timeout` is a deadline for
-- each whole call (sending the command and reading every part of its
-- reply; for connect: waiting for a pool slot, connecting, AUTH and
-- SELECT), not a bound per read, so a reply cut by it is never half-read
-- by the next command: the connection is closed. Connections are pooled per
-- host:port/db: r:keepalive() (or <close>) parks a healthy one, and at most
-- pool_size (default 30) are open per worker: past it, connect waits.
local core = require "moonhttp.core"

local M = {}

M.null = setmetatable({}, { __tostring = function() return "redis.null" end })

-- An error reply inside an array or a pipeline (where nil, err cannot be returned).
local ErrorReply = { __tostring = function(e) return e.err end }
M.ErrorReply = ErrorReply

local PROTOCOL = "protocol error"
local MAX_BULK = 512 * 1024 * 1024

local tointeger, concat, type, select, byte = math.tointeger, table.concat, type, select, string.byte
local resp = require "moonhttp.resp"
local resp_read = resp.read
local null = M.null
local new_waiter = require("moonhttp.waiter").new

-- The RESP bytes of one command (moonhttp.resp.command, in C).
local command = resp.command
M.encode = command

-- redis.read_reply(sock [, line]): one reply from a bare socket (its first
-- line already read when `line` is given), read exactly, never past its
-- end, for a socket that carries more than Redis replies. The client reads
-- ahead instead (below). Returns value; or nil, msg, false for an error
-- reply; or nil, err, true for a transport or protocol failure.
local function read_exact(sock, depth, line)
  local err
  if not line then
    line, err = sock:receive("l")
    if not line then return nil, err, true end
  end
  local kind, rest = line:sub(1, 1), line:sub(2)
  if kind == "+" then return rest end
  if kind == "-" then return nil, rest, false end
  if kind == ":" then
    local n = tointeger(tonumber(rest))
    if not n or not rest:match("^%-?%d+$") then return nil, PROTOCOL, true end
    return n
  end
  if kind == "$" or kind == "*" then
    if not rest:match("^%-?%d+$") then return nil, PROTOCOL, true end
    local n = tointeger(tonumber(rest))
    if n == -1 then return M.null end
    if not n or n < -1 or n > MAX_BULK then return nil, PROTOCOL, true end
    if kind == "$" then
      local data, e = sock:receive(n + 2)
      if not data then return nil, e, true end
      if data:sub(-2) ~= "\r\n" then return nil, PROTOCOL, true end
      return data:sub(1, n)
    end
    if (depth or 0) > 32 then return nil, PROTOCOL, true end
    local list = {}
    for i = 1, n do
      local v, e, transport = read_exact(sock, (depth or 0) + 1)
      if v == nil then
        if transport then return nil, e, true end
        v = setmetatable({ err = e }, ErrorReply)
      end
      list[i] = v
    end
    return list
  end
  return nil, PROTOCOL, true
end
M.read_reply = function(sock, line) return read_exact(sock, 0, line) end

-- Replies are read ahead into the client's input (self.buf from byte self.pos
-- on) and cut there in C (moonhttp.resp, src/wire/redis_resp.c): one socket read and
-- one call for a reply that arrives whole, where a line and a bulk read and
-- their string work in Lua cost several times more per command.
local CHUNK = 64 * 1024

-- Reads until the input (rest: what is left of it) holds at least `need` bytes
-- and ends with '\n' (no reply is whole before both, so nothing is scanned in
-- vain and a read never waits for bytes that are not coming); a bulk's known
-- remainder past CHUNK is read exactly. Returns the input; or nil, err,
-- whether bytes were lost with the failure.
local function fill(sock, rest, need)
  local have = #rest
  local data, err
  if need - have > CHUNK then data, err = sock:receive(need - have) else data, err = sock:receiveany(CHUNK) end
  if not data then return nil, err, have > 0 end
  have = have + #data
  if have >= need and byte(data, -1) == 10 then
    if rest == "" then return data end
    return rest .. data
  end
  local parts, n = { rest, data }, 2
  repeat
    if need - have > CHUNK then data, err = sock:receive(need - have) else data, err = sock:receiveany(CHUNK) end
    if not data then return nil, err, true end
    n = n + 1
    parts[n] = data
    have = have + #data
  until have >= need and byte(data, -1) == 10
  return concat(parts, "", 1, n)
end

-- Reads one reply. Returns value; or nil, msg, false for an error reply; or
-- nil, err, true for a transport or protocol failure (the caller closes).
-- `partial` (read_message's) is whether bytes of the reply were read before
-- a transport failure.
local function read_reply(self)
  local buf, pos = self.buf, self.pos
  while true do
    local nxt, v, msg = resp_read(buf, pos, null, ErrorReply)
    if nxt then
      if nxt > #buf then
        self.buf, self.pos = "", 1
      else
        self.buf, self.pos = buf, nxt
      end
      if v == nil then return nil, msg, false end
      return v
    end
    if nxt == false then return nil, PROTOCOL, true end
    local rest = pos > 1 and buf:sub(pos) or buf
    local err, partial
    buf, err, partial = fill(self.sock, rest, v)
    if not buf then return nil, err, true, partial end
    pos = 1
  end
end

-- Sockets that parked their connection, for the next connect to take up
-- (any key: a socket connects anew): a new socket per request was another
-- tenth. Only keepalive puts one here, after which no client refers to it.
local spare, nspare = {}, 0
local SPARE_MAX = 64

local Client = {}
local methods = {}
Client.__index = function(_, name)
  local m = methods[name]
  if m then return m end
  if type(name) ~= "string" then return nil end
  local cmd = name:upper()
  m = function(self, ...) return self:_exec(cmd, ...) end
  methods[name] = m -- every client shares the generated method
  return m
end

-- The connection failed at the transport level: nothing on it can be trusted.
local function broken(self, err)
  if self.sock then self.sock:close() end
  self.sock = false
  return nil, err
end

-- Starts the clock of one call: every wait until its reply is whole ends by then.
local function arm(self)
  self.sock:setdeadline(self.timeout)
end

-- One command and its reply, within the deadline already armed.
local function request(self, ...)
  local sock = self.sock
  local ok, err = sock:send(command(...))
  if not ok then return broken(self, err) end
  local v, e, transport = read_reply(self)
  if v == nil then
    if transport then return broken(self, e) end
    return nil, e
  end
  return v
end

-- Commands that block or change the connection's state never share it (with
-- auto_pipeline): "block" ones leave it as it was, so it is parked after;
-- "state" ones leave it selected, authenticated or in a transaction, so it is
-- closed at keepalive instead of reaching the next user through the pool.
local PINNED = {}
for c in ("BLPOP BRPOP BRPOPLPUSH BLMOVE BLMPOP BZPOPMIN BZPOPMAX BZMPOP XREAD XREADGROUP WAIT WAITAOF"
    ):gmatch("%S+") do
  PINNED[c] = "block"
end
for c in ("AUTH HELLO SELECT RESET QUIT CLIENT MULTI EXEC DISCARD WATCH UNWATCH SUBSCRIBE PSUBSCRIBE "
    .. "SSUBSCRIBE UNSUBSCRIBE PUNSUBSCRIBE SUNSUBSCRIBE MONITOR READONLY READWRITE ASKING SYNC PSYNC SHUTDOWN"
    ):gmatch("%S+") do
  PINNED[c] = "state"
end

-- What a command leaves on the connection it ran on, for keepalive: a
-- transaction or WATCH open until EXEC/DISCARD (UNWATCH outside MULTI) ends
-- it, or ("state" above) a selected db, a login or a mode that nothing
-- undoes here, so the connection is closed instead of reaching the next user
-- of the pool. Any client, pipelined or not: the pool's users expect db
-- `p.db`, no open transaction and nothing watched.
local function note_state(self, cmd)
  if cmd == "MULTI" then self.tx = true
  elseif cmd == "WATCH" then self.watching = true
  elseif cmd == "EXEC" or cmd == "DISCARD" then self.tx, self.watching = false, false
  elseif cmd == "UNWATCH" then if not self.tx then self.watching = false end
  elseif PINNED[cmd] == "state" then self.dirty = true
  end
end

local auto_call, take_dedicated

-- cmd: upper case. A client with auto_pipeline sends through its key's shared
-- connection until a command must not share it (PINNED), which takes a
-- connection of its own from the pool and keeps it till keepalive.
function methods:_exec(cmd, ...)
  local sock = self.sock
  if not sock then
    local pipe = self.pipe
    if not pipe then return nil, "closed" end
    local pinned = PINNED[cmd]
    if not pinned then
      local v, err, shared = auto_call(self, pipe, cmd, ...)
      if shared then
        if v == nil then return nil, err end
        return v
      end
    end
    local ok, err = take_dedicated(self)
    if not ok then return nil, err end
    sock = self.sock
  end
  if PINNED[cmd] then note_state(self, cmd) end
  if self.subscribed then error("redis: this connection is subscribed; use read_message", 3) end
  arm(self)
  return request(self, cmd, ...)
end

function methods:call(cmd, ...)
  if type(cmd) == "string" then cmd = cmd:upper() end
  return self:_exec(cmd, ...)
end

-- r:pipeline(function(p) p:set(k, v); p:get(k) end) → list of replies (error
-- replies as ErrorReply tables with .err) | nil, transport err.
function methods:pipeline(fn)
  if not self.sock then
    local ok, err = take_dedicated(self)
    if not ok then return nil, err end
  end
  local sock = self.sock
  local queued = {}
  local p = setmetatable({}, { __index = function(_, name)
    local cmd = name:upper()
    return function(_, ...)
      if PINNED[cmd] then note_state(self, cmd) end
      queued[#queued + 1] = command(cmd, ...)
    end
  end })
  fn(p)
  if #queued == 0 then return {} end
  arm(self)
  local ok, err = sock:send(concat(queued))
  if not ok then return broken(self, err) end
  local replies = {}
  for i = 1, #queued do
    local v, e, transport = read_reply(self)
    if v == nil then
      if transport then return broken(self, e) end
      v = setmetatable({ err = e }, ErrorReply)
    end
    replies[i] = v
  end
  return replies
end

-- Pub/sub: the connection is dedicated from here on (never pooled).
local function subscribe_cmd(self, cmd, ...)
  if not self.sock then
    local ok, err = take_dedicated(self)
    if not ok then return nil, err end
  end
  local sock = self.sock
  local n = select("#", ...)
  arm(self)
  local ok, err = sock:send(command(cmd, ...))
  if not ok then return broken(self, err) end
  self.subscribed = true
  local last
  for _ = 1, math.max(n, 1) do
    local v, e, transport = read_reply(self)
    if v == nil then
      if transport then return broken(self, e) end
      return nil, e
    end
    last = v
  end
  return last
end

function methods:subscribe(...) return subscribe_cmd(self, "SUBSCRIBE", ...) end
function methods:psubscribe(...) return subscribe_cmd(self, "PSUBSCRIBE", ...) end
function methods:unsubscribe(...) return subscribe_cmd(self, "UNSUBSCRIBE", ...) end

-- r:read_message() → kind, channel, payload ("message") | kind, pattern, channel, payload
-- ("pmessage") | nil, err. A "timeout" before any byte of a message leaves
-- the subscription usable; one in the middle of a message closes it.
function methods:read_message()
  local sock = self.sock
  if not sock then return nil, "closed" end
  arm(self)
  local v, e, transport, partial = read_reply(self)
  if v == nil then
    if e == "timeout" and not partial then return nil, e end
    if transport then return broken(self, e) end
    return nil, e
  end
  if type(v) ~= "table" then return nil, PROTOCOL end
  return table.unpack(v)
end

function methods:settimeout(seconds)
  if seconds ~= nil then self.timeout = seconds end
  if self.sock then self.sock:settimeouts(seconds, seconds, seconds) end
end

-- Parks the connection in the pool (unless it is subscribed or broken); the client is closed after.
function methods:keepalive()
  local sock = self.sock
  if not sock then
    if self.pipe then -- an auto_pipeline client that took no connection of its own
      self.pipe = false
      return true
    end
    return nil, "closed"
  end
  self.sock = false
  self.pipe = false
  if self.dirty or self.tx or self.watching then -- SELECT, AUTH, an open MULTI...: not for the next user
    sock:close()
    return true
  end
  if self.subscribed then
    sock:close()
    return nil, "subscribed"
  end
  if self.pos <= #self.buf then -- more than was asked for: as sock:keepalive with unread bytes
    sock:close()
    return nil, "unread data"
  end
  local ok, err = sock:keepalive(self.idle_timeout, self.pool_size)
  if not ok then return nil, err end
  if nspare < SPARE_MAX then
    nspare = nspare + 1
    spare[nspare] = sock
  end
  return ok
end

function methods:close()
  if self.sock then self.sock:close() end
  self.sock = false
  self.pipe = false
  return true
end

function methods:reused() return self.sock and self.sock:reused() or 0 end

Client.__close = function(self) methods.keepalive(self) end
Client.__tostring = function(self) return "moonhttp.redis (" .. self.key .. ")" end

local CONNECT_KEYS = { "host", "port", "path", "password", "db", "timeout", "pool_size", "idle_timeout",
  "tls", "auto_pipeline" }

-- What connect derives from an options table, kept per table (weakly) with
-- a copy of its fields: most apps pass one table on every request, and
-- checking it, formatting the pool key and building the socket's options
-- each time were a tenth of a seed route's instructions
-- (bench/notes/2026-12-06-redis-json.md). A table changed since is checked
-- again.
local prepared = setmetatable({}, { __mode = "k" })
local NO_OPTS = {}

local function unchanged(opts, p)
  local seen, n = p.seen, 0
  for k, v in next, opts do
    if seen[k] ~= v then return false end
    n = n + 1
  end
  return n == p.n
end

local function prepare(opts)
  if type(opts) ~= "table" then error("redis.connect: options must be a table", 3) end
  core.check_opts(opts, "redis.connect", CONNECT_KEYS, 3)
  local tls = opts.tls
  if tls ~= nil and type(tls) ~= "boolean" and type(tls) ~= "table" then
    error("redis.connect: tls must be true or a table", 3)
  end
  if type(tls) == "table" and tls.min_version ~= nil and tls.min_version ~= "1.2"
      and tls.min_version ~= "1.3" then
    error('redis.connect: tls.min_version: expected "1.2" or "1.3"', 3)
  end
  local host, port, path = opts.host or "127.0.0.1", opts.port or 6379, opts.path
  local db = opts.db or 0
  if type(db) ~= "number" or db < 0 then error("redis.connect: db must be a number >= 0", 3) end
  local auto = opts.auto_pipeline
  if auto ~= nil and type(auto) ~= "boolean" then error("redis.connect: auto_pipeline must be a boolean", 3) end
  local key = string.format("redis %s/%d/%s", path and ("unix:" .. path) or (host .. ":" .. port),
    db, opts.password or "")
  -- pool_size caps the connections too: past it, connects wait for one to come back.
  local pool_size = opts.pool_size or 30
  local p = { key = key, host = path and "unix:" .. path or host, port = not path and port or nil,
    db = db, password = opts.password, timeout = opts.timeout or 5, pool_size = pool_size,
    idle_timeout = opts.idle_timeout or 60,
    copts = { pool = key, pool_size = pool_size, tls = opts.tls }, seen = {}, n = 0, auto = auto == true,
    pipe = false }
  for k, v in next, opts do
    p.seen[k] = v
    p.n = p.n + 1
  end
  prepared[opts] = p
  return p
end

-- A connection of its own for p: from the pool, or new (then AUTH and SELECT).
local function dedicated(p)
  local sock
  if nspare > 0 then
    sock = spare[nspare]
    spare[nspare] = nil
    nspare = nspare - 1
  else
    sock = core.tcp()
  end
  local timeout = p.timeout
  sock:settimeouts(timeout, timeout, timeout)
  sock:setdeadline(timeout) -- one clock for the connect, AUTH and SELECT together
  local ok, err
  if p.port then
    ok, err = sock:connect(p.host, p.port, p.copts)
  else
    ok, err = sock:connect(p.host, p.copts)
  end
  if not ok then return nil, err end
  -- Every field is always set (false when off): a missing one would read as a command.
  local self = setmetatable({ sock = sock, pipe = false, dirty = false, tx = false, watching = false,
    key = p.key, subscribed = false, timeout = timeout,
    pool_size = p.pool_size, idle_timeout = p.idle_timeout, buf = "", pos = 1 }, Client)
  if sock:reused() == 0 then
    if p.password then
      local v, e = request(self, "AUTH", p.password)
      if not v then self:close(); return nil, e end
    end
    if p.db ~= 0 then
      local v, e = request(self, "SELECT", p.db)
      if not v then self:close(); return nil, e end
    end
  end
  return self
end

-- Automatic pipelining (redis.connect{ auto_pipeline = true }; docs/guide/databases.md).
-- The commands the handlers of one loop iteration issue wait in their key's
-- pipe and go out in one write on one shared connection; the replies, read
-- in order (most often in one read), go back to their callers through
-- waiters. A task of its own (a timer's) owns the connection: it writes a
-- batch, reads its replies, then the next batch, and ends after LINGER
-- seconds without commands (the connection parked in the pool). At -c16 a
-- seed route cost two system calls on its own Redis connection, a write and
-- a read (bench/TFB.md).

local MAX_QUEUE = 1024 -- commands waiting for the next write; past it, a command takes its own connection
local LINGER = 0.1     -- seconds the pipe's task waits for more commands before it ends

local function pipe_loop(pipe)
  local c, err
  local idle = new_waiter()
  -- Two sets of lists, one filling while the other's batch is in flight.
  local spare_queue, spare_waiters = {}, {}
  while true do
    local n = pipe.n
    if n == 0 then
      pipe.idle = idle
      idle:wait(LINGER) -- woken by the next command; or the linger ended, or a stop began
      pipe.idle = false
      n = pipe.n
      if n == 0 then break end
    end
    local queue, waiters = pipe.queue, pipe.waiters
    pipe.queue, pipe.waiters, pipe.n = spare_queue, spare_waiters, 0
    pipe.batch, pipe.batch_n = waiters, n
    if not (c and c.sock) then c, err = dedicated(pipe.p) end
    local i = 1
    if c then
      arm(c)
      local ok, e = c.sock:send(concat(queue, "", 1, n))
      if ok then
        while i <= n do
          local v, msg, transport = read_reply(c)
          if v == nil and transport then
            e = msg
            break
          end
          waiters[i]:wake(v, msg)
          i = i + 1
        end
      end
      err = e
      if i <= n then broken(c, e) end
    end
    for j = i, n do waiters[j]:wake(nil, err) end -- the connection failed: every command in the batch
    pipe.batch_n = 0
    for j = 1, n do queue[j], waiters[j] = nil, nil end
    spare_queue, spare_waiters = queue, waiters
  end
  if c and c.sock then c:keepalive() end
end

-- The pipe's task. Should its loop fail, the pipe must not stay marked
-- running with nobody to send: the commands in flight and queued are
-- answered (a waiter already woken keeps its answer) and the next command
-- starts a new task.
local function run_pipe(pipe)
  local ok, err = pcall(pipe_loop, pipe)
  pipe.running = false
  if not ok then
    core.log("error", "redis: auto_pipeline: " .. tostring(err))
    for i = 1, pipe.batch_n do pipe.batch[i]:wake(nil, "pipe failed") end
    local waiters, n = pipe.waiters, pipe.n
    pipe.queue, pipe.waiters, pipe.n, pipe.batch_n = {}, {}, 0, 0
    for i = 1, n do waiters[i]:wake(nil, "pipe failed") end
  end
end

local function pipe_of(p)
  local pipe = p.pipe
  if not pipe then
    pipe = { p = p, queue = {}, waiters = {}, n = 0, running = false, idle = false, batch = false, batch_n = 0 }
    p.pipe = pipe
  end
  return pipe
end

-- One command through the pipe: value | nil, err, and whether it went
-- (false: the queue is full, a stop began or no task could start; the
-- caller takes a connection of its own).
auto_call = function(self, pipe, ...)
  local n = pipe.n
  if n >= MAX_QUEUE or core.stopping() then return nil, nil, false end
  local bytes = command(...) -- a misuse raises before anything is queued
  if not pipe.running then
    if not core.timer(0, run_pipe, pipe) then return nil, nil, false end
    pipe.running = true
  elseif n == 0 and pipe.idle then
    pipe.idle:wake()
  end
  local w = new_waiter()
  n = n + 1
  pipe.n = n
  pipe.queue[n], pipe.waiters[n] = bytes, w
  -- The pipe's task wakes every waiter; this bound is for a task killed
  -- (a reload's grace ended): a batch in flight, then this one.
  local v, err = w:wait(2 * self.timeout + 1)
  return v, err, true
end

take_dedicated = function(self)
  local pipe = self.pipe
  if not pipe then return nil, "closed" end
  local c, err = dedicated(pipe.p)
  if not c then return nil, err end
  self.sock, c.sock = c.sock, false
  self.sock:settimeouts(self.timeout, self.timeout, self.timeout)
  return true
end

-- redis.parse_url("redis://[:password@]host[:port][/db]") → redis.connect's options | nil, err.
-- "rediss://" is the same over TLS (tls = true); the password is percent-decoded. A user
-- name (Redis 6 ACL) is refused: connect logs in with AUTH password only.
function M.parse_url(url)
  if type(url) ~= "string" then return nil, "expected a redis:// URL string" end
  local scheme, rest = url:match("^(rediss?)://(.*)$")
  if not scheme then return nil, "expected redis://host[:port][/db] or rediss://..." end
  local auth, hostport, path = rest:match("^([^@/]*)@([^/]*)(.*)$")
  if not auth then hostport, path = rest:match("^([^/]*)(.*)$") end
  local opts = { tls = scheme == "rediss" or nil }
  if auth then
    local user, password = auth:match("^([^:]*):(.*)$")
    if not user then return nil, "expected :password@ before the host" end
    if user ~= "" then return nil, "a user name (ACL) is not supported; use redis://:password@host" end
    opts.password = password:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
  end
  local host, port = hostport:match("^%[([^%]]+)%]:?(%d*)$")
  if not host then host, port = hostport:match("^([^:]*):?(%d*)$") end
  if not host or host == "" then return nil, "no host in " .. url end
  opts.host = host
  if port ~= "" then
    opts.port = tonumber(port)
    if opts.port < 1 or opts.port > 65535 then return nil, "port out of range in " .. url end
  end
  if path ~= "" and path ~= "/" then
    local db = path:match("^/(%d+)$")
    if not db then return nil, "expected /<db number> after the host in " .. url end
    opts.db = tonumber(db)
  end
  return opts
end

-- redis.connect{ host =, port =, path =, password =, db =, timeout =, pool_size =, idle_timeout =,
--   tls = true | { ca =, verify =, server_name =, cert =, key =, min_version = }, auto_pipeline = }
-- tls is http.tcp()'s: the pool key carries its options, so TLS and plain connections (or two
-- client certificates) never share one. With auto_pipeline the client holds no connection: its
-- commands go through the pipe of its options (above).
function M.connect(opts)
  opts = opts or NO_OPTS
  local p = prepared[opts]
  if not p or not unchanged(opts, p) then p = prepare(opts) end
  if p.auto then
    return setmetatable({ sock = false, pipe = pipe_of(p), dirty = false, tx = false, watching = false, key = p.key, subscribed = false,
      timeout = p.timeout,
      pool_size = p.pool_size, idle_timeout = p.idle_timeout, buf = "", pos = 1 }, Client)
  end
  return dedicated(p)
end

return core.strict_module(M, "redis")
