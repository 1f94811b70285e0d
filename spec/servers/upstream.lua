-- A scriptable HTTP/1.x test upstream for the client specs and the client
-- benchmark: one process, non-blocking sockets, select(). It counts the
-- connections it accepts (GET /_count answers how many since /_reset, not
-- counting the /_count connection itself) and serves endpoints that each
-- exercise one client path. Usage: lua5.4 upstream.lua [port]; prints
-- "port N" once listening.
local socket = require "socket"

local srv = assert(socket.bind("127.0.0.1", tonumber(arg[1]) or 0))
srv:settimeout(0)
local _, port = srv:getsockname()
io.stdout:write("port ", port, "\n")
io.stdout:flush()

local conns, count = {}, 0
local now = socket.gettime

local SMALL = '{"name":"moonhttp","items":[' .. string.rep('"abcdefgh",', 16) .. '"end"]}\n'
local BIG = string.rep("x", 1024 * 1024)

local function head(status, headers, proto)
  local t = { (proto or "HTTP/1.1") .. " " .. status }
  for _, h in ipairs(headers) do t[#t + 1] = h end
  return table.concat(t, "\r\n") .. "\r\n\r\n"
end

local function cl(body, extra)
  local h = { "Content-Type: text/plain", "Content-Length: " .. #body }
  for _, x in ipairs(extra or {}) do h[#h + 1] = x end
  return h
end

-- Each handler returns a list of steps: strings to send, numbers (seconds to
-- pause before the next step), or false (close the connection).
local routes = {}
routes["/small"] = function() return { head("200 OK", cl(SMALL, { "Content-Type: application/json" })) .. SMALL } end
routes["/chunked"] = function()
  local body = SMALL
  return { head("200 OK", { "Transfer-Encoding: chunked" }) .. string.format("%x\r\n%s\r\n", #body, body),
    0, "0\r\n\r\n" }
end
routes["/big"] = function() return { head("200 OK", cl(BIG)) .. BIG } end
routes["/close"] = function() return { head("200 OK", cl(SMALL, { "Connection: close" })) .. SMALL, false } end
routes["/slow"] = function()
  local body = string.rep("s", 1000)
  return { head("200 OK", cl(body)) .. body:sub(1, 500), 0.2, body:sub(501) }
end
-- the rest of the body half a second later: a client that closes at once has
-- the rest to drain (with 5 ms, a loaded machine's client had it all already)
routes["/medium"] = function()
  local body = string.rep("m", 100 * 1024)
  return { head("200 OK", cl(body)) .. body:sub(1, 1000), 0.5, body:sub(1001) }
end
-- a complete keep-alive answer, then the server closes the connection anyway
routes["/thenclose"] = function() return { head("200 OK", cl(SMALL)) .. SMALL, 0.1, false } end
routes["/http10"] = function() return { head("200 OK", cl("old"), "HTTP/1.0") .. "old", false } end
routes["/http10ka"] = function()
  return { head("200 OK", cl("old", { "Connection: keep-alive" }), "HTTP/1.0") .. "old" }
end
routes["/eof"] = function() return { head("200 OK", {}) .. "until close", false } end
routes["/head"] = function() return { head("200 OK", { "Content-Length: 1234" }) } end
routes["/hang"] = function() return { 60 } end
routes["/hangbody"] = function() return { head("200 OK", cl("0123456789")) .. "01234", 60 } end
routes["/badstatus"] = function() return { "HTTP/1.1 abc OK\r\n\r\n", false } end
routes["/badchunk"] = function() return { head("200 OK", { "Transfer-Encoding: chunked" }) .. "zz\r\nhello\r\n", false } end
routes["/bighead"] = function()
  return { head("200 OK", { "X-Big: " .. string.rep("h", 100 * 1024), "Content-Length: 0" }), false }
end
routes["/reset"] = function() return { head("200 OK", cl(string.rep("r", 1000))) .. "rrrr", false } end
-- "rst" aborts the connection (SO_LINGER 0: the peer sees ECONNRESET, not an end).
routes["/rst"] = function() return { head("200 OK", cl(string.rep("r", 1000))) .. "rrrr", 0.05, "rst" } end
routes["/rsthead"] = function() return { 0.05, "rst" } end
routes["/drop"] = function() return { false } end
-- a chunked body that ends with a close after its first chunk: no last chunk
routes["/chunkcut"] = function()
  return { head("200 OK", { "Transfer-Encoding: chunked" }) .. "5\r\nhello\r\n", 0.05, false }
end
-- 20 body bytes, one every 0.1 s: slow, never stalled.
routes["/drip"] = function()
  local steps = { head("200 OK", cl(string.rep("d", 20))) }
  for _ = 1, 20 do steps[#steps + 1] = 0.1; steps[#steps + 1] = "d" end
  return steps
end
-- two interim responses (RFC 9110 §15.2) before the final one, which is chunked with a trailer
routes["/interim"] = function()
  return { "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
    .. head("200 OK", { "Transfer-Encoding: chunked", "Trailer: X-Sum", "X-Case-Test: Mixed" })
    .. "5\r\nhello\r\n", 0.05, "0\r\nX-Sum: 42\r\n\r\n" }
end
-- hop-by-hop headers in a response, one named by Connection
routes["/hop"] = function()
  return { head("200 OK", cl("ok", { "Connection: X-Hop", "X-Hop: 1", "Keep-Alive: timeout=5",
    "X-Resp-Case: Yes", "Set-Cookie: a=1", "Set-Cookie: b=2" })) .. "ok" }
end
routes["/multi"] = function()
  return { head("200 OK", cl("m", { "Set-Cookie: a=1", "Set-Cookie: b=2", "X-Mixed-Case: Yes" })) .. "m" }
end

local function route(method, path, headers, body, c)
  if path == "/drop-next" then
    c.drop_next = true
    return { head("200 OK", cl("ok")) .. "ok" }
  elseif c.drop_next then
    return { false }
  elseif path == "/close-idle" then
    return { head("200 OK", cl("ok")) .. "ok", 0.05, false }
  elseif path:match("^/rst%-idle%?mark=") then
    -- a keep-alive answer, then the idle connection is reset; the file named
    -- by mark is created once the reset is out
    c.mark = path:match("=(.+)$")
    return { head("200 OK", cl("ok")) .. "ok", 0.05, "rst" }
  elseif path == "/_count" then
    local b = tostring(count - 1)
    return { head("200 OK", cl(b, { "Connection: close" })) .. b, false }
  elseif path == "/_reset" then
    count = 0
    return { head("200 OK", cl("ok", { "Connection: close" })) .. "ok", false }
  elseif path == "/echo" then
    local b = method .. " " .. (headers["x-test"] or "-") .. " " .. body
    return { head("200 OK", cl(b)) .. b }
  end
  local n = path:match("^/redirect/(%d+)$")
  if n then
    n = tonumber(n)
    if n == 0 then return { head("200 OK", cl(method)) .. method } end
    return { head("302 Found", { "Location: /redirect/" .. (n - 1), "Content-Length: 3" }) .. "go\n" }
  end
  if path == "/see-other" then
    return { head("303 See Other", { "Location: /echo", "Content-Length: 0" }) }
  end
  local h = routes[path]
  if h then return h() end
  return { head("404 Not Found", cl("no")) .. "no" }
end

local function accept()
  while true do
    local s = srv:accept()
    if not s then return end
    s:settimeout(0)
    s:setoption("tcp-nodelay", true)
    count = count + 1
    conns[s] = { inbuf = "", steps = {}, at = 0 }
  end
end

local function parse(c)
  if #c.steps > 0 then return end -- one response at a time
  local e = c.inbuf:find("\r\n\r\n", 1, true)
  if not e then return end
  local headtext = c.inbuf:sub(1, e - 1)
  local method, path = headtext:match("^(%u+) (%S+) HTTP/1%.%d")
  local headers = {}
  for k, v in headtext:gmatch("\r\n([^:]+):%s*([^\r]*)") do headers[k:lower()] = v end
  local len = tonumber(headers["content-length"] or 0)
  if #c.inbuf < e + 3 + len then return end
  local body = c.inbuf:sub(e + 4, e + 3 + len)
  c.inbuf = c.inbuf:sub(e + 4 + len)
  if not method then c.steps = { false } return end
  c.steps = route(method, path, headers, body, c)
  c.at = now()
  c.pos = 1
end

local function close(s)
  conns[s] = nil
  s:close()
end

-- Sends what is due; returns seconds until the next step is due (or nil).
local function pump(s, c)
  while #c.steps > 0 do
    local step = c.steps[1]
    if step == false then close(s) return nil end
    if step == "rst" then
      s:setoption("linger", { on = true, timeout = 0 })
      close(s)
      if c.mark then assert(io.open(c.mark, "w")):close() end
      return nil
    end
    if type(step) == "number" then
      if now() < c.at + step then return c.at + step - now() end
      table.remove(c.steps, 1)
      c.at = now()
    else
      local n, err, last = s:send(step, c.pos)
      n = n or last
      if err == "closed" then close(s) return nil end
      if n and n >= #step then
        table.remove(c.steps, 1)
        c.pos = 1
        c.at = now()
      else
        c.pos = (n or c.pos - 1) + 1
        return nil, true
      end
    end
  end
  parse(c)
  if #c.steps > 0 then return pump(s, c) end
  return nil
end

while true do
  local rs, ws = { srv }, {}
  local timeout = 1
  for s, c in pairs(conns) do
    rs[#rs + 1] = s
    local t, blocked = pump(s, c)
    if conns[s] then
      if blocked then ws[#ws + 1] = s end
      if t and t < timeout then timeout = t end
    end
  end
  local readable = socket.select(rs, ws, timeout)
  for _, s in ipairs(readable) do
    if s == srv then
      accept()
    elseif conns[s] then
      local data, err, partial = s:receive(65536)
      data = data or partial
      if data and #data > 0 then conns[s].inbuf = conns[s].inbuf .. data end
      if err == "closed" then close(s) elseif conns[s] then parse(conns[s]) end
    end
  end
end
