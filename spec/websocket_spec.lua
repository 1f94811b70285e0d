-- WebSocket (RFC 6455) through req:websocket: the handshake's checks, echo
-- with a third-party client (Debian's python3-websockets), every protocol
-- error as raw frames (data rows), pings, the idle timeout, back-pressure,
-- a chat across handlers, handler errors, and the graceful stop's 1001.
local H = require "helper"
local W = require "helpers.ws"
local socket = require "socket"

local app = [[
local http = require "moonhttp"

local function echo(ws)
  while true do
    local data, kind, code, reason = ws:receive()
    if not data then return kind, code, reason end
    ws:send(data, kind)
  end
end

http.handle("GET /echo", function(req, res)
  local ws = req:websocket{ protocols = { "chat", "echo" } }
  if ws then why = table.concat({ echo(ws) }, " ") end
end)

http.handle("GET /small", function(req, res)
  local ws = assert(req:websocket{ max_message = 1000, max_frame = 500 })
  echo(ws)
end)

http.handle("GET /origin", function(req, res)
  local ws = assert(req:websocket())
  ws:send("origin=" .. tostring(req:header("origin")) .. " protocol=" .. tostring(ws.protocol))
end)

http.handle("GET /fail", function(req, res)
  local ws = assert(req:websocket())
  ws:send("about to fail")
  error("boom after the upgrade")
end)

http.handle("GET /quiet", function(req, res)
  local ws = assert(req:websocket())
  http.sleep(0.5) -- not receiving: pings are still answered
  ws:send("woke")
  echo(ws)
end)

http.handle("GET /idle", function(req, res)
  local ws = assert(req:websocket{ ping_interval = 0.2, idle_timeout = 0.6 })
  local _, code = echo(ws)
  http.log("info", "idle route ended with " .. tostring(code))
end)

local clients = {}
http.handle("GET /chat", function(req, res)
  local ws = assert(req:websocket())
  clients[ws] = true
  ws:send("welcome")
  while true do
    local msg = ws:receive()
    if not msg then break end
    for peer in pairs(clients) do peer:send(msg) end -- sends from this task to every socket
  end
  clients[ws] = nil
end)

http.handle("GET /hold", function(req, res)
  local ws = assert(req:websocket())
  ws:send("ready")
  echo(ws)
end)

sent = 0
http.handle("GET /flood", function(req, res)
  local ws = assert(req:websocket())
  local chunk = ("f"):rep(65536)
  for i = 1, 200 do
    if not ws:send(chunk, "binary") then break end
    sent = i
  end
  ws:close(1000, "done")
  ws:receive()
end)
http.handle("GET /sent", function(req, res) res:write(tostring(sent)) end)

gone = "none"
http.handle("GET /gone", function(req, res)
  local ws = assert(req:websocket())
  ws:send("hi")
  local data, err, code = ws:receive()
  gone = tostring(data) .. " " .. tostring(err) .. " " .. tostring(code)
  local ok, err2 = ws:send("after")
  gone = gone .. " " .. tostring(ok) .. " " .. tostring(err2)
end)
http.handle("GET /gone_result", function(req, res) res:write(gone) end)

why = "none"
http.handle("GET /why", function(req, res) res:write(why) end)
http.handle("GET /room/{name}/{rest...}", function(req, res)
  local ws = assert(req:websocket())
  ws:receive() -- meanwhile other requests reuse the connection's old read buffer
  ws:send(req:pathvalue("name") .. " " .. req:pathvalue("rest") .. " " .. req.path .. " " .. req:header("x-tag") .. " " .. req:arg("q"))
end)

pinged = "none"
http.handle("GET /ping", function(req, res)
  local ws = assert(req:websocket())
  assert(ws:ping("are you there"))
  pinged = ws.state
  ws:close(4000, "done pinging")
  local _, err, code, reason = ws:receive()
  pinged = pinged .. " " .. err .. " " .. code .. " " .. reason .. " " .. ws.state
end)
http.handle("GET /pinged", function(req, res) res:write(pinged) end)

http.handle("GET /plain", function(req, res) res:write("plain http") end)
]]

local KEY = "dGhlIHNhbXBsZSBub25jZQ=="
local ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" -- RFC 6455 section 1.3's example

local function upgrade_request(path, extra)
  return "GET " .. path .. " HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" ..
    "Sec-WebSocket-Key: " .. KEY .. "\r\nSec-WebSocket-Version: 13\r\n" .. (extra or "") .. "\r\n"
end

local frame, read_frame, close_code = W.frame, W.read_frame, W.close_code

local function open(srv, path, extra)
  local c = srv:connect()
  c:send(upgrade_request(path, extra))
  local res = assert(c:read_response())
  assert.equal(101, res.status)
  return c, res
end

local function client(srv, path, scenario)
  local cmd = ("/usr/bin/python3 spec/clients/ws_client.py ws://127.0.0.1:%d%s %s 2>&1"):format(
    srv.port, path, scenario)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

describe("WebSocket", function()
  local srv
  setup(function() srv = H.start(app) end)
  teardown(function() srv:stop() end)

  describe("opening handshake", function()
    it("answers 101 with the RFC's accept value, Upgrade, Connection and the chosen subprotocol", function()
      local c, res = open(srv, "/echo", "Sec-WebSocket-Protocol: x, echo\r\nSec-WebSocket-Protocol: chat\r\n")
      assert.equal(ACCEPT, res.headers["sec-websocket-accept"])
      assert.equal("websocket", res.headers["upgrade"])
      assert.equal("Upgrade", res.headers["connection"])
      assert.equal("chat", res.headers["sec-websocket-protocol"]) -- the server's order decides
      assert.is_nil(res.headers["content-length"])
      assert.is_nil(res.headers["transfer-encoding"])
      c:send(frame(1, "hi"))
      local f = read_frame(c)
      assert.same({ true, 1, false, "hi" }, { f.fin, f.op, f.masked, f.payload })
      c:close()
    end)

    it("sends no subprotocol when none offered matches, and a token list in Connection works", function()
      local c = srv:connect()
      c:send((upgrade_request("/origin", "Origin: https://app.example\r\nSec-WebSocket-Protocol: other\r\n")
        :gsub("Connection: Upgrade", "Connection: keep-alive, Upgrade")))
      local res = assert(c:read_response())
      assert.equal(101, res.status)
      assert.is_nil(res.headers["sec-websocket-protocol"])
      assert.equal("origin=https://app.example protocol=nil", read_frame(c).payload)
      assert.equal(1000, close_code(read_frame(c))) -- the handler returned
      c:close()
    end)

    local bad = {
      { "no Upgrade header", function(r) return (r:gsub("Upgrade: websocket\r\n", "")) end, 400 },
      { "Upgrade to something else", function(r) return (r:gsub("Upgrade: websocket", "Upgrade: h2c")) end, 400 },
      { "no Connection: upgrade", function(r) return (r:gsub("Connection: Upgrade", "Connection: keep-alive")) end, 400 },
      { "version 8", function(r) return (r:gsub("Version: 13", "Version: 8")) end, 426 },
      { "no version", function(r) return (r:gsub("Sec%-WebSocket%-Version: 13\r\n", "")) end, 426 },
      { "no key", function(r) return (r:gsub("Sec%-WebSocket%-Key: [^\r]*\r\n", "")) end, 400 },
      { "a key of 12 bytes", function(r) return (r:gsub(KEY, "AAAAAAAAAAAAAAAA")) end, 400 },
      { "a key that is not base64", function(r) return (r:gsub(KEY, ("!"):rep(22) .. "==")) end, 400 },
      { "a POST", function(r) return (r:gsub("^GET", "POST"):gsub("\r\n\r\n$", "\r\nContent-Length: 0\r\n\r\n")) end, 405 },
      { "HTTP/1.0", function(r) return (r:gsub("HTTP/1.1", "HTTP/1.0")) end, 400 },
    }
    for _, row in ipairs(bad) do
      it("refuses " .. row[1] .. " with " .. row[3] .. " and keeps serving", function()
        local c = srv:connect()
        c:send(row[2](upgrade_request("/echo")))
        local res = assert(c:read_response())
        assert.equal(row[3], res.status)
        if row[3] == 426 then assert.equal("13", res.headers["sec-websocket-version"]) end
        c:close()
        assert.equal(200, srv:get("/plain").status)
      end)
    end
  end)

  it("echoes text, UTF-8, binary, 70 kB and 300 kB messages to python3-websockets, answers its ping, echoes its close", function()
    local out = client(srv, "/echo", "echo")
    assert.equal(table.concat({
      "protocol echo", "str 5 True", "str 7 True", "bytes 6 True", "str 70000 True",
      "bytes 300000 True", "str 0 True", "pong", "closed 4001 ", "" }, "\n"), out) -- our close echoes the code only
    assert.equal("closed 4001 bye now", srv:get("/why").body) -- the handler heard code and reason
  end)

  describe("raw frames", function()
    local good = {
      { "a fragmented text split inside a character", frame(1, "h\xc3", { fin = false }) .. frame(0, "\xa9llo"), { { 1, "h\xc3\xa9llo" } } },
      { "a ping between fragments (answered first, same payload)", frame(1, "ab", { fin = false }) .. frame(9, "p!") .. frame(0, "cd"), { { 10, "p!" }, { 1, "abcd" } } },
      { "an empty binary message", frame(2, ""), { { 2, "" } } },
      { "a 16-bit length", frame(2, ("m"):rep(300)), { { 2, ("m"):rep(300) } } },
      { "a pong nobody asked for (ignored)", frame(10, "x") .. frame(1, "after"), { { 1, "after" } } },
      { "two messages in one packet", frame(1, "one") .. frame(1, "two"), { { 1, "one" }, { 1, "two" } } },
    }
    for _, row in ipairs(good) do
      it("accepts " .. row[1], function()
        local c = open(srv, "/small")
        c:send(row[2])
        for _, want in ipairs(row[3]) do
          local f = assert(read_frame(c))
          assert.same({ op = want[1], payload = want[2], fin = true, masked = false }, f)
        end
        c:close()
      end)
    end

    local errors = {
      { "an unmasked client frame", frame(1, "hi", { mask = false }), 1002 },
      { "text that is not UTF-8", frame(1, "\xff\xfe"), 1007 },
      { "a surrogate in text", frame(1, "\xed\xa0\x80"), 1007 },
      { "text cut inside a character", frame(1, "ok\xe2\x82"), 1007 },
      { "a fragmented control frame", frame(9, "x", { fin = false }), 1002 },
      { "a control frame over 125 bytes", frame(9, ("p"):rep(126)), 1002 },
      { "a frame over max_frame", frame(2, ("z"):rep(501)), 1009 },
      { "a message over max_message across fragments", frame(2, ("a"):rep(400), { fin = false }) ..
        frame(0, ("b"):rep(400), { fin = false }) .. frame(0, ("c"):rep(400)), 1009 },
      { "close code 1005 on the wire", frame(8, string.pack(">I2", 1005)), 1002 },
      { "close code 999", frame(8, string.pack(">I2", 999)), 1002 },
      { "close code 2999", frame(8, string.pack(">I2", 2999)), 1002 },
      { "close code 1004", frame(8, string.pack(">I2", 1004)), 1002 },
      { "a close payload of one byte", frame(8, "\x03"), 1002 },
      { "a close reason that is not UTF-8", frame(8, string.pack(">I2", 1000) .. "\xc0\xaf"), 1007 },
      { "a continuation without a message", frame(0, "x"), 1002 },
      { "a new message inside a fragmented one", frame(1, "a", { fin = false }) .. frame(1, "b"), 1002 },
      { "RSV1 without an extension", frame(1, "a", { rsv = 0x40 }), 1002 },
      { "RSV3", frame(2, "a", { rsv = 0x10 }), 1002 },
      { "reserved data opcode 3", frame(3, "a"), 1002 },
      { "reserved control opcode 0xB", frame(0xB, ""), 1002 },
      { "a length not minimally encoded", "\x82\xfe\x00\x05\x01\x02\x03\x04" .. ("\x01"):rep(5), 1002 },
    }
    for _, row in ipairs(errors) do
      it("closes with " .. row[3] .. " on " .. row[1] .. ", then the connection", function()
        local c = open(srv, "/small")
        c:send(row[2])
        local f = assert(read_frame(c))
        assert.equal(8, f.op)
        assert.equal(row[3], close_code(f))
        assert.is_true(c:closed_by_peer(3))
        c:close()
      end)
    end

    it("echoes the client's close code and reason-less close, then closes the TCP connection", function()
      local c = open(srv, "/small")
      c:send(frame(8, string.pack(">I2", 1000) .. "bye"))
      local f = read_frame(c)
      assert.equal(1000, close_code(f))
      assert.is_true(c:closed_by_peer(3))
      c = open(srv, "/small")
      c:send(frame(8, ""))
      f = read_frame(c)
      assert.same({ 8, "" }, { f.op, f.payload }) -- no status in, no status out (7.4.1)
      c:close()
    end)

    it("keeps the request's path, captures, query and headers readable after the switch", function()
      local c = open(srv, "/room/lobby/a/b?q=1", "X-Tag: t1\r\n")
      for _ = 1, 3 do
        assert.equal(200, srv:request("GET", "/plain?" .. ("z"):rep(300), { ["X-Pad"] = ("y"):rep(500) }).status)
      end
      c:send(frame(1, "go"))
      assert.equal("lobby a/b /room/lobby/a/b t1 1", read_frame(c).payload)
      c:close()
    end)

    it("takes frames sent in the same packet as the handshake", function()
      local c = srv:connect()
      c:send(upgrade_request("/small") .. frame(1, "early"))
      assert.equal(101, c:read_response().status)
      assert.equal("early", read_frame(c).payload)
      c:close()
    end)
  end)

  it("answers pings while the handler is busy elsewhere", function()
    local c = open(srv, "/quiet")
    local t0 = socket.gettime()
    c:send(frame(9, "now"))
    local f = read_frame(c)
    assert.same({ 10, "now" }, { f.op, f.payload })
    assert.is_true(socket.gettime() - t0 < 0.4) -- before the handler's 0.5 s sleep ends
    assert.equal("woke", read_frame(c).payload)
    c:close()
  end)

  it("ws:ping sends a ping; ws:close sends its code and reason and receive then hears the client's", function()
    local c = open(srv, "/ping")
    local f = read_frame(c)
    assert.same({ 9, "are you there" }, { f.op, f.payload })
    c:send(frame(10, f.payload))
    f = read_frame(c)
    assert.same({ 8, string.pack(">I2", 4000) .. "done pinging" }, { f.op, f.payload })
    c:send(frame(8, string.pack(">I2", 4000) .. "ok"))
    assert.is_true(c:closed_by_peer(3))
    local result
    for _ = 1, 100 do
      result = srv:get("/pinged").body
      if result:find("closed") then break end
      socket.sleep(0.02)
    end
    assert.equal("open closed 4000 ok closed", result)
  end)

  it("pings a silent client, then closes it with 1001 after idle_timeout", function()
    local c = open(srv, "/idle")
    local t0 = socket.gettime()
    local f = read_frame(c)
    assert.equal(9, f.op)
    local t_ping = socket.gettime() - t0
    assert.is_true(t_ping >= 0.15 and t_ping < 0.55, "ping after " .. t_ping)
    f = read_frame(c)
    assert.equal(1001, close_code(f))
    local t_close = socket.gettime() - t0
    assert.is_true(t_close >= 0.55, "closed after " .. t_close)
    c:send(frame(8, string.pack(">I2", 1001)))
    assert.is_true(c:closed_by_peer(3))
  end)

  it("keeps a client that answers pings past idle_timeout", function()
    assert.equal("got still here\n", client(srv, "/idle", "keepalive"))
  end)

  it("closes with 1011 when the handler fails after the upgrade, and logs it", function()
    local c = open(srv, "/fail")
    assert.equal("about to fail", read_frame(c).payload)
    assert.equal(1011, close_code(read_frame(c)))
    c:close()
    assert.matches("boom after the upgrade", srv:logtext())
    assert.equal(200, srv:get("/plain").status)
  end)

  it("sends from one handler to every socket (a chat)", function()
    assert.equal("a got from a\nb got from a\n", client(srv, "/chat", "chat"))
  end)

  it("makes ws:send wait while the client does not read, and delivers everything once it does", function()
    local c = open(srv, "/flood")
    socket.sleep(1)
    local sent = tonumber(srv:get("/sent").body)
    assert.is_true(sent > 0 and sent < 200, "sent " .. sent .. " of 200 to a client reading nothing")
    local bytes, n = 0, 0
    while true do
      local f = assert(read_frame(c))
      if f.op == 8 then
        assert.equal(1000, close_code(f))
        break
      end
      n, bytes = n + 1, bytes + #f.payload
    end
    assert.same({ 200, 200 * 65536 }, { n, bytes })
    assert.equal("200", srv:get("/sent").body)
    c:close()
  end)

  it("tells the handler nil, 'closed', 1006 when the client vanishes, and ws:send then fails", function()
    local c = open(srv, "/gone")
    assert.equal("hi", read_frame(c).payload)
    c:close()
    local result
    for _ = 1, 100 do
      result = srv:get("/gone_result").body
      if result ~= "none" then break end
      socket.sleep(0.02)
    end
    assert.equal("nil closed 1006 nil closed", result)
  end)

  it("raises for the app's own mistakes: text that is not UTF-8, a bad close code", function()
    local s = H.start([[
      local http = require "moonhttp"
      http.handle("GET /", function(req, res)
        local ws = assert(req:websocket())
        local ok1, e1 = pcall(ws.send, ws, "\xff")
        local ok2, e2 = pcall(ws.close, ws, 1005)
        local ok3, e3 = pcall(req.websocket, req, { bogus = 1 })
        ws:send(table.concat({ tostring(ok1), e1, tostring(ok2), e2, tostring(ok3), e3 }, "|"))
      end)
    ]])
    local c = open(s, "/")
    local text = read_frame(c).payload
    c:close()
    s:stop()
    assert.matches('^false|.-valid UTF%-8.-|false|.-close code must be.-|false|.-unknown option "bogus"', text)
  end)
end)

describe("WebSocket and the graceful stop", function()
  it("keeps open sockets through the drain (within shutdown_timeout), then closes them with 1001", function()
    local srv = H.start(app, { flags = { "--shutdown-timeout", "1", "--drain-spread", "0.2" } })
    -- The client runs in the background and holds the socket while the server stops.
    local tmp = os.tmpname()
    os.execute(("(/usr/bin/python3 spec/clients/ws_client.py ws://127.0.0.1:%d/hold stop > %s 2>&1 &)")
      :format(srv.port, tmp))
    local deadline = socket.gettime() + 5
    while socket.gettime() < deadline and not (io.open(tmp):read("a")):find("ready") do socket.sleep(0.05) end
    local t0 = socket.gettime()
    srv:signal("TERM")
    socket.sleep(0.6)
    assert.equal("ready ready\n", io.open(tmp):read("a")) -- still open in the drain
    assert.equal(0, srv:wait(5))
    srv.stopped = true
    local took = socket.gettime() - t0
    assert.is_true(took >= 0.75 and took < 1 + 3, took)
    deadline = socket.gettime() + 5
    local text = ""
    while socket.gettime() < deadline do
      text = io.open(tmp):read("a")
      if text:find("closed") then break end
      socket.sleep(0.05)
    end
    os.remove(tmp)
    assert.equal("ready ready\nclosed 1001 server stopping\n", text)
  end)
end)
