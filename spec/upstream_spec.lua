-- http.upstream groups (issue 37, docs/guide/proxy.md "Upstream groups") through
-- the real binary: a front moonhttp proxies to groups of small moonhttp
-- upstreams ("nodes") started here, each answering with its name in X-Node
-- and counting its requests and health probes. A port nothing listens on
-- stands for a server that refuses.
local H = require "helper"
local socket = require "socket"
local cjson = require "cjson"

-- One upstream: its name in X-Node; /stall-<name> stalls; /hold holds 1.5 s;
-- POST /_set?status=&health=&fail=n&reset=1 changes its answers (fail: the
-- next n probes answer 500); /_stats counts.
local NODE = [[
local http = require "moonhttp"
local NAME = %q
local st = { health = 200, status = 200, hits = 0, probes = 0, fail = 0 }
http.handle("GET /health", function(req, res)
  st.probes = st.probes + 1
  if st.fail > 0 then
    st.fail = st.fail - 1
    res:status(500)
    return res:write("failing " .. NAME)
  end
  res:status(st.health)
  res:write("health " .. NAME)
end)
http.handle("POST /_set", function(req, res)
  local a = req:args()
  if a.health then st.health = tonumber(a.health) end
  if a.status then st.status = tonumber(a.status) end
  if a.fail then st.fail = tonumber(a.fail) end
  if a.reset then st.hits, st.probes = 0, 0 end
  res:write("ok")
end)
http.handle("GET /_stats", function(req, res) res:json({ hits = st.hits, probes = st.probes }) end)
http.handle("/", function(req, res)
  st.hits = st.hits + 1
  -- the front's route prefix, which only a request hook strips, is left out
  local path = req.raw_path:match("^/[^/]+(/.*)$") or req.raw_path
  if path == "/stall-" .. NAME then http.sleep(5) end
  if path == "/hold" then http.sleep(1.5) end
  res:header("X-Node", NAME)
  res:status(st.status)
  res:write(NAME .. " " .. req.method .. " " .. path)
end)
]]

