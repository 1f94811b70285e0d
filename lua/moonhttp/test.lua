-- moonhttp.test: test an app through the real binary, from busted (or any
-- Lua 5.4 with luasocket). It is not loaded inside the server.
--
--   local test = require "moonhttp.test"
--   local app = test.start("examples/webapp.lua", { max_body_bytes = "2m" })
--   local status, headers, body = app:get("/", { headers = { Cookie = "a=1" } })
--   app:post("/form", "a=1", { headers = { ["Content-Type"] = "application/x-www-form-urlencoded" } })
--   local ws = app:websocket("/chat")   -- ws:send(s), ws:receive(), ws:close()
--   app:stop()
--
-- settings become command-line flags (max_body_bytes = "2m" -> --max-body-bytes 2m;
-- true -> a bare flag). The binary is opts.bin, $MOONHTTP_BIN, the one installed
-- beside this file (<prefix>/bin/moonhttp for <prefix>/share/lua/5.4/moonhttp/test.lua)
-- or "moonhttp" on the PATH.
-- headers come back with lowercase names (repeated ones joined with ", ";
-- headers["set-cookie"] is a list). Requests that fail raise with the
-- server's log attached, so a busted failure shows what the server said.
local socket = require "socket"

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

function M.start(script, settings, opts)
  opts = opts or {}
  check_opts(opts, "test.start", { "bin" })
  local bin = opts.bin or os.getenv("MOONHTTP_BIN") or installed_bin() or "moonhttp"
  local args = { "--listen", "127.0.0.1:0", "--workers", "1" }
  for k, v in pairs(settings or {}) do
    local flag = "--" .. k:gsub("_", "-")
    if v == true then args[#args + 1] = flag
    elseif v ~= false then args[#args + 1] = flag; args[#args + 1] = tostring(v) end
  end
  local log = os.tmpname()
  local cmd = quote(bin)
  for _, a in ipairs(args) do cmd = cmd .. " " .. quote(a) end
  cmd = cmd .. " " .. quote(script)
  local pipe = assert(io.popen("sh -c " .. quote(cmd .. " >" .. log .. " 2>&1 </dev/null & echo $!"), "r"))
  local pid = tonumber(pipe:read("l"))
  pipe:close()
  local self = setmetatable({ pid = pid, log = log, script = script }, App)
  local deadline = socket.gettime() + 10
  while socket.gettime() < deadline do
    local port = slurp(log):match("listening on [^\n]* %(port (%d+)%)")
    if port then self.port = tonumber(port); return self end
    if not self:alive() then break end
    socket.sleep(0.02)
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

--- app:request(method, path, body, { headers = {} }) -> status, headers, body
function App:request(method, path, body, opts)
  check_opts(opts, "app:request", { "headers", "timeout" })
  local s = socket.tcp()
  s:settimeout(opts and opts.timeout or 10)
  local ok, err = s:connect("127.0.0.1", self.port)
  if not ok then self:fail("connect: " .. tostring(err)) end
  local lines = { method .. " " .. path .. " HTTP/1.1", "Host: 127.0.0.1:" .. self.port, "Connection: close" }
  for k, v in pairs(opts and opts.headers or {}) do lines[#lines + 1] = k .. ": " .. v end
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

--- app:websocket(path, { headers =, protocols = { ... } }) -> ws, headers; or
--- nil, status, headers, body when the server did not switch (101).
--- ws:send(data [, "binary"]), ws:receive() -> data, "text" | "binary" or
--- nil, "closed", code, reason (pings are answered inside), ws:close([code, reason]).
function App:websocket(path, opts)
  opts = opts or {}
  check_opts(opts, "app:websocket", { "headers", "protocols", "timeout" })
  local s = socket.tcp()
  s:settimeout(opts.timeout or 10)
  local ok, err = s:connect("127.0.0.1", self.port)
  if not ok then self:fail("connect: " .. tostring(err)) end
  local lines = { "GET " .. path .. " HTTP/1.1", "Host: 127.0.0.1:" .. self.port,
                  "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Version: 13",
                  "Sec-WebSocket-Key: " .. ws_key() }
  if opts.protocols then lines[#lines + 1] = "Sec-WebSocket-Protocol: " .. table.concat(opts.protocols, ", ") end
  for k, v in pairs(opts.headers or {}) do lines[#lines + 1] = k .. ": " .. v end
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
