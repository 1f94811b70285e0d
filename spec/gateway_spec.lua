-- examples/gateway.lua through the real binary (docs/guide/proxy.md, "As a reverse
-- proxy"): the example as shipped, its upstreams given by environment
-- variables, against two "users" servers and one "events" server started
-- here (small moonhttp scripts naming themselves in every answer).
local H = require "helper"
local W = require "helpers.ws"
local socket = require "socket"
local cjson = require "cjson"

local NODE = [[
local http = require "moonhttp"
local NAME = %q
http.handle("GET /health", function(req, res) res:write("ok") end)
http.handle("/users/", function(req, res)
  if req.path == "/users/list" then res:header("Cache-Control", "max-age=30") end
  res:json({ node = NAME, path = req.raw_path, user = req:header("x-user") or false,
    auth = req:header("authorization") or false })
end)
http.handle("GET /events", function(req, res)
  res:header("Content-Type", "text/event-stream")
  res:write("data: one from " .. NAME .. "\n\n")
  res:flush()
  http.sleep(0.6)
  res:write("data: two\n\n")
end)
http.handle("GET /ws", function(req, res)
  local ws = assert(req:websocket())
  while true do
    local msg = ws:receive()
    if not msg then break end
    ws:send(NAME .. ":" .. msg)
  end
end)
]]

local SECRET = "a secret for the gateway spec, 32+ bytes"

local function token(claims, secret)
  local code, out = H.run_lua(("print(http.crypto.jwt_sign(%s, %q, 'HS256'))"):format(claims, secret or SECRET))
  assert.equal(0, code, out)
  return out:match("(%S+)")
end

local function free_addr()
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return "127.0.0.1:" .. port
end

describe("examples/gateway.lua", function()
  local u1, u2, ev, gw, dead
  local function get(path, headers) return H.request(gw.port, "GET", path, headers) end
  local KEY = { ["X-API-Key"] = "alice-key" }
  local CAROL = { ["X-API-Key"] = "carol-key" } -- the cache case's own key, so alice's rate holds

  setup(function()
    u1 = H.start(NODE:format("u1"))
    u2 = H.start(NODE:format("u2"))
    ev = H.start(NODE:format("e1"))
    dead = free_addr()
    local envs = table.concat({
      "GATEWAY_USERS=127.0.0.1:" .. u1.port .. ",127.0.0.1:" .. u2.port .. "," .. dead,
      "GATEWAY_EVENTS=127.0.0.1:" .. ev.port,
      "GATEWAY_API_KEYS=alice-key=alice,bob-key=bob,carol-key=carol",
      "GATEWAY_JWT_SECRET=" .. H.shell_quote(SECRET),
      "GATEWAY_RATE=10",
    }, " ")
    gw = H.start("examples/gateway.lua", { env = envs })
  end)
  teardown(function()
    for _, s in ipairs({ gw, u1, u2, ev }) do if s then s:stop() end end
  end)

  it("asks for an API key", function()
    local r = get("/v1/users/1")
    assert.equal(401, r.status)
    assert.same({ error = "unknown API key" }, cjson.decode(r.body))
    assert.equal(401, get("/v1/users/1", { ["X-API-Key"] = "nope" }).status)
  end)

  it("rewrites /v1/users/ to the users group, round robin, skipping the server that refuses", function()
    local nodes = {}
    for _ = 1, 4 do
      local r = get("/v1/users/42?x=1", KEY)
      assert.equal(200, r.status)
      local j = cjson.decode(r.body)
      assert.equal("/users/42", j.path)
      nodes[j.node] = (nodes[j.node] or 0) + 1
    end
    assert.equal(2, nodes.u1)
    assert.equal(2, nodes.u2)
  end)

  it("serves what the users service marks cacheable from the shared cache", function()
    local first = get("/v1/users/list", CAROL)
    assert.equal(200, first.status)
    assert.equal("MISS", first.headers["x-cache"])
    for _ = 1, 3 do
      local again = get("/v1/users/list", CAROL)
      assert.equal("HIT", again.headers["x-cache"])
      assert.equal(first.body, again.body) -- round robin would have named the other node
    end
    assert.equal(401, get("/v1/users/list").status) -- the key check stays in front of it
  end)

  it("limits each API key to GATEWAY_RATE requests a minute", function()
    if os.time() % 60 >= 58 then H.sleep(3) end -- all in one minute's window
    local statuses = {}
    for i = 1, 12 do statuses[i] = get("/v1/users/7", { ["X-API-Key"] = "bob-key" }).status end
    assert.same({ 200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 429, 429 }, statuses)
    local r = get("/v1/users/7", { ["X-API-Key"] = "bob-key" })
    assert.truthy(tonumber(r.headers["retry-after"]))
  end)

  it("checks the JWT of /account and sends its subject on, not the token", function()
    assert.equal(401, get("/account").status)
    local bad = get("/account", { Authorization = "Bearer " .. token("{ sub = 'ann' }", SECRET .. "!") })
    assert.equal(401, bad.status)
    assert.same({ error = "bad signature" }, cjson.decode(bad.body))
    local r = get("/account", { Authorization = "Bearer " .. token("{ sub = 'ann', exp = os.time() + 60 }") })
    assert.equal(200, r.status)
    local j = cjson.decode(r.body)
    assert.equal("/users/ann", j.path)
    assert.equal("ann", j.user)
    assert.equal(false, j.auth)
  end)

  it("passes server-sent events on as they come", function()
    local c = gw:connect()
    assert(c:send("GET /v1/events HTTP/1.1\r\nHost: x\r\nX-API-Key: alice-key\r\n\r\n"))
    local t0 = H.now()
    local got = ""
    while not got:find("data: one from e1", 1, true) do
      assert(c:fill(), "the first event did not come")
      got = c.buf
    end
    assert.is_true(H.now() - t0 < 0.5, "the first event waited for the second")
    assert.falsy(got:find("data: two", 1, true))
    c:close()
  end)

  it("relays a WebSocket to the events group", function()
    local c = gw:connect()
    assert(c:send("GET /v1/ws HTTP/1.1\r\nHost: x\r\nX-API-Key: alice-key\r\nUpgrade: websocket\r\n"
      .. "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"))
    local head = assert(c:read_response({ head = true }))
    assert.equal(101, head.status)
    assert(c:send(W.frame(1, "hello")))
    assert.equal("e1:hello", W.read_frame(c).payload)
    assert(c:send(W.frame(1, "again")))
    assert.equal("e1:again", W.read_frame(c).payload)
    c:close()
  end)

  it("answers upstream failures as JSON: 503 when no server is up", function()
    ev:stop()
    local r = get("/v1/events", KEY)
    assert.equal(502, r.status) -- refused: now marked down
    assert.same({ error = "refused" }, cjson.decode(r.body))
    r = get("/v1/events", KEY)
    assert.equal(503, r.status)
    assert.same({ error = "no healthy upstream" }, cjson.decode(r.body))
  end)
end)
