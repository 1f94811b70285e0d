-- moonhttp.test: test an app through the real binary, from busted (or any
-- Lua 5.4 with luasocket; luasec for TLS listeners). It is not loaded inside
-- the server. `moonhttp test [busted args]` runs busted with this module and
-- the binary it came with, so an app's specs need nothing but the binary.
--
--   local test = require "moonhttp.test"
--   local app = test.start("examples/webapp.lua", { max_body_bytes = "2m" })
--   local status, headers, body = app:get("/", { headers = { Cookie = "a=1" } })
--   app:post("/form", "a=1", { headers = { ["Content-Type"] = "application/x-www-form-urlencoded" } })
--   local ws = app:websocket("/chat")   -- ws:send(s), ws:receive(), ws:close()
--   app:stop()
--
-- The app keeps its own listen list (TLS listeners too) with free ports
-- (the free_ports setting); app.listeners[i] is its i-th listener and a
-- request goes to the first unless it names another ({ listener = i }).
-- TLS client options ({ tls = { ca =, verify =, cert =, key =, server_name = } })
-- are given to test.start for every request, or to one request.
-- settings become command-line flags (max_body_bytes = "2m" -> --max-body-bytes 2m;
-- true/false -> on/off; dev = true -> --dev). The binary is opts.bin, $MOONHTTP_BIN, the one installed
-- beside this file (<prefix>/bin/moonhttp for <prefix>/share/lua/5.4/moonhttp/test.lua)
-- or "moonhttp" on the PATH.
-- headers come back with lowercase names (repeated ones joined with ", ";
-- headers["set-cookie"] is a list). Requests that fail raise with the
-- server's log attached, so a busted failure shows what the server said.
local found, socket = pcall(require, "socket")
if not found then
  error("moonhttp.test needs luasocket (Debian: apt install lua-socket; LuaRocks: luarocks "
    .. "--lua-version 5.4 install luasocket):\n" .. tostring(socket), 0)
end

local M = {}

local App = {}
App.__index = App

-- An unknown option name raises at the caller, as the server's options tables do. This
-- module runs outside the server, so it lists the known names instead of the server's
-- "did you mean" (moonhttp.core is not here).
local function check_opts(opts, what, known)
  for k in pairs(opts or {}) do
    local found = false
    for _, n in ipairs(known) do found = found or n == k end
    if not found then
      error(string.format('%s: unknown option "%s" (known: %s)', what, tostring(k),
        table.concat(known, ", ")), 3)
    end
  end
end

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

-- After `make install` this file and the binary share a prefix: a spec then runs the
-- binary that came with the module, even from a staging root (DESTDIR) off the PATH.
local function installed_bin()
  local prefix = debug.getinfo(1, "S").source:match("^@(.*)/share/lua/5%.4/moonhttp/test%.lua$")
  local f = prefix and io.open(prefix .. "/bin/moonhttp", "rb")
  if not f then return nil end
  f:close()
  return prefix .. "/bin/moonhttp"
end

local TLS_OPTS = { "ca", "verify", "cert", "key", "server_name" }

