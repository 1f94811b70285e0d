-- http.websocket(url [, opts]): a WebSocket client (RFC 6455) over a
-- full-duplex http.tcp() socket, with the API of the server side's `ws`:
-- ws:receive(), ws:send(data [, kind]), ws:ping([data]), ws:close([code
-- [, reason]]), ws.protocol, ws.state, and the same answers (data, kind; or
-- nil, "closed", code, reason).
--
-- Why Lua over the socket rather than http/ws.c: that session is written
-- against the server's request (its output queue, its body reader); a
-- client has a socket instead. Framing here is small, and masking (the one
-- per-byte loop) is in C (core.ws_mask).
--
-- Control frames are handled inside receive (pings answered, the close
-- handshake echoed), as the peer's frames are read: a client that never
-- receives never answers a ping. One task receives at a time; any number of
-- tasks may send (a frame being written is never interleaved with another:
-- frames queue behind the one on the wire).
local core = require "moonhttp.core"
local crypto = require "moonhttp.crypto"

local M = {}

local GUID_KEY_BYTES = 16
local TEXT, BINARY, CLOSE, PING, PONG, CONT = 1, 2, 8, 9, 10, 0

local Ws = {}
local methods = {}

local WHAT = "http.websocket"
local KNOWN = { "headers", "protocols", "timeout", "max_message", "max_frame", "ping_interval",
  "idle_timeout", "close_timeout", "tls", "origin" }

-- One frame, masked (5.3: every client frame is).
local function frame(opcode, payload, fin)
  local n = #payload
  local b1 = (fin == false and 0 or 0x80) | opcode
  local head
  if n < 126 then
    head = string.pack(">BB", b1, 0x80 | n)
  elseif n < 65536 then
    head = string.pack(">BBI2", b1, 0x80 | 126, n)
  else
    head = string.pack(">BBI8", b1, 0x80 | 127, n)
  end
  local key = crypto.crypto.random(4)
  return head .. key .. core.ws_mask(payload, key)
end

