-- loop_block_warn: a task that holds its worker's event loop (a blocking C
-- call, a long computation) for longer is named in a warning with its route
-- and the Lua traceback of the spot where it let go, and counted in
-- moonhttp_guard_events_total{guard="loop_blocked"}. Waiting calls that
-- yield (http.sleep) hold nothing and say nothing.
local H = require "helper"

local APP = [[
local http = require "moonhttp"
local socket = require "socket" -- Debian's lua-socket: its sleep blocks the worker
http.handle("GET /metrics", http.metrics_handler())
http.handle("GET /execute", function(req, res)
  os.execute("sleep 0.3")
  res:write("slept")
end)
http.handle("GET /socket", function(req, res)
  socket.sleep(0.3)
  res:write("slept")
end)
http.handle("GET /spin", function(req, res)
  local t, x = os.clock(), 0
  while os.clock() - t < 0.3 do x = x + 1 end
  res:write("spun")
end)
http.handle("GET /yields", function(req, res)
  http.sleep(0.3)
  res:write("waited")
end)
]]

local function blocked_count(srv)
  local res = srv:get("/metrics")
  return tonumber(res.body:match('moonhttp_guard_events_total{guard="loop_blocked"} (%d+)'))
end

-- The warnings logged so far, each with the text after it (its traceback).
local function warnings(srv)
  local list = {}
  local log = srv:logtext() .. "\n20"
  for w in log:gmatch("(the event loop was held .-)\n20") do list[#list + 1] = w end
  return list
end

-- { path, route, the line of APP the traceback points at (a blocking call's
-- own, or the next: the hook runs at the first instruction after it returns),
-- the least time the warning may say }
local ROWS = {
  { "/execute", "GET /execute", 5, 250 },
  { "/socket", "GET /socket", 9, 250 },
  { "/spin", "GET /spin", 14, 100 }, -- warned while it still spins, as soon as it passed 100 ms
}

describe("loop_block_warn (default 100 ms)", function()
  local srv
  before_each(function() srv = H.start(APP) end)
  after_each(function() srv:stop() end)

  for _, row in ipairs(ROWS) do
    it("warns for " .. row[1] .. " with its route and where it was, and counts it", function()
      assert.equal(0, blocked_count(srv))
      local res = srv:get(row[1])
      assert.equal(200, res.status)
      local w = warnings(srv)
      assert.equal(1, #w, srv:logtext())
      local ms = tonumber(w[1]:match("^the event loop was held (%d+) ms %(loop_block_warn 100 ms%)"))
      assert.truthy(ms and ms >= row[4] and ms < 5000, w[1])
      assert.truthy(w[1]:find("by route " .. row[2] .. ",", 1, true), w[1])
      -- the traceback names the handler's line
      local line = tonumber(w[1]:match("stack traceback:\n%s*[^\n]-%.lua:(%d+): in function"))
      assert.truthy(line == row[3] or line == row[3] + 1, w[1])
      assert.equal(1, blocked_count(srv))
    end)
  end

  it("says nothing for a wait that yields", function()
    assert.equal("waited", srv:get("/yields").body)
    assert.same({}, warnings(srv))
    assert.equal(0, blocked_count(srv))
  end)
end)

describe("loop_block_warn = 0", function()
  it("is off", function()
    local srv = H.start(APP, { flags = { "--loop-block-warn", "0" } })
    assert.equal("slept", srv:get("/execute").body)
    local log = srv:logtext()
    srv:stop()
    assert.falsy(log:find("event loop was held", 1, true), log)
  end)
end)
