-- Upgrade pass-through (docs/reference/websocket-proxy.md): http.relay_upgrade and
-- http.proxy on a request that asks to switch protocols. A front moonhttp
-- relays to a moonhttp WebSocket echo upstream (which counts the sessions it
-- saw open and close in a shared dict) and to spec/servers/upgrade_foo.py
-- (a non-WebSocket "Upgrade: foo" that speaks first). Clients are raw
-- sockets (HTTP/1.1) and spec/clients/h2_ws_relay.py (RFC 8441 over h2c).
local H = require "helper"
local W = require "helpers.ws"
local socket = require "socket"
local cjson = require "cjson"

local UPSTREAM = [[
local http = require "moonhttp"
http.server{ shared = { ev = "64k" } }
local ev = http.shared.ev
http.handle("GET /ws", function(req, res)
  local ws = req:websocket{ max_message = "2m", ping_interval = 0, idle_timeout = 0 }
  if not ws then return end
  ev:incr("opened", 1, 0)
  while true do
    local data, kind, code = ws:receive()
    if not data then
      ev:set("code", code or 0)
      ev:incr("closed", 1, 0)
      return
    end
    ws:send(data, kind)
  end
end)
http.handle("GET /events", function(req, res)
  res:json{ opened = ev:get("opened") or 0, closed = ev:get("closed") or 0, code = ev:get("code") or 0 }
end)
http.handle("GET /forbidden", function(req, res)
  res:status(403)
  res:header("X-Why", "nope")
  res:write("no entry\n")
end)
]]

