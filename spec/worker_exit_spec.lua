-- http.on_worker_exit(fn) (issue 45): when a worker dies (kill -9 here), one
-- surviving worker runs the app's hooks once with { worker, pid, reason }, a
-- hook that raises is logged and the server serves on; a worker's clean exit
-- is not a death to hear of; the hook is registered only while the script loads.
local H = require "helper"
local O = require "ops_helper"

local APP = [[
local http = require "moonhttp"
http.server{ shared = { seen = "1m" } }
local function me() return tostring(io.open("/proc/self/stat"):read("n")) end
http.on_worker_exit(function() error("this hook fails on purpose") end)
http.on_worker_exit(function(info)
  http.sleep(0.01) -- a hook may wait (on Redis, say): it runs as its own light thread
  local seen = http.shared.seen
  assert(seen:incr("calls", 1, 0))
  assert(seen:set("last", ("%s %s %s by %s"):format(info.worker, info.pid, info.reason, me())))
end)
http.handle("GET /me", function(req, res) res:write(me(), " ", http.worker_id()) end)
http.handle("GET /seen", function(req, res)
  res:write(tostring(http.shared.seen:get("calls")), "|", tostring(http.shared.seen:get("last")))
end)
http.handle("GET /misuse", function(req, res)
  local ok, err = pcall(http.on_worker_exit, function() end)
  local ok2, err2 = pcall(http.on_worker_exit, "cleanup")
  res:write(tostring(ok), " ", err, "\n", tostring(ok2), " ", err2)
end)
]]

-- pid -> worker id of both workers, asking until each answered.
local function workers(srv)
  local ids = {}
  assert.truthy(O.wait_for(function()
    local pid, id = srv:get("/me").body:match("^(%d+) (%d+)$")
    ids[pid] = id
    local n = 0
    for p in pairs(ids) do n = n + 1 end
    return n == 2
  end, 5, 0.01), "both workers answered")
  return ids
end

describe("http.on_worker_exit", function()
  it("runs once in a surviving worker after kill -9; a raising hook is logged", function()
    local srv = H.start(APP, { flags = { "--workers", "2" } })
    finally(function() if not srv.stopped then srv:stop() end end)
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    local ids = workers(srv)
    local victim = next(ids)
    local t0 = H.now()
    os.execute("kill -9 " .. victim)
    local seen
    assert.truthy(O.wait_for(function()
      seen = srv:get("/seen").body
      return seen ~= "nil|nil"
    end, 1, 0.02), "no hook ran within 1 s")
    local took = H.now() - t0
    local calls, worker, pid, reason, by = seen:match("^(%d+)|(%d+) (%d+) (.-) by (%d+)$")
    assert.equal("1", calls, seen)
    assert.equal(ids[victim], worker)
    assert.equal(victim, pid)
    assert.equal("killed by signal 9", reason)
    assert.are_not.equal(victim, by)
    -- exactly once: no other worker (the survivor, the replacement) runs it again
    H.sleep(0.5)
    assert.equal(seen, srv:get("/seen").body)
    assert.truthy(srv:logtext():find(("http.on_worker_exit: the hook raised for worker %s (pid %s): ")
      :format(worker, victim), 1, true), srv:logtext())
    assert.truthy(srv:logtext():find("this hook fails on purpose", 1, true))
    assert.equal(200, srv:get("/me").status)
    print(("kill -9 of worker %s: its exit hook ran in %.3f s"):format(worker, took))
    assert.equal(0, srv:stop())
  end)

  it("does not run for a worker's clean exit, and registers only while the script loads", function()
    local srv = H.start(APP, { flags = { "--workers", "2" } })
    finally(function() if not srv.stopped then srv:stop() end end)
    assert.equal("false http.on_worker_exit: only while the script loads\n"
      .. "false http.on_worker_exit: expected a function",
      (srv:get("/misuse").body:gsub("[^\n ]*:%d+: ", "")))
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    local victim = next(workers(srv))
    os.execute("kill -TERM " .. victim) -- it stops cleanly; the master replaces it
    assert.truthy(O.wait_for(function()
      local kids = O.children(srv.pid)
      return #kids == 2 and tostring(kids[1]) ~= victim and tostring(kids[2]) ~= victim
    end, 5))
    H.sleep(0.5)
    assert.equal("nil|nil", srv:get("/seen").body)
    assert.equal(0, srv:stop())
  end)
end)