-- HOOK: each route's request hook strips its prefix (http.proxy's hook path); without
-- it, the plain path in C takes the group's server for each attempt.
local FRONT = [[
local http = require "moonhttp"
local A, B, C, DEAD, DEAD2, U, HOOK = %q, %q, %q, %q, %q, %q, %s
local function route(prefix, group, opts)
  opts = opts or {}
  opts.read_timeout = opts.read_timeout or 1
  if HOOK then opts.request = function(up) up.path = up.path:sub(#prefix) end end
  http.handle(prefix, function(req, res) return http.proxy(req, res, group, opts) end)
end
route("/rr/", http.upstream{ servers = { A, { addr = B, weight = 2 } } })
route("/lc/", http.upstream{ servers = { A, B }, balance = "least_conn" }, { read_timeout = 3 })
route("/hash/", http.upstream{ servers = { A, B, C }, balance = "hash(header:X-User)" })
route("/hash2/", http.upstream{ servers = { A, B, C }, balance = "hash(header:X-User)", fail_timeout = 5,
  retries = { on = { "error", "502" } } })
route("/refused/", http.upstream{ servers = { DEAD, A }, max_fails = 0 })
route("/stall1/", http.upstream{ servers = { A, B }, retries = { on = { "error" } } })
route("/stall2/", http.upstream{ servers = { A, B }, retries = { on = { "error", "timeout" } } })
route("/budget/", http.upstream{ servers = { A, B, C }, retries = { tries = 3, on = { "timeout" }, timeout = 0.7 } },
  { read_timeout = 0.5 })
route("/nobudget/", http.upstream{ servers = { A, B, C }, retries = { tries = 3, on = { "timeout" } } },
  { read_timeout = 0.5 })
route("/down/", http.upstream{ servers = { DEAD, DEAD2 } })
route("/downjson/", http.upstream{ servers = { DEAD, DEAD2 } }, { on_error = function(res, status, kind, detail)
  res:json({ status = status, kind = kind, detail = detail }, status)
end })
route("/passive/", http.upstream{ servers = { A, B }, max_fails = 2, fail_timeout = 1,
  retries = { tries = 1, on = { "502" } } })
route("/allbad/", http.upstream{ servers = { A, B }, max_fails = 0, retries = { tries = 3, on = { "503" } } })
route("/post/", http.upstream{ servers = { DEAD, A }, max_fails = 0 })
route("/postany/", http.upstream{ servers = { DEAD, A }, max_fails = 0, retries = { idempotent_only = false } })
route("/postbody/", http.upstream{ servers = { DEAD, A }, max_fails = 0, retries = { idempotent_only = false } })
route("/dns/", http.upstream{ servers = { (A:gsub("^127.0.0.1", "localhost")) }, max_fails = 0 })
route("/ka/", http.upstream{ servers = { U } })
route("/noka/", http.upstream{ servers = { U }, keepalive = 0 })
local api = http.upstream{ servers = { DEAD, B }, max_fails = 0 }
http.handle("/fetch", function(req, res)
  local r, kind = api:fetch("/via-fetch", { timeout = 2 })
  if not r then res:status(502) return res:write(kind) end
  res:write(r:header("X-Node") .. " " .. r:body())
end)
]]

-- Two workers sharing the up/down marks in a dict; each answer names the worker.
local FRONT2 = [[
local http = require "moonhttp"
http.server{ shared = { ups = "1m" } }
local A, B, C = %q, %q, %q
local g = http.upstream{ servers = { A, B }, shared = "ups", max_fails = 0,
  health = { path = "/health", interval = 0.25, timeout = 0.5, rise = 1, fall = 1 } }
-- the default thresholds: down after 3 failed probes in a row, up after 2 good ones
local g3 = http.upstream{ servers = { C }, shared = "ups", max_fails = 0,
  health = { path = "/health", interval = 0.2, timeout = 0.5 } }
http.handle("/rf/", function(req, res) return http.proxy(req, res, g3) end)
local pid
http.handle("/", function(req, res)
  pid = pid or io.open("/proc/self/stat"):read("n")
  return http.proxy(req, res, g, { response = function(head) head.headers["X-Worker"] = { tostring(pid) } end })
end)
]]

local function free_addr()
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return "127.0.0.1:" .. port
end

local function node_of(res) return res and res.headers["x-node"] end

local function set(node, query) assert.equal(200, H.request(node.port, "POST", "/_set?" .. query, nil, "").status) end
local function stats(node) return cjson.decode(H.request(node.port, "GET", "/_stats").body) end

for _, mode in ipairs({ "hook", "plain" }) do
describe("http.upstream (" .. mode .. " path)", function()
  local a, b, c, up, front
  setup(function()
    up = H.upstream()
    a = H.start(NODE:format("a"))
    b = H.start(NODE:format("b"))
    c = H.start(NODE:format("c"))
    front = H.start(FRONT:format("127.0.0.1:" .. a.port, "127.0.0.1:" .. b.port, "127.0.0.1:" .. c.port,
      free_addr(), free_addr(), "127.0.0.1:" .. up.port, tostring(mode == "hook")))
  end)
  teardown(function()
    for _, s in ipairs({ front, a, b, c, up }) do if s then s:stop() end end
  end)

  it("spreads requests by weight, smoothly (2:1 gives b a b, not b b a)", function()
    local seq = {}
    for i = 1, 6 do
      local r = front:get("/rr/x")
      assert.equal(200, r.status)
      seq[i] = node_of(r)
    end
    assert.equal("babbab", table.concat(seq))
  end)

  it("least_conn sends to the server with fewer requests in flight", function()
    local hold = H.connect(front.port)
    assert(hold:send("GET /lc/hold HTTP/1.1\r\nHost: x\r\n\r\n"))
    H.sleep(0.2)
    local seen = {}
    for _ = 1, 4 do seen[#seen + 1] = node_of(front:get("/lc/x")) end
    local held = node_of(hold:read_response())
    hold:close()
    assert.truthy(held)
    for _, n in ipairs(seen) do assert.not_equal(held, n) end
  end)

  it("hash(header:X-User) keeps a user on one server and spreads users", function()
    local nodes = {}
    for u = 1, 12 do
      local first
      for _ = 1, 3 do
        local n = node_of(front:get("/hash/x", { ["X-User"] = "user" .. u }))
        assert.truthy(n)
        first = first or n
        assert.equal(first, n)
      end
      nodes[first] = true
    end
    local distinct = 0
    for _ in pairs(nodes) do distinct = distinct + 1 end
    assert.is_true(distinct >= 2)
  end)

  it("hash: when a server goes down only its keys move", function()
    local function map()
      local m = {}
      for u = 1, 24 do m[u] = node_of(front:get("/hash2/x", { ["X-User"] = "user" .. u })) end
      return m
    end
    local before = map()
    set(c, "status=502")
    local after = map() -- c's users: 502, retried on the next server of the ring; c marked down
    local again = map()
    set(c, "status=200")
    local moved = 0
    for u = 1, 24 do
      if before[u] == "c" then
        moved = moved + 1
        assert.not_equal("c", again[u])
      else
        assert.equal(before[u], after[u])
        assert.equal(before[u], again[u])
      end
    end
    assert.is_true(moved > 0)
  end)

  it("skips a server that refuses and retries the request on the next", function()
    for _ = 1, 4 do
      local r = front:get("/refused/x")
      assert.equal(200, r.status)
      assert.equal("a", node_of(r))
    end
  end)

  it("group:fetch retries a refused server too", function()
    for _ = 1, 2 do
      local r = front:get("/fetch")
      assert.equal(200, r.status)
      assert.equal("b b GET /via-fetch", r.body)
    end
  end)

  it("a server that stalls gives 504, retried on the next only when timeout is listed", function()
    local t0 = H.now()
    local r = front:get("/stall1/stall-a")
    assert.equal(504, r.status)
    assert.equal("gateway timeout\n", r.body)
    assert.is_true(H.now() - t0 < 3)
    r = front:get("/stall2/stall-a")
    assert.equal(200, r.status)
    assert.equal("b", node_of(r))
  end)

  it("all servers down: 503 no healthy upstream, and the app may replace the body", function()
    assert.equal(502, front:get("/down/x").status) -- both refuse: now both are marked down
    local r = front:get("/down/x")
    assert.equal(503, r.status)
    assert.equal("no healthy upstream\n", r.body)
    front:get("/downjson/x")
    r = front:get("/downjson/x")
    assert.equal(503, r.status)
    local j = cjson.decode(r.body)
    assert.same({ status = 503, kind = "unavailable", detail = "no healthy upstream" }, j)
  end)

  it("max_fails failures within fail_timeout mark a server down, back after fail_timeout", function()
    set(b, "status=502")
    local seq = {}
    for i = 1, 4 do seq[i] = front:get("/passive/x").status end
    assert.same({ 200, 502, 200, 502 }, seq) -- a, b, a, b: b failed twice
    set(b, "reset=1")
    for _ = 1, 4 do assert.equal("a", node_of(front:get("/passive/x"))) end
    assert.equal(0, stats(b).hits)
    set(b, "status=200")
    H.sleep(1.2)
    local seen = {}
    for _ = 1, 4 do seen[node_of(front:get("/passive/x"))] = true end
    assert.is_true(seen.a and seen.b)
  end)

  it("retries.timeout: no new try once that long has passed since the first", function()
    local function hits() return stats(a).hits + stats(b).hits + stats(c).hits end
    for _, n in ipairs({ a, b, c }) do set(n, "reset=1") end
    local t0 = H.now()
    local r = front:get("/budget/hold") -- each node holds 1.5 s: every try times out (0.5 s)
    local took = H.now() - t0
    assert.equal(504, r.status) -- the last failure's mapping
    assert.equal(2, hits()) -- tries at 0 and 0.5 s; none at 1.0 s (past 0.7 s)
    assert.is_true(took < 1.4, "took " .. took)
    for _, n in ipairs({ a, b, c }) do set(n, "reset=1") end
    r = front:get("/nobudget/hold")
    assert.equal(504, r.status)
    assert.equal(3, hits()) -- without a budget all three tries go out
  end)

  it("a listed status is retried on the next server; the last one's answer goes out", function()
    set(a, "status=503&reset=1")
    set(b, "status=503&reset=1")
    local r = front:get("/allbad/x")
    set(a, "status=200")
    set(b, "status=200")
    assert.equal(503, r.status)
    assert.equal("b GET /x", r.body)
    assert.equal(1, stats(a).hits)
    assert.equal(1, stats(b).hits)
  end)

  it("does not retry a POST unless idempotent_only = false, nor a request with a body", function()
    assert.equal(502, front:request("POST", "/post/x").status) -- DEAD first, not retried
    assert.equal(200, front:request("POST", "/post/x").status) -- then a
    local r = front:request("POST", "/postany/x")
    assert.equal(200, r.status)
    assert.equal("a POST /x", r.body)
    assert.equal(502, front:request("POST", "/postbody/x", nil, "payload").status)
  end)

  it("resolves a server's host name (through the client's resolver cache)", function()
    local r = front:get("/dns/x")
    assert.equal(200, r.status)
    assert.equal("a", node_of(r))
  end)

  it("keeps idle connections per server (keepalive = 0 keeps none)", function()
    -- spec/servers/upstream.lua answers fixed paths: only a hook can strip the prefix
    if mode ~= "hook" then return end
    local function conns(prefix)
      assert.equal(200, H.request(up.port, "GET", "/_reset").status)
      for _ = 1, 5 do assert.equal(200, front:get(prefix .. "small").status) end
      return tonumber(H.request(up.port, "GET", "/_count").body)
    end
    assert.equal(1, conns("/ka/"))
    assert.equal(5, conns("/noka/"))
  end)

  it("rejects bad groups with a clear error", function()
    local cases = {
      { "servers = {}", "servers must be a non%-empty list" },
      { "servers = { 'nope' }", "servers%[1%] must be" },
      { "servers = { { addr = '127.0.0.1:1', weight = 0 } }", "weight must be an integer" },
      { "servers = { '127.0.0.1:1' }, balance = 'random'", "balance must be" },
      { "servers = { '127.0.0.1:1' }, retries = { on = { 'oops' } }", "unknown condition oops" },
      { "servers = { '127.0.0.1:1' }, helth = {}", "helth" },
      { "servers = { '127.0.0.1:1' }, health = { path = 'x' }", "health.path must be" },
      { "servers = { '127.0.0.1:1' }, health = { path = '/h', fall = 0 }", "health.fall must be an integer" },
      { "servers = { '127.0.0.1:1' }, retries = { timeout = 'x' }", "retries.timeout must be" },
      { "servers = { '127.0.0.1:1' }, shared = 'nope'", 'shared dict "nope" is not declared' },
    }
    for _, case in ipairs(cases) do
      local code, out = H.run({ "--check", H.script("local http = require 'moonhttp'\nhttp.upstream{ "
        .. case[1] .. " }\n") })
      assert.not_equal(0, code)
      assert.truthy(out:match(case[2]), out)
      assert.truthy(out:match("%.lua:2"), out) -- the error points at the user's line
    end
    -- a dict declared after the group, or on the command line, is found
    local code, out = H.run({ "--check", H.script("local http = require 'moonhttp'\n"
      .. "http.upstream{ servers = { '127.0.0.1:1' }, shared = 'late' }\nhttp.server{ shared = { late = '1m' } }\n") })
    assert.equal(0, code, out)
    code, out = H.run({ "--check", "--shared", "cli=1m", H.script("local http = require 'moonhttp'\n"
      .. "http.upstream{ servers = { '127.0.0.1:1' }, shared = 'cli' }\n") })
    assert.equal(0, code, out)
  end)
end)
end

describe("http.upstream health checks across workers", function()
  local a, b, c, front
  setup(function()
    a = H.start(NODE:format("a"))
    b = H.start(NODE:format("b"))
    c = H.start(NODE:format("c"))
    front = H.start(FRONT2:format("127.0.0.1:" .. a.port, "127.0.0.1:" .. b.port, "127.0.0.1:" .. c.port),
      { flags = { "--workers", "2" } })
  end)
  teardown(function()
    for _, s in ipairs({ front, a, b, c }) do if s then s:stop() end end
  end)

  -- Polls the one-server group every 40 ms until its answer is `status`; the
  -- node's probe count then (probes since the last reset).
  local function probes_until(status, limit)
    local t0 = H.now()
    while H.now() - t0 < limit do
      if front:get("/rf/x").status == status then return stats(c).probes end
      H.sleep(0.04)
    end
    error("no " .. status .. " within " .. limit .. " s")
  end

  it("marks a server down after fall failed probes in a row, up after rise good ones", function()
    H.sleep(0.5)
    -- two failed probes (fewer than fall = 3) never take it out
    set(c, "fail=2&reset=1")
    local t0 = H.now()
    while H.now() - t0 < 1.2 do
      assert.equal(200, front:get("/rf/x").status)
      H.sleep(0.04)
    end
    set(c, "health=500&reset=1")
    local n = probes_until(503, 3)
    assert.is_true(n >= 3, "down after " .. n .. " probes")
    set(c, "health=200&reset=1")
    n = probes_until(200, 3)
    assert.is_true(n >= 2, "up after " .. n .. " probes")
  end)

  it("probes each server from one worker and every worker sees its marks", function()
    H.sleep(0.5)
    set(a, "reset=1")
    H.sleep(2)
    -- one prober every 0.25 s: about 8 in 2 s; one per worker would be about 16
    local probes = stats(a).probes
    assert.is_true(probes >= 3 and probes <= 11, "probes in 2 s: " .. probes)
    set(a, "health=500")
    H.sleep(0.8)
    local workers, n = {}, 0
    for _ = 1, 300 do
      local r = front:get("/x")
      assert.equal(200, r.status)
      assert.equal("b", node_of(r))
      if not workers[r.headers["x-worker"]] then workers[r.headers["x-worker"]] = true; n = n + 1 end
      if n == 2 then break end
    end
    assert.equal(2, n) -- both workers answered, both sent only to b
    set(a, "health=200")
    H.sleep(0.8)
    local seen = {}
    for _ = 1, 6 do seen[node_of(front:get("/x"))] = true end
    assert.is_true(seen.a and seen.b)
  end)
end)