-- The flags of the settings table: one per setting, in a stable order.
local function flags(settings)
  local names, args = {}, {}
  for k in pairs(settings) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do
    local v = settings[k]
    if k == "dev" then
      if v then args[#args + 1] = "--dev" end
    else
      args[#args + 1] = "--" .. k:gsub("_", "-")
      args[#args + 1] = v == true and "on" or v == false and "off" or tostring(v)
    end
  end
  return args
end

-- The listeners the log names ("listening on https://127.0.0.1:0 (port 41234)"),
-- in the order of the app's listen list, and the metrics port.
local function listeners_of(text)
  local list = {}
  for scheme, addr, port in text:gmatch("listening on (%a+)://(%S+) %(port (%d+)%)") do
    local host = addr:match("^%[(.*)%]:%d+$") or addr:match("^(.*):%d+$") or ""
    if host == "" or host == "*" or host == "0.0.0.0" then host = "127.0.0.1" end
    if host == "::" then host = "::1" end
    port = tonumber(port)
    local hostport = (host:find(":", 1, true) and "[" .. host .. "]" or host) .. ":" .. port
    list[#list + 1] = { tls = scheme == "https", host = host, port = port, hostport = hostport,
                        url = scheme .. "://" .. hostport }
  end
  return list, tonumber(text:match("metrics on %S+ %(port (%d+)%)"))
end

--- test.start(script [, settings [, { bin =, tls = }]]) -> app
function M.start(script, settings, opts)
  opts = opts or {}
  check_opts(opts, "test.start", { "bin", "tls" })
  check_opts(opts.tls, "test.start's tls", TLS_OPTS)
  local bin = opts.bin or os.getenv("MOONHTTP_BIN") or installed_bin() or "moonhttp"
  local all = { workers = 1, free_ports = true }
  for k, v in pairs(settings or {}) do all[k] = v end
  local log = os.tmpname()
  local cmd = quote(bin)
  for _, a in ipairs(flags(all)) do cmd = cmd .. " " .. quote(a) end
  cmd = cmd .. " " .. quote(script)
  local pipe = assert(io.popen("sh -c " .. quote(cmd .. " >" .. log .. " 2>&1 </dev/null & echo $!"), "r"))
  local pid = tonumber(pipe:read("l"))
  pipe:close()
  local self = setmetatable({ pid = pid, log = log, script = script, tls = opts.tls }, App)
  local deadline = socket.gettime() + 10
  local seen = 0
  while socket.gettime() < deadline do
    -- The server writes its listeners' lines one after another: the list is
    -- whole once a look 50 ms later finds no more.
    local list, metrics = listeners_of(slurp(self.log))
    if #list > 0 and #list == seen then
      self.listeners, self.port, self.metrics_port = list, list[1].port, metrics
      return self
    end
    seen = #list
    if not self:alive() then break end
    socket.sleep(#list > 0 and 0.05 or 0.02)
  end
  local text = slurp(log)
  self:stop()
  error("moonhttp.test: " .. script .. " did not start:\n" .. text, 2)
end

function App:alive()
  return os.execute("kill -0 " .. self.pid .. " 2>/dev/null") == true
end

--- The server's log so far.
function App:logtext() return self.final_log or slurp(self.log) end

function App:fail(msg, level)
  error("moonhttp.test: " .. msg .. "\n--- server log (" .. self.script .. ") ---\n" .. self:logtext(), level or 3)
end

-- Reads one response; returns status, headers, body.
local function read_response(app, s)
  local function line()
    local l, err = s:receive("*l")
    if not l then app:fail("reading the response: " .. tostring(err), 5) end
    return l
  end
  local status = tonumber(line():match("^HTTP/1%.%d (%d%d%d)"))
  if not status then app:fail("bad status line", 4) end
  local headers = {}
  while true do
    local l = line()
    if l == "" then break end
    local k, v = l:match("^([^:]+):%s*(.-)%s*$")
    k = k:lower()
    if k == "set-cookie" then
      headers[k] = headers[k] or {}
      table.insert(headers[k], v)
    else
      headers[k] = headers[k] and headers[k] .. ", " .. v or v
    end
  end
  local body = ""
  if (headers["transfer-encoding"] or ""):lower():find("chunked") then
    local parts = {}
    while true do
      local size = tonumber(line():match("^%x+"), 16)
      if size == 0 then repeat until line() == "" break end
      parts[#parts + 1] = s:receive(size)
      line()
    end
    body = table.concat(parts)
  elseif headers["content-length"] then
    body = s:receive(tonumber(headers["content-length"])) or ""
  elseif status >= 200 and status ~= 204 and status ~= 304 then
    body = s:receive("*a") or ""
  end
  return status, headers, body
end

-- A connection to the listener opts.listener names (the first by default),
-- through TLS when it is an https one, and the Host header it answers to.
function App:connect(opts, level)
  local l = self.listeners[opts.listener or 1]
  if not l then self:fail("no listener " .. tostring(opts.listener) .. " (the app has " .. #self.listeners .. ")", level) end
  local s = socket.tcp()
  s:settimeout(opts.timeout or 10)
  local ok, err = s:connect(l.host, l.port)
  if not ok then self:fail("connect to " .. l.url .. ": " .. tostring(err), level) end
  if not l.tls then return s, l.hostport end
  local tls = opts.tls or self.tls or {}
  local has_ssl, ssl = pcall(require, "ssl")
  if not has_ssl then
    self:fail("a TLS listener needs luasec (Debian: apt install lua-sec; LuaRocks: luarocks "
      .. "--lua-version 5.4 install luasec)", level)
  end
  local verify = tls.verify
  if verify == nil then verify = tls.ca ~= nil end
  local c, werr = ssl.wrap(s, { mode = "client", protocol = "any", options = "all",
    verify = verify and "peer" or "none", cafile = tls.ca, certificate = tls.cert, key = tls.key })
  if not c then self:fail("TLS options: " .. tostring(werr), level) end
  if tls.server_name then c:sni(tls.server_name) end
  ok, err = c:dohandshake()
  if not ok then self:fail("TLS handshake with " .. l.url .. ": " .. tostring(err), level) end
  return c, tls.server_name and (tls.server_name .. ":" .. l.port) or l.hostport
end

-- The request head's lines: the request line, Host unless headers give one, the headers.
local function head(first, host, headers, extra)
  local lines, has_host = { first }, false
  for k in pairs(headers or {}) do has_host = has_host or k:lower() == "host" end
  if not has_host then lines[2] = "Host: " .. host end
  for _, l in ipairs(extra) do lines[#lines + 1] = l end
  for k, v in pairs(headers or {}) do lines[#lines + 1] = k .. ": " .. v end
  return lines
end

local REQUEST_OPTS = { "headers", "timeout", "listener", "tls" }

--- app:request(method, path, body, { headers =, timeout =, listener =, tls = }) -> status, headers, body
function App:request(method, path, body, opts)
  opts = opts or {}
  check_opts(opts, "app:request", REQUEST_OPTS)
  check_opts(opts.tls, "app:request's tls", TLS_OPTS)
  local s, host = self:connect(opts, 4)
  local lines = head(method .. " " .. path .. " HTTP/1.1", host, opts.headers, { "Connection: close" })
  if body then lines[#lines + 1] = "Content-Length: " .. #body end
  assert(s:send(table.concat(lines, "\r\n") .. "\r\n\r\n" .. (body or "")))
  local status, headers, rbody = read_response(self, s)
  s:close()
  return status, headers, rbody
end

function App:get(path, opts) return self:request("GET", path, nil, opts) end
function App:post(path, body, opts) return self:request("POST", path, body or "", opts) end

-- WebSocket client -------------------------------------------------------------

local WS = {}
WS.__index = WS

local function ws_key()
  local b = {}
  for i = 1, 16 do b[i] = string.char(math.random(0, 255)) end
  local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  local raw, out = table.concat(b) .. "\0\0", {}
  for i = 1, 16, 3 do
    local n = raw:byte(i) << 16 | raw:byte(i + 1) << 8 | raw:byte(i + 2)
    for j = 18, 0, -6 do
      local k = (n >> j & 63) + 1
      out[#out + 1] = alphabet:sub(k, k)
    end
  end
  return table.concat(out):sub(1, 22) .. "=="
end

-- A client frame (always masked, as RFC 6455 requires of clients).
local function ws_frame(op, payload)
  local len, hdr = #payload, nil
  if len < 126 then hdr = string.char(0x80 | op, 0x80 | len)
  elseif len < 65536 then hdr = string.char(0x80 | op, 0x80 | 126) .. string.pack(">I2", len)
  else hdr = string.char(0x80 | op, 0x80 | 127) .. string.pack(">I8", len) end
  local key = { math.random(0, 255), math.random(0, 255), math.random(0, 255), math.random(0, 255) }
  local out = {}
  for i = 1, len do out[i] = string.char(payload:byte(i) ~ key[(i - 1) % 4 + 1]) end
  return hdr .. string.char(table.unpack(key)) .. table.concat(out)
end

--- app:websocket(path, { headers =, protocols = { ... }, listener =, tls = }) -> ws, headers; or
--- nil, status, headers, body when the server did not switch (101).
--- ws:send(data [, "binary"]), ws:receive() -> data, "text" | "binary" or
--- nil, "closed", code, reason (pings are answered inside), ws:close([code, reason]).
function App:websocket(path, opts)
  opts = opts or {}
  check_opts(opts, "app:websocket", { "headers", "protocols", "timeout", "listener", "tls" })
  check_opts(opts.tls, "app:websocket's tls", TLS_OPTS)
  local s, host = self:connect(opts, 4)
  local extra = { "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                  "Sec-WebSocket-Key: " .. ws_key() }
  if opts.protocols then extra[#extra + 1] = "Sec-WebSocket-Protocol: " .. table.concat(opts.protocols, ", ") end
  local lines = head("GET " .. path .. " HTTP/1.1", host, opts.headers, extra)
  assert(s:send(table.concat(lines, "\r\n") .. "\r\n\r\n"))
  local status, headers, body = read_response(self, s)
  if status ~= 101 then
    s:close()
    return nil, status, headers, body
  end
  return setmetatable({ sock = s, app = self, protocol = headers["sec-websocket-protocol"] }, WS), headers
end

function WS:send(data, kind)
  local ok = self.sock:send(ws_frame(kind == "binary" and 2 or 1, data))
  if not ok then return nil, "closed" end
  return true
end

function WS:_frame()
  local h = self.sock:receive(2)
  if not h then return nil end
  local b1, b2 = h:byte(1, 2)
  local len = b2 & 0x7f
  if len == 126 then len = string.unpack(">I2", self.sock:receive(2))
  elseif len == 127 then len = string.unpack(">I8", self.sock:receive(8)) end
  local payload = len > 0 and self.sock:receive(len) or ""
  if not payload then return nil end
  return b1 & 0x80 ~= 0, b1 & 0x0f, payload
end

function WS:receive()
  local parts, kind = {}, nil
  while true do
    local fin, op, payload = self:_frame()
    if not fin and not op then return nil, "closed", 1006, "" end
    if op == 8 then
      local code = #payload >= 2 and string.unpack(">I2", payload) or 1005
      if not self.closing then self.sock:send(ws_frame(8, payload:sub(1, 2))) end
      self.sock:close()
      return nil, "closed", code, payload:sub(3)
    elseif op == 9 then
      self.sock:send(ws_frame(10, payload))
    elseif op ~= 10 then
      if op ~= 0 then kind = op == 2 and "binary" or "text" end
      parts[#parts + 1] = payload
      if fin then return table.concat(parts), kind end
    end
  end
end

function WS:close(code, reason)
  self.closing = true
  self.sock:send(ws_frame(8, string.pack(">I2", code or 1000) .. (reason or "")))
  local _, _, c, r = self:receive()
  return c, r
end

--- Stops the server (SIGTERM, then SIGKILL after 10 s) and removes its log
--- file (app:logtext() still answers); returns true once it is gone.
function App:stop()
  if self.stopped then return true end
  self.stopped = true
  os.execute("kill -TERM " .. self.pid .. " 2>/dev/null")
  local deadline = socket.gettime() + 10
  while self:alive() and socket.gettime() < deadline do socket.sleep(0.02) end
  if self:alive() then os.execute("kill -KILL " .. self.pid .. " 2>/dev/null") end
  self.final_log = self:logtext()
  os.remove(self.log)
  return true
end

return M
