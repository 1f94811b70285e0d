-- moonhttp.waiter: one task waits, another wakes it with up to three values
-- (src/lua/lua_waiter.c), the one wait/wake primitive behind moonhttp.redis's
-- automatic pipelining and moonhttp.pg's queue of pool waiters. Two requests
-- to a real server: one waits on a waiter, the other wakes it.
local H = require "helper"
local socket = require "socket"

describe("moonhttp.waiter", function()
  local srv
  setup(function()
    srv = H.start([[
local http = require "moonhttp"
local new_waiter = require("moonhttp.waiter").new
local w = new_waiter()
http.handle("GET /wait", function(req, res)
  local t0 = http.now()
  local a, b, c = w:wait(tonumber(req:arg("timeout")))
  res:write(tostring(a), " ", tostring(b), " ", tostring(c), " ", string.format("%.2f", http.now() - t0))
end)
http.handle("GET /wake", function(req, res) res:write(tostring(w:wake(true, "two", 3))) end)
http.handle("GET /before", function(req, res)
  local other = new_waiter()
  other:wake("kept") -- before anyone waits: kept for the next wait
  local again = other:wake("dropped")
  res:write(tostring(other:wait(5)), " ", tostring(again))
end)
http.handle("GET /misuse", function(req, res)
  res:write(tostring(select(2, pcall(w.wake, w, 1, 2, 3, 4))))
end)
]])
  end)
  teardown(function() srv:stop() end)

  it("wakes the waiting request with the values another gives", function()
    local c = srv:connect()
    assert(c:send("GET /wait?timeout=5 HTTP/1.1\r\nHost: x\r\n\r\n"))
    socket.sleep(0.2)
    assert.equal("true", srv:get("/wake").body)
    local res = assert(c:read_response())
    local values, took = res.body:match("^(.*) (%S+)$")
    assert.equal("true two 3", values)
    assert.is_true(tonumber(took) < 1, res.body)
    c:close()
  end)

  it("times out when nobody wakes it", function()
    local res = assert(srv:get("/wait?timeout=0.2"))
    assert.matches("^nil timeout nil 0%.[2-4]", res.body)
  end)

  it("keeps a wake that came before the wait, and only the first", function()
    assert.equal("kept false", srv:get("/before").body)
  end)

  it("keeps a wake with nobody waiting for the next wait", function()
    assert.equal("true", srv:get("/wake").body)
    assert.matches("^true two 3 0%.0", srv:get("/wait?timeout=5").body)
  end)

  it("refuses more than three values", function()
    assert.truthy(srv:get("/misuse").body:find("at most 3 values", 1, true))
  end)
end)
