-- http.websocket(url [, opts]): the WebSocket client, against moonhttp's own
-- WebSocket server and against python3-websockets (which rejects unmasked
-- client frames, so every echo there also proves the client masks).
local H = require "helper"
local certs = require "helpers.certs"

local function lines(out)
  local t = {}
  for l in (out .. "\n"):gmatch("([^\n]*)\n") do t[#t + 1] = l end
  return t
end

local function log_has(srv, text, timeout)
  local deadline = H.now() + (timeout or 3)
  repeat
    if srv:logtext():find(text, 1, true) then return true end
    require("socket").sleep(0.02)
  until H.now() > deadline
  return false
end

local function run(source, ...)
  local code, out = H.run_lua(source, ...)
  assert.equal(0, code, out)
  return out
end

describe("http.websocket against moonhttp's WebSocket server", function()
  local srv
  setup(function()
    srv = H.start([[
local http = require "moonhttp"
http.handle("GET /echo", function(req, res)
  local ws = assert(req:websocket{ protocols = { "chat" } })
  http.log("info", "origin=" .. tostring(req:header("Origin")) .. " token=" .. tostring(req:header("X-Token")))
  while true do
    local data, kind, code = ws:receive()
    if not data then http.log("info", "server saw close " .. tostring(code)) return end
    if data == "bye" then ws:close(4000, "asked") else ws:send(data, kind) end
  end
end)
http.handle("GET /plain", function(req, res) res:write("not a websocket") end)
]])
  end)
  teardown(function() srv:stop() end)

  it("echoes text and binary, negotiates a subprotocol, answers a server's close", function()
    local out = run(string.format([[
      local ws, err = http.websocket("ws://127.0.0.1:%d/echo", { protocols = { "x", "chat" },
        headers = { ["X-Token"] = "t1" }, origin = "http://app.test" })
      assert(ws, err)
      print(ws.protocol, ws.state)
      print(ws:send("héllo"))
      print(ws:receive())
      local big = string.rep("0123456789", 30000)
      assert(ws:send(big, "binary"))
      local got, kind = ws:receive()
      print(got == big, kind)
      print(ws:ping("p"))
      print(ws:send("bye"))
      print(ws:receive())
      print(ws.state, ws:send("late"))
    ]], srv.port))
    assert.same({ "chat\topen", "true", "héllo\ttext", "true\tbinary", "true", "true",
      "nil\tclosed\t4000\tasked", "closed\tnil\tclosed\t4000\tasked", "" }, lines(out))
    assert.truthy(log_has(srv, "origin=http://app.test token=t1"), srv:logtext())
  end)

  it("closes with a code the server hears", function()
    run(string.format([[
      local ws = assert(http.websocket("ws://127.0.0.1:%d/echo"))
      print(ws:close(3001, "done"))
      print(ws:receive())
    ]], srv.port))
    assert.truthy(log_has(srv, "server saw close 3001"), srv:logtext())
  end)

  it("reports a non-101 answer and refused connections as values; misuse raises", function()
    local out = run(string.format([[
      print(http.websocket("ws://127.0.0.1:%d/plain"))
      print(pcall(http.websocket, "http://127.0.0.1/"))
      print(pcall(http.websocket, "ws://127.0.0.1:%d/echo", { timout = 1 }))
      local ws = assert(http.websocket("ws://127.0.0.1:%d/echo"))
      print(pcall(ws.send, ws, "\xff"))
      print(pcall(ws.close, ws, 1005))
    ]], srv.port, srv.port, srv.port))
    local l = lines(out)
    assert.equal("nil\tbad status\t200", l[1])
    assert.truthy(l[2]:find("^false\t.*url must be ws://"), out)
    assert.truthy(l[3]:find("^false\t.*unknown option \"timout\""), out)
    assert.truthy(l[4]:find("^false\t.*text must be valid UTF%-8"), out)
    assert.truthy(l[5]:find("^false\t.*close code must be"), out)
  end)
end)

describe("http.websocket against python3-websockets", function()
  local py, silent
  setup(function()
    py = H.service("/usr/bin/python3 spec/servers/ws_server.py", function(text)
      local p, q = text:match("port (%d+) silent (%d+)")
      if p then silent = tonumber(q) end
      return p
    end)
  end)
  teardown(function() py:stop() end)

  it("talks to another implementation: masked frames, fragments, headers, close codes", function()
    local out = run(string.format([[
      local ws = assert(http.websocket("ws://127.0.0.1:%d/", { protocols = { "superchat" },
        headers = { ["X-Token"] = "abc" } }))
      print(ws.protocol)
      assert(ws:send("ping me"))
      print(ws:receive())
      assert(ws:send(string.rep("z", 70000), "binary"))
      local got, kind = ws:receive()
      print(#got, kind)
      assert(ws:send("frag"))
      print(ws:receive())
      assert(ws:send("header"))
      print(ws:receive())
      assert(ws:send("close"))
      print(ws:receive())
    ]], py.port))
    assert.same({ "superchat", "ping me\ttext", "70000\tbinary", "fragments\ttext", "abc\ttext",
      "nil\tclosed\t4001\tpy bye", "" }, lines(out))
  end)

  it("times out a server that never answers the handshake", function()
    local out = run(string.format([[
      local t0 = http.now()
      print(http.websocket("ws://127.0.0.1:%d/", { timeout = 1 }))
      local dt = http.now() - t0
      print(dt >= 0.9 and dt < 2)
    ]], silent))
    assert.same({ "nil\ttimeout", "true", "" }, lines(out))
  end)

  it("sends from one task while another receives", function()
    local out = run(string.format([[
      local ws = assert(http.websocket("ws://127.0.0.1:%d/"))
      local reader = http.spawn(function()
        local n = 0
        for i = 1, 200 do
          local data = ws:receive()
          if data ~= "m" .. i then return "bad " .. tostring(data) end
          n = n + 1
        end
        return n
      end)
      http.sleep(0.05)
      for i = 1, 200 do assert(ws:send("m" .. i)) end
      print(reader:join(5))
      ws:close()
    ]], py.port))
    assert.same({ "true\t200", "" }, lines(out))
  end)
end)

describe("http.websocket over TLS (wss://), against moonhttp's HTTPS listener", function()
  local dir, srv
  setup(function()
    dir = certs.ca_and_server("-wss", "/CN=mh-wss-ca")
    local app = H.script([[
local http = require "moonhttp"
http.handle("GET /echo", function(req, res)
  local ws = assert(req:websocket())
  while true do
    local data, kind = ws:receive()
    if not data then return end
    ws:send(data, kind)
  end
end)
]])
    srv = H.start(app, { no_listen = true, flags = { "--listen", "https://127.0.0.1:0",
      "--tls-cert", dir .. "/srv.pem", "--tls-key", dir .. "/srv.key" } })
  end)
  teardown(function()
    srv:stop()
    os.execute("rm -rf " .. dir)
  end)

  it("verifies the server and echoes through TLS; an unknown authority is refused", function()
    local out = run(string.format([[
      local url, ca = "wss://localhost:%d/echo", %q
      print(http.websocket(url)) -- first: a saved TLS session would skip the check
      local ws = assert(http.websocket(url, { tls = { ca = ca } }))
      local big = string.rep("w", 100000)
      assert(ws:send(big, "binary"))
      local got, kind = ws:receive()
      print(got == big, kind)
      print(ws:close())
    ]], srv.port, dir .. "/ca.pem"))
    assert.same({ "nil\ttls: certificate signed by unknown authority", "true\tbinary", "true", "" },
      lines(out))
  end)
end)
