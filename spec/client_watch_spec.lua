-- The client's pooled connection keeps its read watcher across exchanges
-- (src/client/client_pool.c mh_client_conn_set_io, client.c
-- update_read_interest): a keep-alive exchange costs no epoll_ctl, and a
-- connection the server closes while the exchange still holds it is neither
-- reused nor left spinning on its level-triggered readiness.
local H = require "helper"
local O = require "ops_helper"
local cjson = require "cjson"

local FRONT = [[
local http = require "moonhttp"
local UP = %q
local c = http.client()
local function cpu()
  local f = assert(io.open("/proc/self/stat"))
  local stat = f:read("a")
  f:close()
  local fields = {}
  for x in stat:match("%%) (.*)"):gmatch("%%S+") do fields[#fields + 1] = x end
  return (tonumber(fields[12]) + tonumber(fields[13])) / 100
end
http.handle("/many", function(req, res)
  local n = tonumber(req.query:match("n=(%%d+)"))
  for _ = 1, n do
    local r = assert(c:fetch(UP .. "/small"))
    assert(r:body())
  end
  res:json(c:stats())
end)
http.handle("/hold", function(req, res)
  local r = assert(c:fetch(UP .. "/thenclose"))
  local c0 = cpu()
  http.sleep(0.6) -- the upstream closes 0.1 s after its answer, while r holds the connection
  local used = cpu() - c0
  local body = r:body()
  local r2, err = c:fetch(UP .. "/small")
  res:json({ used = used, body = #body, second = r2 and r2.status or err, stats = c:stats() })
end)
]]

describe("client watcher", function()
  local up, front
  setup(function()
    up = H.upstream()
    front = H.start(string.format(FRONT, up.base))
  end)
  teardown(function()
    if front then front:stop() end
    if up then up:stop() end
  end)

  -- The watcher kept armed: no epoll_ctl per exchange. A fetch's task is
  -- woken through the run queue (lua_sched.c mh_task_wake), not a 0 s timer
  -- that cost an epoll_wait of its own, and an idle connection is taken
  -- without a MSG_PEEK (client_pool.c): one poll per exchange, no recvfrom
  -- at all (the client reads with read).
  it("costs no epoll_ctl, one epoll_wait and no recvfrom per keep-alive exchange", function()
    if not O.need_strace() then return end
    local res = H.request(front.port, "GET", "/many?n=5")
    assert.equal(200, res.status, res.body)
    local n = 200
    local counts, _, summary = O.syscalls(front.pid, "epoll_ctl,epoll_wait,recvfrom", function()
      res = H.request(front.port, "GET", "/many?n=" .. n)
    end)
    assert.equal(200, res.status, res.body)
    local stats = cjson.decode(res.body)
    assert.equal(1, stats.dials) -- one connection, reused throughout
    local function per(name, bound, before)
      assert.is_true(counts[name] < bound, string.format("%d %s for %d exchanges (before: %s):\n%s",
        counts[name], name, n, before, summary))
    end
    per("epoll_ctl", n / 10, "two per exchange, the watcher re-set at the write and re-armed at the park")
    per("epoll_wait", n * 1.25, "two per exchange, a wait for the answer and a zero-timeout one for the wake")
    per("recvfrom", 1, "one per exchange, the pool's peek")
  end)

  it("does not reuse or spin on a connection closed while held", function()
    local res = H.request(front.port, "GET", "/hold")
    assert.equal(200, res.status, res.body)
    local t = cjson.decode(res.body)
    assert.equal(200, t.second)
    assert.is_true(t.body > 0)
    assert.is_true(t.used < 0.1, "CPU seconds while holding: " .. t.used)
    assert.equal(0, t.stats.retries) -- not parked, so not taken again: a fresh dial
  end)
end)
