-- Streams learn about a stop: http.sleep and res:write in a streaming
-- handler return nil, "stopping", so an SSE-like loop ends on its own. A
-- graceful stop (SIGTERM) first keeps them going through shutdown_delay and
-- then its drain (shutdown_timeout, then drain_spread: spec/drain_stop_spec.lua);
-- SIGINT tells them at once.
local H = require "helper"

local APP = [[
local http = require "moonhttp"
http.handle("GET /events", function(req, res)
  res:header("Content-Type", "text/event-stream")
  local n = 0
  while true do
    n = n + 1
    local ok, err = res:write("data: " .. n .. "\n\n")
    if not ok then http.log("info", "stream ended by write: " .. err) return end
    ok, err = http.sleep(tonumber(req:arg("every") or "0.05"))
    if not ok then
      http.log("info", "stream ended by sleep: " .. err)
      res:write("data: not sent\n\n")
      return
    end
  end
end)
http.handle("GET /slow", function(req, res)
  local ok = http.sleep(0.6) -- not streaming: it sleeps its full time, as before
  res:write("slow done ", tostring(ok))
end)
]]

local function open_stream(srv, every)
  local c = srv:connect()
  assert(c:send("GET /events?every=" .. every .. " HTTP/1.1\r\nHost: x\r\n\r\n"))
  assert.equal("HTTP/1.1 200 OK", c:read_line())
  repeat local h = c:read_line() until h == ""
  return c
end

describe("a graceful stop with open streams", function()
  it("keeps an SSE loop going through shutdown_delay and the drain, then ends it cleanly", function()
    local srv = H.start(APP, { flags = { "--shutdown-delay", "0.3", "--shutdown-timeout", "0.6",
      "--drain-spread", "0" } })
    local c = open_stream(srv, 0.05)
    assert.truthy(c:read_bytes(1)) -- the stream flows
    local t0 = H.now()
    srv:signal("TERM")
    H.sleep(0.6)
    c.buf = ""
    local during = c:fill() -- events keep coming after the delay, in the drain
    local rest = c:read_all() -- until the server closes
    local took = H.now() - t0
    c:close()
    assert.equal(0, srv:wait(5))
    -- ended by the drain's end (0.3 + 0.6 s), not at the delay's (before the drain on
    -- stop, at 0.3 s)
    assert.is_true(took >= 0.85 and took < 2.5, "the stream ended after " .. took .. " s")
    assert.truthy(rest:find("0\r\n\r\n$"), rest) -- the chunked body ended properly
    assert.falsy(rest:find("not sent", 1, true))
    assert.truthy(during)
    -- The loop hears it from its sleep or, when its 0.05 s tick fell in the
    -- same loop turn as the drain's end, from its next write; the next rows
    -- check the sleep alone.
    local log = srv:logtext()
    assert.truthy(log:find("stream ended by sleep: stopping", 1, true)
      or log:find("stream ended by write: stopping", 1, true), log)
    srv.stopped = true
  end)

  -- Rows: the signal, shutdown_timeout, and when a stream sleeping 30 s must have ended.
  for _, row in ipairs({ { "TERM", "0.5", 0.45, 2 }, { "INT", "10", 0, 1.5 } }) do
    it(("wakes a stream already sleeping a long time (SIG%s)"):format(row[1]), function()
      local srv = H.start(APP, { flags = { "--shutdown-timeout", row[2], "--drain-spread", "0" } })
      local c = open_stream(srv, 30)
      local t0 = H.now()
      srv:signal(row[1])
      local rest = c:read_all()
      local took = H.now() - t0
      assert.is_true(took >= row[3] and took < row[4], took)
      assert.truthy(rest:find("0\r\n\r\n$"), rest)
      c:close()
      assert.equal(0, srv:wait(5))
      assert.truthy(srv:logtext():find("stream ended by sleep: stopping", 1, true), srv:logtext())
      srv.stopped = true
    end)
  end

  it("lets a request that is not streaming finish as before", function()
    local srv = H.start(APP, { flags = { "--shutdown-timeout", "10" } })
    local c = srv:connect()
    assert(c:send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"))
    H.sleep(0.1)
    srv:signal("TERM")
    local res = assert(c:read_response())
    assert.equal("slow done true", res.body)
    assert.equal(0, srv:wait(5))
    srv.stopped = true
  end)
end)
