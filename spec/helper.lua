-- Starts the real moonhttp binary on a free port and talks to it over real
-- sockets. Errors here raise, so a broken helper fails the spec that uses it
-- (busted would otherwise report a helper error as an odd pass).
local socket = require "socket"

local H = {}

H.bin = os.getenv("MOONHTTP_BIN") or "build/moonhttp"
assert(io.open(H.bin, "r"), "moonhttp binary not found at " .. H.bin .. " (set MOONHTTP_BIN)")

local tmpdir = os.getenv("TMPDIR") or "/tmp"
local counter = 0

local function tmpname(suffix)
  counter = counter + 1
  return string.format("%s/mh-spec-%d-%d-%d%s", tmpdir, os.time(), math.random(1e9), counter,
    suffix or "")
end
H.tmpname = tmpname

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end
H.read_file = read_file

function H.write_file(path, content)
  local f = assert(io.open(path, "wb"))
  f:write(content)
  f:close()
  return path
end

--- Writes Lua source to a temporary script file and returns its path.
function H.script(source)
  return H.write_file(tmpname(".lua"), source)
end

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
H.shell_quote = shell_quote

--- Raises if a sanitizer (ASan, UBSan, LeakSanitizer) reported anything.
function H.check_sanitizers(text, what)
  if text:find("ERROR: AddressSanitizer", 1, true) or text:find("runtime error:", 1, true)
      or text:find("ERROR: LeakSanitizer", 1, true) then
    error("sanitizer report from moonhttp (" .. tostring(what) .. "):\n" .. text, 2)
  end
end

--- Whether process pid runs a sanitizer build: ASan keeps freed memory in its
--- quarantine and maps shadow memory, so RSS bounds mean less there.
function H.sanitized(pid)
  local f = assert(io.open("/proc/" .. pid .. "/maps"))
  local text = f:read("a")
  f:close()
  return text:find("libasan", 1, true) ~= nil
end

--- Runs the binary to completion: returns exit code and combined output.
function H.run(args)
  local out = tmpname(".out")
  local cmd = H.bin
  for _, a in ipairs(args) do cmd = cmd .. " " .. shell_quote(a) end
  local ok, how, code = os.execute(cmd .. " >" .. out .. " 2>&1 </dev/null")
  local output = read_file(out) or ""
  os.remove(out)
  H.check_sanitizers(output, table.concat(args, " "))
  if how == "signal" then code = 128 + code end
  return code, output
end

local Server = {}
Server.__index = Server

