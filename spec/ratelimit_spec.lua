-- moonhttp.ratelimit through the real binary: the headers of
-- draft-ietf-httpapi-ratelimit-headers row by row, one limit held across
-- the two workers of a server (shared dict) and across three servers of two
-- workers each (one redis-server), a script Redis forgot (NOSCRIPT), and
-- redis-server stopped (SIGSTOP): fail open or closed within the timeout.
local H = require "helper"
local O = require "ops_helper"

-- A limit of 10 a second per key; the route answers the worker's pid, so a
-- spec can see that every worker (and every server) took part.
local function app(backend)
  return [[
local http = require "moonhttp"
local ratelimit = require "moonhttp.ratelimit"
http.server{ shared = { ratelimit = "1m" } }
local function pid() return tostring(io.open("/proc/self/stat"):read("n")) end
local function hello(req, res) res:write(pid()) end
http.use(function(next) return function(req, res) res:header("X-Pid", pid()); return next(req, res) end end)
http.group("/ten"):use(ratelimit.middleware{ limit = 10, window = 1, ]] .. backend .. [[,
  key = function(req) return req:arg("k") end }):handle("/", hello)
http.group("/three"):use(ratelimit.middleware{ limit = 3, window = 10, ]] .. backend .. [[,
  name = "per-key", key = function(req) return req:arg("k") end }):handle("/", hello)
http.group("/open"):use(ratelimit.middleware{ limit = 10, window = 1, timeout = 0.3, fail = "open",
  ]] .. backend .. [[ }):handle("/", hello)
http.group("/closed"):use(ratelimit.middleware{ limit = 10, window = 1, timeout = 0.3, fail = "closed",
  ]] .. backend .. [[ }):handle("/", hello)
]]
end

