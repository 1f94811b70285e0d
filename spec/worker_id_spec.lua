-- http.worker_id(): a worker's slot number, 1..workers, kept by the worker
-- that replaces it (a restart after a crash, a SIGHUP reload), and nil
-- while the script loads (in the master, before the fork).
local H = require "helper"
local O = require "ops_helper"

local APP = [[
local http = require "moonhttp"
local at_load = http.worker_id()
local at_start
http.on_start(function() at_start = http.worker_id() end)
http.handle("GET /id", function(req, res)
  res:write(io.open("/proc/self/stat"):read("n"), " ", tostring(http.worker_id()), " ",
    tostring(at_start), " ", tostring(at_load))
end)
]]

-- Asks new connections (the kernel picks a worker by a hash of each) until
-- `n` workers answered; returns { [pid] = { id =, at_start =, at_load = } }.
local function ids_by_pid(srv, n)
  local seen, count = {}, 0
  O.wait_for(function()
    local body = srv:try_get("/id")
    local pid, id, at_start, at_load = (body or ""):match("^(%d+) (%S+) (%S+) (%S+)$")
    if pid and not seen[pid] then
      seen[pid] = { id = id, at_start = at_start, at_load = at_load }
      count = count + 1
    end
    return count >= n
  end, 10, 0)
  return seen, count
end

-- The pid answering as worker `id` in `seen`.
local function pid_of(seen, id)
  for pid, w in pairs(seen) do
    if w.id == id then return pid end
  end
end

describe("http.worker_id() with --workers 2", function()
  local srv
  before_each(function()
    srv = H.start(H.script(APP), { flags = { "--workers", "2" } })
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
  end)
  after_each(function()
    if not srv.stopped then assert.equal(0, srv:stop()) end
  end)

  it("numbers the workers 1 and 2, in handlers and on_start; nil while loading", function()
    local seen, n = ids_by_pid(srv, 2)
    assert.equal(2, n)
    local ids = {}
    for _, w in pairs(seen) do
      ids[#ids + 1] = w.id
      assert.equal(w.id, w.at_start)
      assert.equal("nil", w.at_load) -- the load ran once, in the master
    end
    table.sort(ids)
    assert.same({ "1", "2" }, ids)
  end)

  it("gives a worker restarted after SIGKILL its slot's number", function()
    local before = ids_by_pid(srv, 2)
    local one, two = pid_of(before, "1"), pid_of(before, "2")
    assert.truthy(one and two)
    os.execute("kill -9 " .. one)
    assert.truthy(O.wait_for(function()
      local kids = O.children(srv.pid)
      return #kids == 2 and kids[1] ~= tonumber(one) and kids[2] ~= tonumber(one)
    end, 5), srv:logtext())
    local after, n = ids_by_pid(srv, 2)
    assert.equal(2, n)
    assert.equal(two, pid_of(after, "2")) -- the other worker is untouched
    local new = pid_of(after, "1")
    assert.truthy(new and new ~= one, "slot 1's new worker answers as 1")
    assert.equal("1", after[new].at_start)
  end)

  it("keeps the numbers 1 and 2 across a SIGHUP reload", function()
    local before = ids_by_pid(srv, 2)
    srv:signal("HUP")
    assert.truthy(O.wait_for(function()
      local kids = O.children(srv.pid)
      return #kids == 2 and not before[tostring(kids[1])] and not before[tostring(kids[2])]
    end, 10), srv:logtext())
    local after, n = ids_by_pid(srv, 2)
    assert.equal(2, n)
    local ids = {}
    for pid, w in pairs(after) do
      assert.is_nil(before[pid])
      ids[#ids + 1] = w.id
    end
    table.sort(ids)
    assert.same({ "1", "2" }, ids)
  end)
end)

describe("http.worker_id() with one worker", function()
  it("is 1 in the lone worker, nil while loading", function()
    local srv = H.start(H.script(APP))
    local body = srv:try_get("/id")
    assert.equal(0, srv:stop())
    assert.truthy(body)
    assert.equal("1 1 nil", body:match("^%d+ (.*)$"))
  end)
end)