--- Starts `moonhttp [flags] script` listening on 127.0.0.1 on a free port.
-- opts.flags: extra command-line flags; opts.env: "VAR=value ..." prefix.
function H.start(script, opts)
  opts = opts or {}
  if script:find("\n") then script = H.script(script) end
  local log, rc = tmpname(".log"), tmpname(".rc")
  -- opts.no_listen: the script's own listen setting applies (it should use port 0).
  local args = opts.no_listen and { "--workers", "1" } or { "--listen", "127.0.0.1:0", "--workers", "1" }
  -- opts.script_workers: no --workers flag, so the script's own setting (or auto) applies.
  if opts.script_workers then table.remove(args); table.remove(args) end
  for _, f in ipairs(opts.flags or {}) do args[#args + 1] = f end
  local cmd = H.bin
  for _, a in ipairs(args) do cmd = cmd .. " " .. shell_quote(a) end
  cmd = cmd .. " " .. shell_quote(script)
  -- opts.after: arguments after the script path
  for _, a in ipairs(opts.after or {}) do cmd = cmd .. " " .. shell_quote(a) end
  -- The wrapper shell reports the server's pid, then its exit status into rc.
  -- The waiting part runs in a background subshell, so closing the pipe (or its
  -- garbage collection, when a failed spec drops a server it never stopped)
  -- returns at once instead of blocking busted until that server exits. Its
  -- stderr is quiet so a server killed on purpose prints no "Killed" line.
  local wrapper = string.format("(%s %s >%s 2>&1 </dev/null & p=$!; echo $p; wait $p; echo $? >%s) 2>/dev/null &",
    opts.env or "", cmd, log, rc)
  local pipe = assert(io.popen("sh -c " .. shell_quote(wrapper), "r"))
  local pid = tonumber(pipe:read("l"))
  assert(pid, "could not start " .. cmd)
  local self = setmetatable({ pid = pid, log = log, rc = rc, pipe = pipe, script = script }, Server)
  local deadline = socket.gettime() + 10
  while socket.gettime() < deadline do
    local text = read_file(log) or ""
    local port = text:match("listening on [^\n]* %(port (%d+)%)")
    if port then
      self.port = tonumber(port)
      return self
    end
    if read_file(rc) then break end
    socket.sleep(0.02)
  end
  local text = read_file(log) or ""
  self:stop()
  error("server did not start: " .. text)
end

function Server:signal(sig)
  os.execute(string.format("kill -%s %d 2>/dev/null", sig, self.pid))
end

function Server:alive()
  return os.execute(string.format("kill -0 %d 2>/dev/null", self.pid)) == true
end

--- Waits for the server to exit (after a signal) and returns its exit status.
function Server:wait(timeout)
  local deadline = socket.gettime() + (timeout or 10)
  while socket.gettime() < deadline do
    local rc = read_file(self.rc)
    if rc and rc:match("%d") then
      if self.pipe then self.pipe:close(); self.pipe = nil end
      return tonumber(rc:match("%d+"))
    end
    socket.sleep(0.02)
  end
  return nil
end

--- Stops the server (SIGTERM; SIGINT after 3 s, then SIGKILL) and returns its exit status.
-- SIGTERM drains WebSockets and streams a spec left open for shutdown_timeout
-- (10 s by default); SIGINT ends that drain at once (spec/drain_stop_spec.lua).
function Server:stop()
  if self.stopped then return self.status end
  self.stopped = true
  self:signal("TERM")
  local status = self:wait(3)
  if not status then
    self:signal("INT")
    status = self:wait(12)
  end
  if not status then
    self:signal("KILL")
    status = self:wait(5)
  end
  self.status = status
  H.check_sanitizers(self:logtext(), self.script)
  return status
end

function Server:logtext()
  return read_file(self.log) or ""
end

--- Waits until the log matches a Lua pattern: returns the match (its first
-- capture, if any), or nil after `timeout` seconds (3).
function Server:wait_log(pattern, timeout)
  local deadline = socket.gettime() + (timeout or 3)
  repeat
    local m = self:logtext():match(pattern)
    if m then return m end
    socket.sleep(0.02)
  until socket.gettime() > deadline
  return nil
end

-- A raw client connection ---------------------------------------------------

local Conn = {}
Conn.__index = Conn

function H.connect(port, timeout)
  local s = assert(socket.tcp())
  s:settimeout(timeout or 5)
  assert(s:connect("127.0.0.1", port))
  s:setoption("tcp-nodelay", true)
  return setmetatable({ sock = s, buf = "", timeout = timeout or 5 }, Conn)
end

function Server:connect(timeout) return H.connect(self.port, timeout) end

function Conn:send(data)
  local i = 1
  while i <= #data do
    local n, err, last = self.sock:send(data, i)
    if not n then return nil, err end
    i = n + 1
  end
  return true
end

function Conn:settimeout(t) self.timeout = t; self.sock:settimeout(t) end

-- Reads whatever is available (waiting up to the timeout for something) into
-- the buffer; returns false on close or timeout. luasocket's receive(n) waits
-- for all n bytes, so wait with select and then take what is there.
function Conn:fill()
  local s = self.sock
  if not s:dirty() then
    local ready = socket.select({ s }, nil, self.timeout or 5)
    if #ready == 0 then self.err = "timeout"; return false end
  end
  s:settimeout(0)
  local data, err, partial = s:receive(65536)
  s:settimeout(self.timeout or 5)
  data = data or partial
  if data and #data > 0 then
    self.buf = self.buf .. data
    return true
  end
  self.err = err
  return false
end

function Conn:read_line()
  while true do
    local i = self.buf:find("\r\n", 1, true)
    if i then
      local line = self.buf:sub(1, i - 1)
      self.buf = self.buf:sub(i + 2)
      return line
    end
    if not self:fill() then return nil, self.err end
  end
end

function Conn:read_bytes(n)
  while #self.buf < n do
    if not self:fill() then return nil, self.err end
  end
  local s = self.buf:sub(1, n)
  self.buf = self.buf:sub(n + 1)
  return s
end

--- Reads until the server closes; returns what came.
function Conn:read_all()
  while self:fill() do end
  local s = self.buf
  self.buf = ""
  return s
end

--- True when the server closed the connection (EOF) within `timeout` seconds.
function Conn:closed_by_peer(timeout)
  local saved = self.timeout
  self.timeout = timeout or 2
  while self:fill() do end
  self.timeout = saved
  return self.err ~= "timeout"
end

--- Parses one response. opts.head: the request was HEAD (no body).
-- Returns {status, reason, proto, headers (lowercase name -> value), body}.
function Conn:read_response(opts)
  opts = opts or {}
  local line, err = self:read_line()
  if not line then return nil, err end
  local proto, status, reason = line:match("^(HTTP/1%.%d) (%d%d%d) ?(.*)$")
  if not proto then return nil, "bad status line: " .. line end
  local res = { proto = proto, status = tonumber(status), reason = reason, headers = {}, raw_headers = {} }
  while true do
    local h = self:read_line()
    if not h then return nil, "eof in headers" end
    if h == "" then break end
    local name, value = h:match("^([^:]+):%s*(.-)%s*$")
    res.raw_headers[#res.raw_headers + 1] = h
    local k = name:lower()
    res.headers[k] = res.headers[k] and (res.headers[k] .. ", " .. value) or value
  end
  if res.status < 200 then
    res.body = ""
    return res
  end
  local te, cl = res.headers["transfer-encoding"], res.headers["content-length"]
  if opts.head or res.status == 204 or res.status == 304 then
    res.body = ""
  elseif te and te:lower():find("chunked") then
    local parts = {}
    while true do
      local size_line = self:read_line()
      if not size_line then return nil, "eof in chunked body" end
      local size = tonumber(size_line:match("^%x+"), 16)
      if not size then return nil, "bad chunk size: " .. size_line end
      if size == 0 then
        repeat local t = self:read_line() until t == "" or t == nil
        break
      end
      parts[#parts + 1] = self:read_bytes(size)
      self:read_line()
    end
    res.body = table.concat(parts)
    res.chunks = #parts
  elseif cl then
    res.body = self:read_bytes(tonumber(cl))
  else
    res.body = self:read_all()
  end
  return res
end

function Conn:close() self.sock:close() end

--- One request on a fresh connection. Returns the parsed response.
function H.request(port, method, path, headers, body)
  local c = H.connect(port)
  local lines = { method .. " " .. path .. " HTTP/1.1", "Host: localhost" }
  for k, v in pairs(headers or {}) do lines[#lines + 1] = k .. ": " .. v end
  if body then lines[#lines + 1] = "Content-Length: " .. #body end
  lines[#lines + 1] = "Connection: close"
  assert(c:send(table.concat(lines, "\r\n") .. "\r\n\r\n" .. (body or "")))
  local res, err = c:read_response({ head = method == "HEAD" })
  c:close()
  return res, err
end

function Server:get(path, headers) return H.request(self.port, "GET", path, headers) end

--- GET that never raises: body and status, or nil when the request failed
-- (used while a server reloads or restarts).
function Server:try_get(path)
  local ok, res = pcall(H.request, self.port, "GET", path)
  if ok and res then return res.body, res.status end
end
function Server:request(method, path, headers, body)
  return H.request(self.port, method, path, headers, body)
end

H.sleep = socket.sleep
H.now = socket.gettime

-- Services the data specs talk to ------------------------------------------

local Service = {}
Service.__index = Service

--- Starts `cmd` in the background and waits until `ready(log text)` returns
-- a port (or true). Returns a service with :stop(); raises if it never gets ready.
function H.service(cmd, ready, timeout)
  local log = tmpname(".svc")
  local pipe = assert(io.popen(string.format("sh -c %s", shell_quote(cmd .. " >" .. log
    .. " 2>&1 </dev/null & echo $!")), "r"))
  local pid = tonumber(pipe:read("l"))
  pipe:close()
  assert(pid, "could not start " .. cmd)
  local self = setmetatable({ pid = pid, log = log }, Service)
  local deadline = socket.gettime() + (timeout or 10)
  while socket.gettime() < deadline do
    local got = ready(read_file(log) or "")
    if got then
      self.port = tonumber(got)
      return self
    end
    socket.sleep(0.02)
  end
  local text = read_file(log) or ""
  self:stop()
  error("service did not start: " .. cmd .. "\n" .. text)
end

function Service:stop()
  if self.stopped then return end
  self.stopped = true
  os.execute(string.format("kill %d 2>/dev/null", self.pid))
  for _ = 1, 100 do
    if os.execute(string.format("kill -0 %d 2>/dev/null", self.pid)) ~= true then break end
    socket.sleep(0.02)
  end
  os.execute(string.format("kill -9 %d 2>/dev/null", self.pid))
  os.remove(self.log)
end

--- The line peer of spec/servers/echo.py (Debian python3), with a unix socket at `unix_path`.
function H.echo_server(unix_path)
  return H.service("/usr/bin/python3 spec/servers/echo.py " .. (unix_path or ""), function(text)
    return text:match("port (%d+)")
  end)
end

--- spec/servers/upstream.lua (the client specs' HTTP upstream) on a free loopback port;
-- `base` is its URL.
function H.upstream()
  local svc = H.service("lua5.4 spec/servers/upstream.lua 0", function(text)
    return text:match("port (%d+)")
  end, 5)
  svc.base = "http://127.0.0.1:" .. svc.port
  return svc
end

--- A fresh redis-server on a free loopback port, no persistence. `extra`: more arguments.
function H.redis(extra)
  local probe = assert(socket.bind("127.0.0.1", 0))
  local _, port = probe:getsockname()
  probe:close()
  local svc = H.service(string.format("redis-server --port %d --bind 127.0.0.1 --save '' "
    .. "--appendonly no --daemonize no %s", port, extra or ""), function(text)
    if text:find("Ready to accept connections", 1, true) then return port end
  end)
  return svc
end

--- Runs a `moonhttp run` script (source with `http` bound) and returns exit code and output.
function H.run_lua(source, ...)
  local path = H.script("local http = require 'moonhttp'\n" .. source)
  local code, out = H.run({ "run", path, ... })
  os.remove(path)
  return code, out
end

--- Runs `source` (moonhttp already required as `http` unless `prelude` says
-- otherwise) with `moonhttp run` and the given args; fails unless it exits 0.
-- Returns a table of its printed `key value` lines (numbers converted) and
-- the whole output.
function H.run_kv(prelude, source, ...)
  local path = H.script((prelude or "local http = require 'moonhttp'\n") .. source)
  local code, out = H.run({ "run", path, ... })
  os.remove(path)
  if code ~= 0 then error(string.format("moonhttp run exited %s:\n%s", tostring(code), out), 2) end
  local kv = {}
  for k, v in out:gmatch("(%S+)[ \t]([^\n]*)") do kv[k] = tonumber(v) or v end
  return kv, out
end

--- A slow sender (slowloris, a byte-at-a-time client): sends data to connection
--- c in pieces of opts.size bytes (1), opts.gap seconds apart (0.05), until all
--- is sent, a send fails (the peer closed) or opts.limit seconds (none) passed.
--- Returns whether all of data was sent, whether a send failed, and the seconds taken.
function H.trickle(c, data, opts)
  opts = opts or {}
  local size, gap, t0 = opts.size or 1, opts.gap or 0.05, H.now()
  for i = 1, #data, size do
    if not c:send(data:sub(i, i + size - 1)) then return false, true, H.now() - t0 end
    if i + size <= #data then
      socket.sleep(gap)
      if opts.limit and H.now() - t0 > opts.limit then return false, false, H.now() - t0 end
    end
  end
  return true, false, H.now() - t0
end

--- Runs a shell command; returns its combined output and whether it succeeded.
function H.sh(cmd)
  local out = tmpname(".sh")
  local ok = os.execute(cmd .. " >" .. out .. " 2>&1")
  local text = read_file(out) or ""
  os.remove(out)
  return text, ok == true
end

--- Runs a shell command; raises with its output when it fails.
function H.must(cmd)
  local out, ok = H.sh(cmd)
  assert(ok, "failed: " .. cmd .. "\n" .. out)
end

return H