-- One request on each of the servers' connections at once (n per server); returns the responses.
local function burst(servers, path, n)
  local conns = {}
  for _, srv in ipairs(servers) do
    for _ = 1, n do
      local c = srv:connect()
      assert(c:send("GET " .. path .. " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
      conns[#conns + 1] = c
    end
  end
  local out = {}
  for i, c in ipairs(conns) do
    out[i] = assert(c:read_response())
    c:close()
  end
  return out
end

-- Sends bursts to the servers for `seconds`; returns how many were let through, the
-- seconds from the first request to the last answer, the pids that answered and how many were refused.
local function hammer(servers, key, seconds)
  local allowed, refused, pids = 0, 0, {}
  local t0 = H.now()
  repeat
    for _, res in ipairs(burst(servers, "/ten/?k=" .. key, 4)) do
      pids[res.headers["x-pid"]] = true
      if res.status == 200 then
        allowed = allowed + 1
      else
        assert.equal(429, res.status, res.body)
        refused = refused + 1
      end
    end
  until H.now() - t0 >= seconds
  return allowed, H.now() - t0, pids, refused
end

local function count(set)
  local n = 0
  for _ in pairs(set) do n = n + 1 end
  return n
end

-- GCRA's bound: over any d seconds at most the burst (10) plus d × the rate (10/s) pass, and
-- a client that keeps asking gets all of it, less what came back after its last request.
local function assert_holds(allowed, elapsed, refused)
  local most = 10 + math.floor(elapsed * 10) + 1
  local least = 10 + math.floor(elapsed * 10) - 2
  assert.is_true(allowed <= most, string.format("%d passed in %.2f s (at most %d)", allowed, elapsed, most))
  assert.is_true(allowed >= least, string.format("%d passed in %.2f s (at least %d)", allowed, elapsed, least))
  assert.is_true(refused > 0)
end

-- The answers of /three (3 per 10 s), in order: status, RateLimit, Retry-After.
local HEADER_ROWS = {
  { 200, '"per-key";r=2;t=4', nil },
  { 200, '"per-key";r=1;t=4', nil },
  { 200, '"per-key";r=0;t=4', nil },
  { 429, '"per-key";r=0;t=4', "4" },
  { 429, '"per-key";r=0;t=4', "4" },
}

local function check_header_rows(srv, key)
  for i, row in ipairs(HEADER_ROWS) do
    local res = srv:get("/three/?k=" .. key)
    local where = "request " .. i .. ": " .. (res.body or "")
    assert.equal(row[1], res.status, where)
    assert.equal('"per-key";q=3;w=10', res.headers["ratelimit-policy"], where)
    assert.equal(row[2], res.headers["ratelimit"], where)
    assert.equal(row[3], res.headers["retry-after"], where)
  end
  -- another key has its own quota
  assert.equal(200, srv:get("/three/?k=other-" .. key).status)
end

describe("moonhttp.ratelimit, local backend (shared dict)", function()
  local srv
  after_each(function() if srv then srv:stop() end end)

  it("answers the RateLimit headers and Retry-After row by row", function()
    srv = H.start(app('dict = "ratelimit"'))
    check_header_rows(srv, "rows")
  end)

  it("holds 10/s per key across two workers", function()
    srv = H.start(app('dict = "ratelimit"'), { flags = { "--workers", "2" } })
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    local allowed, elapsed, pids, refused = hammer({ srv }, "two-workers", 1.5)
    assert_holds(allowed, elapsed, refused)
    assert.equal(2, count(pids), "both workers answered")
  end)
end)

describe("moonhttp.ratelimit, Redis backend", function()
  local redis, servers = nil, {}
  setup(function() redis = H.redis() end)
  teardown(function() redis:stop() end)
  after_each(function()
    for _, s in ipairs(servers) do s:stop() end
    servers = {}
    os.execute("kill -CONT " .. redis.pid .. " 2>/dev/null")
  end)

  local function backend() return string.format('redis = "redis://127.0.0.1:%d/0"', redis.port) end

  -- A command to redis-server from here (RESP over luasocket).
  local function redis_cmd(...)
    local c = H.connect(redis.port)
    local parts = { "*" .. select("#", ...) }
    for _, a in ipairs({ ... }) do parts[#parts + 1] = "$" .. #a .. "\r\n" .. a end
    assert(c:send(table.concat(parts, "\r\n") .. "\r\n"))
    local line = c:read_line()
    c:close()
    return line
  end

  it("answers the same headers as the local backend", function()
    servers[1] = H.start(app(backend()))
    check_header_rows(servers[1], "redis-rows")
  end)

  it("holds 10/s per key across three servers of two workers each", function()
    for i = 1, 3 do servers[i] = H.start(app(backend()), { flags = { "--workers", "2" } }) end
    for i = 1, 3 do
      assert.truthy(O.wait_for(function() return #O.children(servers[i].pid) == 2 end, 5))
    end
    local allowed, elapsed, pids, refused = hammer(servers, "three-servers", 1.5)
    assert_holds(allowed, elapsed, refused)
    assert.is_true(count(pids) >= 3, "only " .. count(pids) .. " workers answered")
  end)

  it("loads the script again after Redis forgot it (NOSCRIPT)", function()
    servers[1] = H.start(app(backend()))
    assert.equal(200, servers[1]:get("/three/?k=flush").status)
    assert.equal("+OK", redis_cmd("SCRIPT", "FLUSH"))
    local res = servers[1]:get("/three/?k=flush")
    assert.equal(200, res.status)
    assert.equal('"per-key";r=1;t=4', res.headers["ratelimit"])
  end)

  it("fails open or closed within its timeout while redis-server is stopped", function()
    servers[1] = H.start(app(backend()))
    local srv = servers[1]
    assert.equal(200, srv:get("/open/").status)
    assert.equal(200, srv:get("/closed/").status)
    os.execute("kill -STOP " .. redis.pid)
    local t0 = H.now()
    local open = srv:get("/open/")
    local open_took = H.now() - t0
    t0 = H.now()
    local closed = srv:get("/closed/")
    local closed_took = H.now() - t0
    -- within the 0.3 s timeout, with room for a loaded machine; not the redis client's 5 s
    assert.equal(200, open.status)
    assert.is_nil(open.headers["ratelimit"])
    assert.is_true(open_took < 1.5, string.format("fail open took %.2f s", open_took))
    assert.equal(503, closed.status)
    assert.equal("1", closed.headers["retry-after"])
    assert.is_true(closed_took < 1.5, string.format("fail closed took %.2f s", closed_took))
    -- the next checks within the backoff do not wait for Redis at all
    t0 = H.now()
    assert.equal(503, srv:get("/closed/").status)
    assert.is_true(H.now() - t0 < 0.25, "a check during the backoff waited")
    assert.truthy(srv:logtext():find("redis: timeout (failing closed", 1, true), srv:logtext())
    os.execute("kill -CONT " .. redis.pid)
    -- counted again once the backoff is over
    local back = O.wait_for(function()
      local res = srv:get("/closed/")
      return res.status == 200 and res.headers["ratelimit"] ~= nil
    end, 5)
    assert.truthy(back, "the limiter did not come back after redis-server resumed")
  end)
end)

describe("moonhttp.ratelimit options", function()
  local rows = {
    { "ratelimit.new{ limt = 10, window = 1 }", 'unknown option "limt" (did you mean "limit"?)' },
    { "ratelimit.new{ limit = 10 }", "window (seconds) must be a number" },
    { "ratelimit.new{ limit = 1.5, window = 1 }", "must be whole numbers" },
    { 'ratelimit.new{ limit = 10, window = 1, fail = "maybe" }', 'fail must be "open" or "closed"' },
    { 'ratelimit.new{ limit = 10, window = 1, redis = "http://x" }', "redis: expected redis://" },
    { 'ratelimit.new{ limit = 10, window = 1, redis = "redis://u:p@h" }', "user name (ACL) is not supported" },
    { 'ratelimit.new{ limit = 10, window = 1, dict = "d", redis = "redis://h" }', "choose one backend" },
    { 'ratelimit.new{ limit = 10, window = 1, name = "a\\"b" }', "name must be" },
    { "ratelimit.middleware{ limit = 10, window = 1, kye = 1 }", 'unknown option "kye" (did you mean "key"?)' },
    { "ratelimit.middleware{ limit = 10, window = 1, key = 1 }", "key must be a function" },
  }
  for _, row in ipairs(rows) do
    it("refuses " .. row[1], function()
      local code, out = H.run_lua("local ratelimit = require 'moonhttp.ratelimit'\n" .. row[1])
      assert.are_not.equal(0, code)
      assert.truthy(out:find(row[2], 1, true), out)
    end)
  end
end)