-- Writes bytes in order whatever the number of sending tasks: one writes,
-- the others queue behind it (the socket has one write side).
local function write(self, bytes)
  if self._writing then
    self._queue[#self._queue + 1] = bytes
    return true
  end
  self._writing = true
  local ok, err = self._sock:send(bytes)
  while ok and #self._queue > 0 do
    ok, err = self._sock:send(table.remove(self._queue, 1))
  end
  self._queue = {}
  self._writing = false
  return ok, err
end

local function closed(self)
  return nil, "closed", self._code or 1006, self._reason or ""
end

local function set_closed(self, code, reason)
  self._state = "closed"
  self._code, self._reason = code, reason
  self._sock:close()
end

-- _Fail the WebSocket Connection_ (7.1.7): our close frame says why, then the socket closes.
local function fail(self, code, why)
  if self._state == "open" then
    write(self, frame(CLOSE, string.pack(">I2", code) .. why))
  end
  set_closed(self, code, why)
  return closed(self)
end

-- Exactly n bytes, or nil, err. A read timeout is the idle check: a ping
-- after ping_interval of silence, "timeout" after idle_timeout.
local function need(self, n)
  local got = ""
  while true do
    local data, err, partial = self._sock:receive(n - #got)
    if data then
      self._seen = core.now()
      return got .. data
    end
    got = got .. (partial or "")
    if #got > 0 then self._seen = core.now() end
    if err ~= "timeout" then return nil, err end
    local silent = core.now() - self._seen
    if self._idle > 0 and silent >= self._idle - 0.001 then return nil, "timeout" end
    if self._ping > 0 and not self._pinged and silent >= self._ping - 0.001 then
      self._pinged = true
      write(self, frame(PING, ""))
    end
  end
end

-- The next frame: fin, opcode, payload; or nil, close code, why.
local function read_frame(self)
  local h, err = need(self, 2)
  if not h then return nil, err == "timeout" and 1001 or 1006, err end
  local b1, b2 = h:byte(1, 2)
  local fin, op, len = b1 & 0x80 ~= 0, b1 & 0x0f, b2 & 0x7f
  if b1 & 0x70 ~= 0 then return nil, 1002, "reserved bits set" end
  if b2 & 0x80 ~= 0 then return nil, 1002, "masked frame from a server" end
  if op >= CLOSE and (len > 125 or not fin) then return nil, 1002, "bad control frame" end
  if (op > BINARY and op < CLOSE) or op > PONG then return nil, 1002, "unknown opcode" end
  if len >= 126 then
    local ext = need(self, len == 126 and 2 or 8)
    if not ext then return nil, 1006, "connection closed" end
    len = string.unpack(len == 126 and ">I2" or ">I8", ext)
    if len < 0 then return nil, 1009, "frame too large" end
  end
  if len > self._max_frame then return nil, 1009, "frame too large" end
  local payload = ""
  if len > 0 then
    payload, err = need(self, len)
    if not payload then return nil, err == "timeout" and 1001 or 1006, err end
  end
  self._pinged = false
  return fin, op, payload
end

local function valid_close_code(c)
  return (c >= 1000 and c <= 1003) or (c >= 1007 and c <= 1014) or (c >= 3000 and c <= 4999)
end

local function on_close(self, payload)
  local code, reason = 1005, ""
  if #payload == 1 then return fail(self, 1002, "close frame with a one-byte payload") end
  if #payload >= 2 then
    code, reason = string.unpack(">I2", payload), payload:sub(3)
    if not valid_close_code(code) then return fail(self, 1002, "invalid close code") end
    if not utf8.len(reason) then return fail(self, 1007, "close reason is not UTF-8") end
  end
  if self._state == "open" then
    write(self, frame(CLOSE, code == 1005 and "" or string.pack(">I2", code)))
  end
  set_closed(self, code, reason)
  return closed(self)
end

-- ws:receive() -> data, "text" | "binary"; or nil, "closed", code, reason
function methods.receive(self)
  if self._receiving then
    error("ws:receive: another task is already receiving on this WebSocket", 2)
  end
  self._receiving = true
  local parts, kind, size = {}, nil, 0
  local a, b, c, d
  while true do
    if self._state == "closed" then a, b, c, d = closed(self) break end
    local fin, op, payload = read_frame(self) -- or nil, close code, why
    if fin == nil then
      if op == 1006 then
        set_closed(self, 1006, "connection closed")
        a, b, c, d = closed(self)
      else
        a, b, c, d = fail(self, op, op == 1001 and "idle timeout" or payload)
      end
      break
    end
    if op == PING then
      if self._state == "open" then write(self, frame(PONG, payload)) end
    elseif op == PONG then -- luacheck: ignore
    elseif op == CLOSE then
      a, b, c, d = on_close(self, payload)
      break
    else
      if op == CONT and not kind then a, b, c, d = fail(self, 1002, "continuation frame without a message") break end
      if op ~= CONT and kind then a, b, c, d = fail(self, 1002, "new message inside a fragmented one") break end
      if op ~= CONT then kind = op == TEXT and "text" or "binary" end
      size = size + #payload
      if size > self._max_message then a, b, c, d = fail(self, 1009, "message too large") break end
      parts[#parts + 1] = payload
      if fin and self._state == "open" then
        local data = table.concat(parts)
        if kind == "text" and not utf8.len(data) then
          a, b, c, d = fail(self, 1007, "text message is not UTF-8")
          break
        end
        a, b = data, kind
        break
      elseif fin then
        parts, kind, size = {}, nil, 0 -- data after our close is discarded (5.5.1)
      end
    end
  end
  self._receiving = false
  if a then return a, b end
  return a, b, c, d
end

local function send_frame(self, op, data)
  if self._state ~= "open" then return closed(self) end
  local ok = write(self, frame(op, data))
  if not ok then
    set_closed(self, 1006, "connection closed")
    return closed(self)
  end
  return true
end

-- ws:send(data [, "text" | "binary"]) -> true; or nil, "closed"
function methods.send(self, data, kind)
  if type(data) ~= "string" then error("ws:send: data must be a string", 2) end
  kind = kind or "text"
  if kind ~= "text" and kind ~= "binary" then
    error("ws:send: kind must be \"text\" or \"binary\"", 2)
  end
  if kind == "text" and not utf8.len(data) then
    error("ws:send: text must be valid UTF-8 (send it as \"binary\")", 2)
  end
  return send_frame(self, kind == "text" and TEXT or BINARY, data)
end

-- ws:ping([data]) -> true; or nil, "closed". The pong is read (and dropped) by receive.
function methods.ping(self, data)
  data = data or ""
  if type(data) ~= "string" or #data > 125 then
    error("ws:ping: a ping carries at most 125 bytes", 2)
  end
  return send_frame(self, PING, data)
end

-- ws:close([code [, reason]]) -> true: starts the closing handshake (receive then ends).
function methods.close(self, code, reason)
  code, reason = code or 1000, reason or ""
  if math.type(code) ~= "integer" or not (code == 1000 or code == 1001 or code == 1008
      or code == 1011 or (code >= 3000 and code <= 4999)) then
    error("ws:close: close code must be 1000, 1001, 1008, 1011 or 3000..4999", 2)
  end
  if type(reason) ~= "string" or #reason > 123 or not utf8.len(reason) then
    error("ws:close: a close reason is UTF-8 of at most 123 bytes", 2)
  end
  if self._state == "open" then
    self._state = "closing"
    self._code, self._reason = code, reason
    write(self, frame(CLOSE, string.pack(">I2", code) .. reason))
    -- the peer's close frame ends it; after close_timeout the socket closes anyway
    self._sock:settimeouts(nil, nil, self._close_timeout)
    self._ping, self._idle = 0, self._close_timeout
  end
  return true
end

Ws.__index = function(self, k)
  if k == "state" then return rawget(self, "_state") end
  if k == "protocol" then return rawget(self, "_protocol") end
  return methods[k]
end
Ws.__tostring = function(self) return "moonhttp.WebSocket client (" .. self._state .. ")" end
Ws.__close = function(self) if self._state ~= "closed" then set_closed(self, 1000, "") end end

-- "ws://host:port/path?q" -> tls, host, port, target
local function parse_url(url)
  local scheme, authority, target = url:match("^(wss?)://([^/?#]+)([^#]*)")
  if not scheme then return nil end
  local host, port = authority:match("^%[([^%]]+)%]:?(%d*)$")
  if not host then host, port = authority:match("^([^:]+):?(%d*)$") end
  if not host then return nil end
  port = tonumber(port) or (scheme == "wss" and 443 or 80)
  if port < 1 or port > 65535 then return nil end
  if target == "" then target = "/" end
  if target:sub(1, 1) == "?" then target = "/" .. target end
  return scheme == "wss", host, port, target, authority
end

local function header_has(value, token)
  for t in (value or ""):gmatch("[^,%s]+") do
    if t:lower() == token then return true end
  end
  return false
end

-- Reads the answer's head: status, headers (lowercase names), or nil, err.
local function read_head(sock)
  local line, err = sock:receive("l")
  if not line then return nil, err end
  local status = tonumber(line:match("^HTTP/1%.1 (%d%d%d)"))
  if not status then return nil, "bad status line" end
  local headers = {}
  while true do
    line, err = sock:receive("l")
    if not line then return nil, err end
    if line == "" then break end
    local name, value = line:match("^([^:]+):%s*(.-)%s*$")
    if not name then return nil, "bad header line" end
    name = name:lower()
    headers[name] = headers[name] and (headers[name] .. ", " .. value) or value
  end
  return status, headers
end

--- http.websocket(url [, opts]) -> ws; or nil, err [, detail]
function M.connect(url, opts)
  if type(url) ~= "string" then error("http.websocket: url must be a string", 2) end
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then error("http.websocket: opts must be a table", 2) end
  core.check_opts(opts, WHAT, KNOWN, 2)
  local tls, host, port, target, authority = parse_url(url)
  if tls == nil then error("http.websocket: url must be ws://host[:port]/path or wss://...", 2) end
  local timeout = core.opt_seconds(opts, "timeout", 10, WHAT)
  local self = setmetatable({
    _state = "connecting",
    _queue = {},
    _max_message = core.opt_size(opts, "max_message", 1024 * 1024, WHAT),
    _ping = core.opt_seconds(opts, "ping_interval", 30, WHAT),
    _idle = core.opt_seconds(opts, "idle_timeout", 60, WHAT),
    _close_timeout = core.opt_seconds(opts, "close_timeout", 5, WHAT),
  }, Ws)
  self._max_frame = core.opt_size(opts, "max_frame", self._max_message, WHAT)
  local protocols = opts.protocols
  if protocols ~= nil and type(protocols) ~= "table" then
    error("http.websocket: protocols must be a list of strings", 2)
  end
  local extra = {}
  for name, value in pairs(opts.headers or {}) do
    if type(name) ~= "string" or type(value) ~= "string" or name:find("[%c:]") or value:find("[\r\n%z]") then
      error("http.websocket: headers must map names to values without CR, LF or NUL", 2)
    end
    extra[#extra + 1] = name .. ": " .. value .. "\r\n"
  end
  local sock = core.tcp()
  self._sock = sock
  sock:settimeouts(timeout, timeout, timeout)
  local copts
  if tls then copts = { tls = opts.tls == nil and true or opts.tls } end
  local ok, err = sock:connect(host, port, copts)
  if not ok then return nil, err end
  sock:setdeadline(timeout) -- the handshake's answer within the same bound
  local key = crypto.base64.encode(crypto.crypto.random(GUID_KEY_BYTES))
  local req = { "GET ", target, " HTTP/1.1\r\nHost: ", authority,
    "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ", key,
    "\r\nSec-WebSocket-Version: 13\r\n" }
  if protocols and #protocols > 0 then
    for _, p in ipairs(protocols) do
      if type(p) ~= "string" or not p:match("^[%w!#$%%&'*+.^_`|~-]+$") then
        sock:close()
        error("http.websocket: protocols must be tokens", 2)
      end
    end
    req[#req + 1] = "Sec-WebSocket-Protocol: " .. table.concat(protocols, ", ") .. "\r\n"
  end
  if opts.origin then req[#req + 1] = "Origin: " .. tostring(opts.origin) .. "\r\n" end
  req[#req + 1] = table.concat(extra)
  req[#req + 1] = "\r\n"
  ok, err = sock:send(req)
  if not ok then sock:close() return nil, err end
  local status, headers = read_head(sock)
  if not status then sock:close() return nil, headers end
  if status ~= 101 then sock:close() return nil, "bad status", status end
  if not header_has(headers.upgrade, "websocket") or not header_has(headers.connection, "upgrade") then
    sock:close()
    return nil, "bad handshake", "no Upgrade: websocket"
  end
  if headers["sec-websocket-accept"] ~= core.ws_accept(key) then
    sock:close()
    return nil, "bad handshake", "wrong Sec-WebSocket-Accept"
  end
  local chosen = headers["sec-websocket-protocol"]
  if chosen then
    local offered = false
    for _, p in ipairs(protocols or {}) do offered = offered or p == chosen end
    if not offered then sock:close() return nil, "bad handshake", "unoffered subprotocol" end
  end
  sock:setdeadline(0)
  -- receive's reads wake every ping_interval (or idle_timeout) to check on silence
  local tick = self._ping > 0 and self._ping or self._idle
  if self._idle > 0 and self._idle < tick then tick = self._idle end
  sock:settimeouts(nil, 0, tick)
  self._protocol = chosen
  self._state = "open"
  self._seen = core.now()
  return self
end

return M
