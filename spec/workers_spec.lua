-- The master and its worker processes: one shared port, crash restart,
-- zero-downtime SIGHUP reload under load, graceful SIGTERM drain.
local H = require "helper"
local O = require "ops_helper"

local APP = [[
local http = require "moonhttp"
local version = VERSION_MARK
http.handle("GET /hello", function(req, res) res:write("hello") end)
http.handle("GET /version", function(req, res) res:write(version) end)
http.handle("GET /pid", function(req, res)
  res:write(io.open("/proc/self/stat"):read("n"))
end)
http.handle("GET /rand", function(req, res)
  res:write(io.open("/proc/self/stat"):read("n"), " ", math.random(1 << 40))
end)
http.handle("GET /slow", function(req, res)
  http.sleep(tonumber(req:arg("s") or "1"))
  res:write("slow done ", version)
end)
]]

local function app(version)
  return (APP:gsub("VERSION_MARK", string.format("%q", version)))
end

local function get(srv, path) return srv:try_get(path) end

describe("--workers 2", function()
  local srv, path
  before_each(function()
    path = H.script(app("v1"))
    srv = H.start(path, { flags = { "--workers", "2" } })
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
  end)
  after_each(function()
    if not srv.stopped then assert.equal(0, srv:stop()) end
  end)

  it("forks two workers that share one port", function()
    local seen = {}
    O.wait_for(function()
      local pid = get(srv, "/pid")
      if pid then seen[pid] = true end
      local n = 0
      for _ in pairs(seen) do n = n + 1 end
      return n == 2
    end, 5, 0)
    local kids = O.children(srv.pid)
    for pid in pairs(seen) do
      assert.truthy(pid == tostring(kids[1]) or pid == tostring(kids[2]), pid)
    end
    local _, n = srv:logtext():gsub("listening on", "")
    assert.equal(1, n) -- the master logs it once
  end)

  it("gives each worker its own random sequence", function()
    local first = {}
    O.wait_for(function()
      local pid, r = (get(srv, "/rand") or ""):match("(%d+) (%d+)")
      if pid and not first[pid] then first[pid] = r end
      local n = 0
      for _ in pairs(first) do n = n + 1 end
      return n == 2
    end, 5, 0)
    local a, b = next(first), nil
    b = next(first, a)
    assert.truthy(a and b)
    assert.are_not.equal(first[a], first[b])
  end)

  it("restarts a worker killed with SIGKILL", function()
    local before = O.children(srv.pid)
    os.execute("kill -9 " .. before[1])
    local after = O.wait_for(function()
      local kids = O.children(srv.pid)
      return #kids == 2 and kids[1] ~= before[1] and kids[2] ~= before[1] and kids
    end, 5)
    assert.truthy(after, srv:logtext())
    assert.truthy(srv:logtext():find("exited unexpectedly (killed by signal 9)", 1, true))
    for _ = 1, 10 do assert.equal("hello", get(srv, "/hello")) end
  end)

  it("backs off when a worker keeps crashing at once", function()
    for _ = 1, 3 do
      local kids = O.wait_for(function()
        local k = O.children(srv.pid)
        return #k > 0 and k
      end, 15)
      os.execute("kill -9 " .. table.concat(kids, " "))
      H.sleep(0.05)
    end
    assert.truthy(O.wait_for(function() return srv:logtext():find("worker restart in", 1, true) end, 3))
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 15))
    assert.equal("hello", get(srv, "/hello"))
  end)

  it("reloads on SIGHUP with new workers, letting old requests finish", function()
    local old = O.children(srv.pid)
    local c = srv:connect()
    assert(c:send("GET /slow?s=0.8 HTTP/1.1\r\nHost: x\r\n\r\n"))
    H.sleep(0.1)
    H.write_file(path, app("v2"))
    srv:signal("HUP")
    assert.truthy(O.wait_for(function() return get(srv, "/version") == "v2" end, 5))
    local res = assert(c:read_response())
    assert.equal("slow done v1", res.body)
    c:close()
    assert.truthy(O.wait_for(function()
      local kids = O.children(srv.pid)
      return #kids == 2 and kids[1] ~= old[1] and kids[1] ~= old[2] and kids[2] ~= old[1] and kids[2] ~= old[2]
    end, 5), "old workers did not stop")
  end)

  it("keeps the old workers when the new code fails to load", function()
    local old = O.children(srv.pid)
    H.write_file(path, "local http = require 'moonhttp'\nhttp.handle('GET /x', function() end\n")
    srv:signal("HUP")
    assert.truthy(O.wait_for(function() return srv:logtext():find("reload (SIGHUP) failed", 1, true) end, 3))
    assert.truthy(srv:logtext():find(path .. ":3:", 1, true), srv:logtext())
    H.sleep(0.2)
    assert.same(old, O.children(srv.pid))
    assert.equal("v1", get(srv, "/version"))
  end)

  it("answers every request during repeated SIGHUP reloads under load", function()
    local load = O.start_wrk("http://127.0.0.1:" .. srv.port .. "/hello", 3, 32)
    if not load then
      local r = O.lua_load(srv.port, "/hello", 2, function() srv:signal("HUP") end)
      assert.equal(0, r.failures, table.concat(r.statuses, ","))
      return
    end
    for i = 1, 5 do
      H.sleep(0.4)
      H.write_file(path, app("v" .. (i + 1)))
      srv:signal("HUP")
    end
    local r = load:finish()
    assert.is_true(r.requests > 1000, r.text)
    assert.equal(0, r.non2xx, r.text)
    assert.equal(0, r.socket_errors, r.text)
    assert.equal("v6", O.wait_for(function()
      local v = get(srv, "/version")
      return v == "v6" and v
    end, 5))
  end)

  it("drains on SIGTERM: requests in flight finish, then exit 0", function()
    local c = srv:connect()
    assert(c:send("GET /slow?s=0.5 HTTP/1.1\r\nHost: x\r\n\r\n"))
    H.sleep(0.1)
    local t0 = H.now()
    srv:signal("TERM")
    local res = assert(c:read_response())
    assert.equal("slow done v1", res.body)
    assert.equal("close", res.headers["connection"])
    c:close()
    assert.equal(0, srv:wait(10))
    srv.stopped = true
    assert.is_true(H.now() - t0 < 3)
    H.check_sanitizers(srv:logtext(), path)
    -- the port is closed: nothing accepts any more
    assert.is_nil((O.status(srv.port, "/hello")))
  end)
end)

describe("--workers 1", function()
  it("stays one process", function()
    local srv = H.start(H.script(app("v1")))
    assert.same({}, O.children(srv.pid))
    assert.equal(tostring(srv.pid), get(srv, "/pid"))
    assert.equal(0, srv:stop())
  end)

  it("drains on SIGTERM within shutdown_timeout and exits 0", function()
    local srv = H.start(H.script(app("v1")), { flags = { "--shutdown-timeout", "0.5" } })
    local c = srv:connect()
    assert(c:send("GET /slow?s=5 HTTP/1.1\r\nHost: x\r\n\r\n"))
    H.sleep(0.1)
    local t0 = H.now()
    assert.equal(0, srv:stop())
    assert.is_true(H.now() - t0 < 2, "took " .. (H.now() - t0))
    c:close()
  end)
end)
