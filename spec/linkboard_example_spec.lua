-- examples/linkboard.lua (the app bench/soak.sh runs) against a real
-- PostgreSQL cluster and redis-server, each started here on a free port.
local H = require "helper"
local W = require "helpers.ws"
local P = require "pg_helper"
local cjson = require "cjson"

-- The next server frame: opcode, payload.
local function ws_read(c)
  local f = assert(W.read_frame(c))
  return f.op, f.payload
end

describe("examples/linkboard.lua", function()
  local cluster, redis, srv
  setup(function()
    cluster = P.start()
    redis = H.redis()
    srv = H.start("examples/linkboard.lua", { env = string.format(
      "LINKBOARD_PG=127.0.0.1:%d LINKBOARD_REDIS=127.0.0.1:%d", cluster.port, redis.port) })
    -- The worker makes the schema in its on_start, just after it starts serving.
    local deadline = H.now() + 5
    while cluster:scalar("select to_regclass('links') is not null") ~= "t" and H.now() < deadline do
      H.sleep(0.05)
    end
  end)
  teardown(function()
    if srv then srv:stop() end
    if redis then redis:stop() end
    if cluster then cluster:stop() end
  end)

  local JSON = { ["Content-Type"] = "application/json" }

  local function login(name)
    local res = srv:request("POST", "/login", { ["Content-Type"] = "application/x-www-form-urlencoded" },
      "name=" .. name)
    assert.equal(200, res.status)
    return { Cookie = res.headers["set-cookie"]:match("^(session=[^;]+)"), ["Content-Type"] = "application/json" }
  end

  it("serves its page and script as static files", function()
    local res = srv:get("/")
    assert.equal(302, res.status)
    assert.equal("/static/", res.headers.location)
    res = srv:get("/static/")
    assert.equal(200, res.status)
    assert.truthy(res.body:find("<h1>Link board</h1>", 1, true))
    assert.equal(200, srv:get("/static/app.js").status)
  end)

  it("keeps links in PostgreSQL, by name after a login, and PUT twice is one link", function()
    local body = cjson.encode({ url = "https://example.com/a", title = "A" })
    assert.equal(401, srv:request("PUT", "/links/a1", JSON, body).status)
    local ann = login("ann")
    local put = srv:request("PUT", "/links/a1", ann, body)
    assert.equal(200, put.status, put.body)
    local again = cjson.encode({ url = "https://example.com/a", title = "A, again" })
    assert.equal(200, srv:request("PUT", "/links/a1", ann, again).status)
    assert.equal("ann|A, again", cluster:scalar("select author || '|' || title from links where id = 'a1'"))
    local res = srv:get("/links")
    assert.equal(200, res.status)
    local links = cjson.decode(res.body).links
    assert.equal(1, #links)
    assert.equal("a1", links[1].id)
  end)

  it("refuses a bad name and a link that is not an http(s) URL", function()
    assert.equal(400, srv:request("POST", "/login", { ["Content-Type"] = "application/x-www-form-urlencoded" },
      "name=a%20b").status)
    assert.equal(400, srv:request("PUT", "/links/x", login("bob"), '{"url":"javascript:alert(1)"}').status)
    assert.equal(400, srv:request("PUT", "/links/x", login("bob"), "{").status)
  end)

  it("counts votes in Redis", function()
    local function vote()
      local res = assert(srv:request("POST", "/links/v1/vote", nil, ""))
      assert.equal(200, res.status, res.body)
      return cjson.decode(res.body).votes
    end
    assert.equal(1, vote())
    assert.equal(2, vote())
    assert.equal("2", (H.sh(string.format("redis-cli -p %d get votes:v1", redis.port)):gsub("%s+$", "")))
  end)

  it("answers pings on its WebSocket and pushes each new link to it", function()
    local c = srv:connect()
    assert(c:send("GET /ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      .. "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"))
    assert.equal(101, c:read_response().status)
    assert(c:send(W.frame(1, "ping 7")))
    assert.same({ 1, "pong 7" }, { ws_read(c) })
    local body = cjson.encode({ url = "https://example.com/w", title = "W" })
    assert.equal(200, srv:request("PUT", "/links/w1", login("cy"), body).status)
    local op, text = ws_read(c)
    assert.equal(1, op)
    assert.same({ link = "w1", title = "W" }, cjson.decode(text))
    c:close()
  end)

  it("streams its counters as server-sent events, the shared dict's view", function()
    local c = srv:connect()
    assert(c:send("GET /events?every=0.2 HTTP/1.1\r\nHost: localhost\r\nLast-Event-ID: 41\r\n\r\n"))
    local line
    repeat line = c:read_line() until line == "" or line == nil
    local seen = ""
    while not seen:find("\n\n", 1, true) do
      local size = tonumber(c:read_line(), 16)
      seen = seen .. c:read_bytes(size)
      c:read_line()
    end
    assert.truthy(seen:find("event: stats\nid: 42\ndata: {", 1, true), seen)
    c:close()
    local stats = cjson.decode(srv:get("/stats").body)
    assert.is_true(stats.requests > 0)
  end)
end)
