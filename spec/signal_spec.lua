-- core.signal(): one task waits, another wakes it (lua/lua_signal.c), the
-- primitive behind moonhttp.pg's queue of pool waiters. Two requests to a
-- real server: one waits on a signal, the other notifies it.
local H = require "helper"
local socket = require "socket"

describe("core.signal", function()
  local srv
  setup(function()
    srv = H.start([[
local http = require "moonhttp"
local core = require "moonhttp.core"
local sig = core.signal()
http.handle("GET /wait", function(req, res)
  local t0 = http.now()
  local ok, err = sig:wait(tonumber(req:arg("timeout")))
  res:write(tostring(ok), " ", tostring(err), " ", string.format("%.2f", http.now() - t0))
end)
http.handle("GET /notify", function(req, res) res:write(tostring(sig:notify())) end)
http.handle("GET /twice", function(req, res)
  local other = core.signal()
  other:notify() -- before anyone waits: kept for the next wait
  res:write(tostring(other:wait(5)))
end)
]])
  end)
  teardown(function() srv:stop() end)

  it("wakes the waiting request when another notifies", function()
    local c = srv:connect()
    assert(c:send("GET /wait?timeout=5 HTTP/1.1\r\nHost: x\r\n\r\n"))
    socket.sleep(0.2)
    assert.equal("true", srv:get("/notify").body)
    local res = assert(c:read_response())
    local ok, _, took = res.body:match("^(%S+) (%S+) (%S+)$")
    assert.equal("true", ok)
    assert.is_true(tonumber(took) < 1, res.body)
    c:close()
  end)

  it("times out when nobody notifies", function()
    local res = assert(srv:get("/wait?timeout=0.2"))
    assert.matches("^nil timeout 0%.[2-4]", res.body)
  end)

  it("keeps a notification that came before the wait", function()
    assert.equal("true", srv:get("/twice").body)
  end)

  it("does not wake a request that is not waiting on it", function()
    assert.equal("false", srv:get("/notify").body)
    -- that notification was kept: the next wait returns at once
    assert.matches("^true nil 0%.0", srv:get("/wait?timeout=5").body)
  end)
end)
