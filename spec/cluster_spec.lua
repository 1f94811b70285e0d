-- One app across several servers (http.server{ cluster = ... }) through the
-- real binary and one real redis-server: three instances of two workers each
-- list one another (http.cluster.instances()); an http.every and an
-- http.on_start of { once = "cluster" } run on one worker of one instance,
-- with a fencing token; kill -9 of the holding instance: the jobs run on
-- another within the lease time, with a larger token, and the dead instance
-- leaves the list within its TTL; a stopped instance gives its leases back
-- and leaves the list at once. And the setting's refusals.
local H = require "helper"
local O = require "ops_helper"
local C = require "helpers.cluster"

local LEASE, TTL = 2, 2

local function app(port)
  return string.format([[
local http = require "moonhttp"
http.server{ cluster = { redis = "redis://127.0.0.1:%d/0", name = "lobby", lease = %d, heartbeat = 0.25, ttl = %d } }
local function pid() return math.tointeger(io.open("/proc/self/stat"):read("n")) end
local function note(file, ...)
  local f = io.open(os.getenv("NOTES") .. file, "a")
  f:write(table.concat({ ... }, " "), "\n")
  f:close()
end
http.on_start(function()
  http.every(0.1, function(token, what)
    note(".ticks", pid(), token, string.format("%%.3f", http.now()), what)
  end, { once = "cluster" }, "tick")
end)
http.on_start(function(token)
  note(".starts", pid(), token, string.format("%%.3f", http.now()))
  while http.sleep(0.1) do end
end, { once = "cluster" })
http.handle("GET /metrics", http.metrics_handler())
http.handle("GET /instances", function(req, res)
  local list, err = assert(http.cluster.instances())
  local ids = {}
  for _, i in ipairs(list) do ids[#ids + 1] = i.id .. "=" .. i.pid end
  res:write(table.concat(ids, " "))
end)
]], port, LEASE, TTL)
end

-- The lines of a notes file as lists of fields (numbers converted).
local function lines(path)
  local out = {}
  for line in (H.read_file(path) or ""):gmatch("[^\n]+") do
    local t = {}
    for f in line:gmatch("%S+") do t[#t + 1] = tonumber(f) or f end
    out[#out + 1] = t
  end
  return out
end

local redis_cli = C.redis_cli

describe("a cluster of three instances", function()
  local fx = C.fixture()

  -- One script file for the three, as a deploy has: a job's key is its file's name and line.
  local function start_three()
    local script = H.script(app(fx.redis.port))
    for i = 1, 3 do
      fx.servers[i] = H.start(script, { flags = { "--workers", "2" }, env = "NOTES=" .. fx.notes })
    end
    for i = 1, 3 do
      assert.truthy(O.wait_for(function() return #O.children(fx.servers[i].pid) == 2 end, 5))
    end
  end

  -- The instance whose worker is pid.
  local function instance_of(pid)
    for i, s in ipairs(fx.servers) do
      for _, w in ipairs(O.children(s.pid)) do if w == pid then return i end end
    end
  end

  local function instances(srv)
    local res = srv:get("/instances")
    assert.equal(200, res.status, res.body)
    local pids = {}
    for pid in res.body:gmatch("=(%d+)") do pids[#pids + 1] = tonumber(pid) end
    table.sort(pids)
    return table.concat(pids, " ")
  end

  local function pids_of(list)
    local t = {}
    for _, s in ipairs(list) do t[#t + 1] = s.pid end
    table.sort(t)
    return table.concat(t, " ")
  end

  it("run once-jobs on one worker, and on another within the lease after kill -9 of its instance", function()
    start_three()
    assert.truthy(O.wait_for(function() return instances(fx.servers[1]) == pids_of(fx.servers) end, 5),
      instances(fx.servers[1]))
    assert.equal(pids_of(fx.servers), instances(fx.servers[3]))
    H.sleep(1)
    -- one holder: every tick of the last half second from one worker, with one token
    local ticks = lines(fx.notes .. ".ticks")
    assert.is_true(#ticks >= 5, #ticks .. " ticks")
    local holder, token = ticks[#ticks][1], ticks[#ticks][2]
    for i = #ticks, 1, -1 do
      if ticks[i][3] < ticks[#ticks][3] - 0.5 then break end
      assert.same({ holder, token, "tick" }, { ticks[i][1], ticks[i][2], ticks[i][4] })
    end
    local starts = lines(fx.notes .. ".starts")
    assert.equal(1, #starts, "the on_start job started " .. #starts .. " times")
    local victim = assert(instance_of(holder), "the holder is no worker of the three")
    local start_victim = assert(instance_of(starts[1][1]))

    -- kill -9 of the holding instance, master and workers
    local dead = fx.servers[victim]
    local pids = O.children(dead.pid)
    local killed_at = H.now()
    os.execute("kill -9 " .. dead.pid .. " " .. table.concat(pids, " "))
    assert.truthy(O.wait_for(function()
      local t = lines(fx.notes .. ".ticks")
      return t[#t][1] ~= holder
    end, LEASE + 3), "nobody took the every job over")
    local took = H.now() - killed_at
    ticks = lines(fx.notes .. ".ticks")
    local new = ticks[#ticks]
    assert.is_true(new[2] > token, "the new holder's token " .. new[2] .. " is not past " .. token)
    assert.are_not.equal(victim, instance_of(new[1]))
    assert.is_true(took < LEASE + 1.5, string.format("taken over after %.2f s (lease %d s)", took, LEASE))
    -- the dead ones' ticks ended before the new holder's began: never two at once
    local last_old, first_new
    for _, t in ipairs(ticks) do
      if t[1] == holder then last_old = t[3] end
      if t[1] == new[1] and t[2] == new[2] and not first_new then first_new = t[3] end
    end
    assert.is_true(first_new > last_old)

    if start_victim == victim then -- the on_start job died with it: it starts again elsewhere
      assert.truthy(O.wait_for(function() return #lines(fx.notes .. ".starts") == 2 end, LEASE + 3))
      starts = lines(fx.notes .. ".starts")
      assert.is_true(starts[2][2] > starts[1][2])
      assert.are_not.equal(victim, instance_of(starts[2][1]))
    end

    -- the dead instance leaves the list within its TTL
    local alive = {}
    for i, s in ipairs(fx.servers) do if i ~= victim then alive[#alive + 1] = s end end
    assert.truthy(O.wait_for(function() return instances(alive[1]) == pids_of(alive) end, TTL + 2),
      instances(alive[1]))
    dead.stopped = true
  end)

  -- Scripts run by redis-server so far (EVAL and EVALSHA: every heartbeat and lease bid is one).
  local function scripts_run()
    local n = 0
    for calls in redis_cli(fx.redis.port, "INFO commandstats"):gmatch("cmdstat_eval%a*:calls=(%d+)") do
      n = n + tonumber(calls)
    end
    return n
  end

  it("talk to Redis from one worker per instance, another when it dies", function()
    local srv = H.start(H.script(app(fx.redis.port)), { flags = { "--workers", "4" }, env = "NOTES=" .. fx.notes })
    fx.servers[1] = srv
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 4 end, 5))
    assert.truthy(O.wait_for(function() return #lines(fx.notes .. ".ticks") > 5 end, 5))
    -- One beat each 0.25 s and a renewal of the every job's lease each LEASE/3 s, from
    -- one worker: 4 + 1.5 a second. Each of 4 workers beating and bidding for the lease
    -- each 0.1 s would be 16 + 30.
    local before = scripts_run()
    H.sleep(2)
    local per_second = (scripts_run() - before) / 2
    assert.is_true(per_second < 9, per_second .. " scripts a second")
    -- kill -9 of the job's worker: another takes over the job, the instance beats on
    local holder = lines(fx.notes .. ".ticks")
    holder = holder[#holder][1]
    os.execute("kill -9 " .. holder)
    assert.truthy(O.wait_for(function()
      local t = lines(fx.notes .. ".ticks")
      return t[#t][1] ~= holder
    end, LEASE + 3), "no other worker took the every job over")
    H.sleep(TTL + 0.5)
    assert.truthy(srv:get("/instances").body:find("=" .. srv.pid, 1, true))
  end)

  it("give leases back and leave the list when an instance stops", function()
    start_three()
    assert.truthy(O.wait_for(function()
      return #lines(fx.notes .. ".ticks") > 3 and #lines(fx.notes .. ".starts") == 1
    end, 5))
    local ticks = lines(fx.notes .. ".ticks")
    local victim = assert(instance_of(ticks[#ticks][1]))
    local srv = fx.servers[victim]
    local owner_prefix = "[^ ]*:" .. srv.pid .. "/"
    -- its logs and metrics name it
    local id = srv:get("/instances").body:match("(%S+)=" .. srv.pid)
    assert.truthy(srv:get("/metrics").body:find('cluster_instance{cluster="lobby",instance="' .. id .. '"} 1', 1, true))
    assert.truthy(srv:logtext():find("%[info%] %d+ lobby/" .. id:gsub("%p", "%%%0") .. ": listening on"), srv:logtext())
    assert.equal(0, srv:stop())
    -- at once, not after the lease's or the TTL's time
    local leases = redis_cli(fx.redis.port, "--scan --pattern 'moonhttp:cluster:lobby:lease:*'")
    for key in leases:gmatch("%S+") do
      local holder = redis_cli(fx.redis.port, "GET '" .. key .. "'")
      assert.falsy(holder:find(owner_prefix), "the stopped instance still holds " .. key .. ": " .. holder)
    end
    local listed = redis_cli(fx.redis.port, "ZRANGE moonhttp:cluster:lobby:instances 0 -1")
    assert.falsy(listed:find(":" .. srv.pid, 1, true), listed)
  end)
end)

describe("the cluster setting", function()
  local rows = {
    { '{ redis = "redis://h", name = "x", leese = 5 }', 'unknown option "leese" (did you mean "lease"?)' },
    { '{ redis = "redis://h" }', "cluster.name must be" },
    { '{ redis = "http://h", name = "x" }', "cluster.redis: expected redis://" },
    { '{ name = "x" }', "cluster.redis must be a redis:// URL" },
    { '{ redis = "redis://h", name = "x", heartbeat = 2, ttl = 1 }', "ttl must be longer" },
    { '"redis://h"', "cluster must be a table" },
    { '{ redis = "redis://h", name = "x", heartbeat = 0 }', "cluster: heartbeat must be a number of seconds > 0" },
    { '{ redis = "redis://h", name = "x", lease = -1 }', "cluster: lease must be a number of seconds > 0" },
  }
  for _, row in ipairs(rows) do
    it("refuses cluster = " .. row[1], function()
      local path = H.script("local http = require 'moonhttp'\nhttp.server{ cluster = " .. row[1] .. " }\n")
      local code, out = H.run({ "--check", path })
      assert.are_not.equal(0, code)
      assert.truthy(out:find(path .. ":2:", 1, true), out)
      assert.truthy(out:find(row[2], 1, true), out)
    end)
  end

  it("is a setting: a misspelling names it, the command line refuses it, --help lists it", function()
    local path = H.script("local http = require 'moonhttp'\nhttp.server{ clustr = { name = 'x' } }\n")
    local code, out = H.run({ "--check", path })
    assert.are_not.equal(0, code)
    assert.truthy(out:find(path .. ':2: http.server: unknown setting "clustr" (did you mean "cluster"?)', 1, true), out)
    code, out = H.run({ "--check", "--cluster", "x", H.script("local http = require 'moonhttp'\n") })
    assert.are_not.equal(0, code)
    assert.truthy(out:find("cluster: set it in the script", 1, true), out)
    code, out = H.run({ "--help" })
    assert.truthy(out:find("--cluster", 1, true), out)
  end)

  it("leaves { once = \"cluster\" } jobs local without a cluster", function()
    local srv = H.start([[
local http = require "moonhttp"
local n = 0
http.on_start(function() n = n + 1 end, { once = "cluster" })
http.handle("GET /", function(req, res) res:write(tostring(n)) end)
]])
    finally(function() srv:stop() end)
    assert.equal("1", srv:get("/").body)
  end)
end)