local FRONT = [[
local http = require "moonhttp"
local UP, FOO, DEAD = %q, %q, %q
http.server{ shared = { cache = "1m" } }
local cache = require("moonhttp.cache").new{ dict = http.shared.cache, default_ttl = 60 }
local function strip(prefix)
  return function(up) up.path = up.path:sub(#prefix + 1) end
end
http.handle("GET /relay/", function(req, res)
  local ok, why = http.relay_upgrade(req, res, UP:gsub("^http", "ws") .. req.path:sub(7),
    { idle_timeout = 5 })
  if not ok then
    res:status(why == "upgrade" and 400 or 502)
    res:write(why .. "\n")
  end
end)
http.handle("GET /rdead/", function(req, res)
  local ok, kind, detail = http.relay_upgrade(req, res, DEAD:gsub("^http", "ws") .. "/ws")
  res:status(502)
  res:write(kind, " ", detail, "\n")
end)
http.handle("GET /proxy/", function(req, res)
  return http.proxy(req, res, UP, { request = strip("/proxy") })
end)
http.handle("GET /cached/", cache:wrap(function(req, res)
  return http.proxy(req, res, UP, { request = strip("/cached") })
end))
local group = http.upstream{ servers = { (UP:gsub("^http://", "")) } }
http.handle("GET /group/", function(req, res)
  return http.proxy(req, res, group, { request = strip("/group") })
end)
http.handle("GET /idle/", function(req, res)
  return http.proxy(req, res, UP, { request = strip("/idle"), idle_timeout = 1 })
end)
http.handle("GET /foo/", function(req, res)
  return http.proxy(req, res, FOO, { request = strip("/foo") })
end)
http.handle("GET /dead/", function(req, res)
  return http.proxy(req, res, DEAD, { request = strip("/dead") })
end)
]]

-- A client frame masked with the zero key (a 1 MiB payload goes out as it is),
-- and a server frame as opcode, payload (nil on close or timeout).
local function frame(op, payload) return W.frame(op, payload, { zero_key = true }) end
local function read_frame(c)
  local f = W.read_frame(c)
  if f then return f.op, f.payload end
end

local KEY, ACCEPT = "dGhlIHNhbXBsZSBub25jZQ==", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

local function ws_open(port, path, timeout)
  local c = H.connect(port, timeout or 5)
  assert(c:send("GET " .. path .. " HTTP/1.1\r\nHost: front.test\r\nUpgrade: websocket\r\n"
    .. "Connection: Upgrade\r\nSec-WebSocket-Key: " .. KEY .. "\r\nSec-WebSocket-Version: 13\r\n\r\n"))
  local res = assert(c:read_response())
  return c, res
end

local function free_port()
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return port
end

describe("upgrade pass-through", function()
  local up, foo, front

  setup(function()
    up = H.start(UPSTREAM)
    foo = H.service("/usr/bin/python3 spec/servers/upgrade_foo.py", function(text)
      return text:match("port (%d+)")
    end, 5)
    front = H.start(FRONT:format("http://127.0.0.1:" .. up.port, "http://127.0.0.1:" .. foo.port,
      "http://127.0.0.1:" .. free_port()))
  end)

  teardown(function()
    if front then front:stop() end
    if up then up:stop() end
    if foo then foo:stop() end
  end)

  local function events()
    return cjson.decode(up:get("/events").body)
  end

  -- Polls the upstream's counters until `closed` reaches n (or 3 s pass).
  local function wait_closed(n)
    local deadline = H.now() + 3
    local e = events()
    while e.closed < n and H.now() < deadline do
      H.sleep(0.05)
      e = events()
    end
    return e
  end

  local function echo_session(path)
    local before = events().closed
    local c, res = ws_open(front.port, path)
    assert.are.equal(101, res.status)
    assert.are.equal(ACCEPT, res.headers["sec-websocket-accept"])
    assert.are.equal("websocket", res.headers["upgrade"]:lower())
    assert(c:send(frame(1, "héllo")))
    assert.are.same({ 1, "héllo" }, { read_frame(c) })
    assert(c:send(frame(2, "\0\1\2\255")))
    assert.are.same({ 2, "\0\1\2\255" }, { read_frame(c) })
    assert(c:send(frame(9, "p1")))
    assert.are.same({ 10, "p1" }, { read_frame(c) })
    local big = string.rep("0123456789abcdef", 65536) -- 1 MiB
    assert(c:send(frame(2, big)))
    local op, got = read_frame(c)
    assert.are.equal(2, op)
    assert.are.equal(#big, #got)
    assert.is_true(got == big)
    assert(c:send(frame(8, string.pack(">I2", 1000) .. "bye")))
    op, got = read_frame(c)
    assert.are.equal(8, op)
    assert.are.equal(1000, string.unpack(">I2", got))
    assert.is_true(c:closed_by_peer(3))
    c:close()
    local e = wait_closed(before + 1)
    assert.are.equal(before + 1, e.closed)
    assert.are.equal(1000, e.code)
  end

  it("echoes text, binary, a 1 MiB message, ping/pong and the close handshake through http.relay_upgrade", function()
    echo_session("/relay/ws")
  end)

  it("echoes the same through http.proxy (Upgrade: websocket on HTTP/1.1)", function()
    echo_session("/proxy/ws")
  end)

  it("echoes over HTTP/2 (RFC 8441 extended CONNECT) through http.proxy", function()
    local before = events().closed
    local out = H.sh(("/usr/bin/python3 spec/clients/h2_ws_relay.py %d /proxy/ws 2>&1"):format(front.port))
    assert.matches("status=200\n", out, 1, true)
    assert.matches("text=héllo\n", out, 1, true)
    assert.matches("binary=000102ff\n", out, 1, true)
    assert.matches("pong=p1\n", out, 1, true)
    assert.matches("big=60000\n", out, 1, true)
    assert.matches("close=1000\n", out, 1, true)
    assert.matches("end=1\n", out, 1, true)
    assert.is_nil(out:find("accept=", 1, true)) -- RFC 8441 has no Sec-WebSocket-Accept
    local e = wait_closed(before + 1)
    assert.are.equal(before + 1, e.closed)
    assert.are.equal(1000, e.code)
  end)

  it("passes a WebSocket through http.proxy to an http.upstream group", function()
    local c, res = ws_open(front.port, "/group/ws")
    assert.are.equal(101, res.status)
    assert(c:send(frame(1, "via group")))
    assert.are.same({ 1, "via group" }, { read_frame(c) })
    c:close()
  end)

  it("passes a WebSocket through a route with moonhttp.cache in front", function()
    local c, res = ws_open(front.port, "/cached/ws")
    assert.are.equal(101, res.status)
    assert(c:send(frame(1, "via cache")))
    assert.are.same({ 1, "via cache" }, { read_frame(c) })
    assert(c:send(frame(8, string.pack(">I2", 1000))))
    assert.are.equal(8, (read_frame(c)))
    assert.is_true(c:closed_by_peer(3))
    c:close()
    H.sleep(0.2)
    -- the cache stepped aside: no stored "response" replayed onto the switched stream
    assert.is_nil(front:logtext():match("%[error%][^\n]*cached"), front:logtext())
  end)

  it("answers 502 when the upstream refuses the connection", function()
    local c, res = ws_open(front.port, "/dead/ws")
    c:close()
    assert.are.equal(502, res.status)
    assert.are.equal("bad gateway\n", res.body)
    -- http.relay_upgrade leaves the answer to the handler, with fetch's kind and detail
    c, res = ws_open(front.port, "/rdead/ws")
    c:close()
    assert.are.equal(502, res.status)
    assert.are.equal("refused connection refused\n", res.body)
  end)

  it("relays an upstream's refusal (403) as a normal response", function()
    local c, res = ws_open(front.port, "/proxy/forbidden")
    assert.are.equal(403, res.status)
    assert.are.equal("nope", res.headers["x-why"])
    assert.are.equal("no entry\n", res.body)
    assert.is_nil(res.headers["upgrade"])
    c:close()
    c, res = ws_open(front.port, "/relay/forbidden")
    assert.are.equal(403, res.status)
    assert.are.equal("nope", res.headers["x-why"])
    assert.are.equal("no entry\n", res.body)
    c:close()
    c, res = ws_open(front.port, "/foo/refuse")
    assert.are.equal(403, res.status)
    assert.are.equal("foo", res.headers["x-up"])
    assert.is_nil(res.headers["x-private"]) -- named by the upstream's Connection: hop-by-hop
    assert.are.equal("no entry\n", res.body)
    c:close()
  end)

  it("closes both sides after idle_timeout without a byte either way", function()
    local before = events().closed
    local c, res = ws_open(front.port, "/idle/ws")
    assert.are.equal(101, res.status)
    assert(c:send(frame(1, "still here")))
    assert.are.same({ 1, "still here" }, { read_frame(c) })
    local t0 = H.now()
    assert.is_true(c:closed_by_peer(4))
    local waited = H.now() - t0
    c:close()
    assert.is_true(waited >= 0.9 and waited < 2.5, "closed after " .. waited .. " s")
    local e = wait_closed(before + 1)
    assert.are.equal(before + 1, e.closed)
    assert.are.equal(1006, e.code) -- the relay closed the connection: no close frame
  end)

  it("closes the upstream when the client disconnects", function()
    local before = events().closed
    local c, res = ws_open(front.port, "/relay/ws")
    assert.are.equal(101, res.status)
    assert(c:send(frame(1, "x")))
    assert.are.same({ 1, "x" }, { read_frame(c) })
    c:close()
    local e = wait_closed(before + 1)
    assert.are.equal(before + 1, e.closed)
    assert.are.equal(1006, e.code)
  end)

  it("passes a non-WebSocket upgrade as bytes, with what the upstream sent right after its 101", function()
    local c = H.connect(front.port)
    assert(c:send("GET /foo/tunnel HTTP/1.1\r\nHost: front.test\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\nearly "))
    local res = assert(c:read_response())
    assert.are.equal(101, res.status)
    assert.are.equal("foo", res.headers["upgrade"])
    assert.are.equal("foo", res.headers["x-up"])
    assert.are.equal("hello-after-101\n", c:read_bytes(16))
    assert.are.equal("EARLY ", c:read_bytes(6))
    assert(c:send("abc\n"))
    assert.are.equal("ABC\n", c:read_bytes(4))
    c.sock:shutdown("send") -- the client's EOF reaches the upstream, which says bye and closes
    assert.are.equal("bye\n", c:read_bytes(4))
    assert.is_true(c:closed_by_peer(3))
    c:close()
  end)

  it("holds a client back that sends without reading (bounded buffers, back-pressure both ways)", function()
    local c = H.connect(front.port)
    assert(c:send("GET /foo/tunnel HTTP/1.1\r\nHost: front.test\r\nUpgrade: foo\r\nConnection: Upgrade\r\n\r\n"))
    assert.are.equal(101, assert(c:read_response()).status)
    -- The upstream echoes everything; nobody reads the echo, so every buffer on
    -- the way fills and the client's sends stop. The kernel's share of that is
    -- not fixed: loopback receive buffers grow up to tcp_rmem's maximum (32 MiB
    -- here), and more on a busy machine (63.5 MiB once of a 64 MiB send). The
    -- client's and the upstream's buffers are kept small (upgrade_foo.py), and
    -- the client offers 256 MiB: a relay that buffers without bound takes all
    -- of it, a bounded one stops at the front's four socket buffers (2 x 32 +
    -- 2 x 4 MiB at most) and its own two bounds.
    assert(c.sock:setoption("send-buffer-size", 65536))
    assert(c.sock:setoption("recv-buffer-size", 65536))
    local chunk, limit = string.rep("x", 1024 * 1024), 256 * 1024 * 1024
    c.sock:settimeout(2)
    local sent, err = 0, nil
    while sent < limit do
      local n, e, last = c.sock:send(chunk)
      sent = sent + (n or last)
      if not n then err = e; break end
    end
    print(("\n  back-pressure: %d bytes accepted of %d"):format(sent, limit))
    c:close()
    assert.are.equal("timeout", err, "all 256 MiB went in: nothing held the client back")
    assert.is_true(sent < 160 * 1024 * 1024, sent .. " bytes accepted")
  end)

  -- SIGINT: the stop without a drain (SIGTERM's drain serves a relay on within shutdown_timeout)
  it("ends a relay at a stop instead of holding the stop for shutdown_timeout", function()
    local before = events().closed
    local f2 = H.start(FRONT:format("http://127.0.0.1:" .. up.port, "http://127.0.0.1:" .. foo.port,
      "http://127.0.0.1:" .. free_port()))
    local c, res = ws_open(f2.port, "/relay/ws")
    assert.are.equal(101, res.status)
    assert(c:send(frame(1, "x")))
    assert.are.same({ 1, "x" }, { read_frame(c) })
    local t0 = H.now()
    f2:signal("INT")
    assert.is_true(c:closed_by_peer(5))
    local status = f2:wait(8)
    local took = H.now() - t0
    c:close()
    f2:stop()
    assert.are.equal(0, status)
    assert.is_true(took < 5, "the stop took " .. took .. " s") -- shutdown_timeout is 10 s
    assert.are.equal(before + 1, wait_closed(before + 1).closed)
  end)

  it("answers 400 from a relay route when the request does not ask to upgrade", function()
    local res = front:get("/relay/ws")
    assert.are.equal(400, res.status)
    assert.are.equal("upgrade\n", res.body)
  end)
end)

-- http.proxy's own options on the upgrade path: via, the response hook, and
-- the client (its TLS settings: a TLS upstream with a self-signed certificate
-- is reached only with the client's verify = false).
describe("upgrade pass-through with http.proxy's options", function()
  local certs = require "helpers.certs"
  local up, tls_up, front

  setup(function()
    local dir = certs.dir("-relayopts")
    local pem, key = certs.self_signed(dir, "srv", "/CN=localhost", { san = "DNS:localhost,IP:127.0.0.1" })
    up = H.start(UPSTREAM)
    tls_up = H.start(UPSTREAM, { flags = { "--tls-cert", pem, "--tls-key", key } })
    front = H.start(([[
local http = require "moonhttp"
local UP, TLS = %q, %q
local function strip(n) return function(up) up.path = up.path:sub(n + 1) end end
local function mark(head) head.headers["X-Hooked"] = { tostring(head.status) } end
local insecure = http.client{ tls = { verify = false } }
local group = http.upstream{ servers = { TLS }, client = insecure }
http.handle("GET /via/", function(req, res)
  return http.proxy(req, res, UP, { request = strip(4), via = "front" })
end)
http.handle("GET /hook/", function(req, res)
  return http.proxy(req, res, UP, { request = strip(5), response = mark })
end)
http.handle("GET /hookbad/", function(req, res)
  return http.proxy(req, res, UP, { request = strip(8), response = function(head) head.status = 200 end })
end)
http.handle("GET /tls/", function(req, res)
  return http.proxy(req, res, TLS, { request = strip(4), client = insecure })
end)
http.handle("GET /tlsdefault/", function(req, res)
  return http.proxy(req, res, TLS, { request = strip(11) })
end)
http.handle("GET /tlsgroup/", function(req, res)
  return http.proxy(req, res, group, { request = strip(9) })
end)
]]):format("http://127.0.0.1:" .. up.port, "https://127.0.0.1:" .. tls_up.port))
  end)

  teardown(function()
    for _, s in ipairs({ front, up, tls_up }) do if s then s:stop() end end
  end)

  local function echo(c, text)
    assert(c:send(frame(1, text)))
    assert.are.same({ 1, text }, { read_frame(c) })
    c:close()
  end

  it("adds Via to a 101 and to a refusal", function()
    local c, res = ws_open(front.port, "/via/ws")
    assert.are.equal(101, res.status)
    assert.are.equal("1.1 front", res.headers["via"])
    echo(c, "via")
    c, res = ws_open(front.port, "/via/forbidden")
    assert.are.equal(403, res.status)
    assert.are.equal("1.1 front", res.headers["via"])
    c:close()
  end)

  it("runs the response hook on a 101's head and on a refusal", function()
    local c, res = ws_open(front.port, "/hook/ws")
    assert.are.equal(101, res.status)
    assert.are.equal("101", res.headers["x-hooked"])
    echo(c, "hooked")
    c, res = ws_open(front.port, "/hook/forbidden")
    assert.are.equal(403, res.status)
    assert.are.equal("403", res.headers["x-hooked"])
    assert.are.equal("no entry\n", res.body)
    c:close()
  end)

  it("refuses a hook that changes a 101's status with a clear error", function()
    local c, res = ws_open(front.port, "/hookbad/ws")
    assert.are.equal(500, res.status)
    c:close()
    assert.truthy(front:logtext():find("cannot change the status of a switch", 1, true), front:logtext())
  end)

  it("connects with the client's TLS settings (its own and a group's)", function()
    local c, res = ws_open(front.port, "/tlsdefault/ws")
    assert.are.equal(502, res.status) -- the default client verifies the certificate
    c:close()
    c, res = ws_open(front.port, "/tls/ws")
    assert.are.equal(101, res.status)
    echo(c, "over tls")
    c, res = ws_open(front.port, "/tlsgroup/ws")
    assert.are.equal(101, res.status)
    echo(c, "group over tls")
  end)
end)
