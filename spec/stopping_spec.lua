-- Streams learn about a graceful stop: after shutdown_delay, http.sleep and
-- res:write in a streaming handler return nil, "stopping", so an SSE-like
-- loop ends on its own instead of holding SIGTERM for shutdown_timeout.
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
  it("ends an SSE loop promptly after shutdown_delay, with a clean end of stream", function()
    local srv = H.start(APP, { flags = { "--shutdown-delay", "0.3", "--shutdown-timeout", "10" } })
    local c = open_stream(srv, 0.05)
    assert.truthy(c:read_bytes(1)) -- the stream flows
    local t0 = H.now()
    srv:signal("TERM")
    H.sleep(0.15)
    c.buf = ""
    local during = c:fill() -- events keep coming during the delay
    local rest = c:read_all() -- until the server closes
    local took = H.now() - t0
    c:close()
    assert.equal(0, srv:wait(5))
    assert.is_true(took < 1.5, "the stream ended after " .. took .. " s (shutdown_timeout is 10 s)")
    assert.truthy(rest:find("0\r\n\r\n$"), rest) -- the chunked body ended properly
    assert.falsy(rest:find("not sent", 1, true))
    assert.truthy(during)
    -- The loop hears it from its sleep or, when its 0.05 s tick fell in the
    -- same loop turn as the stop (0.3 s is six ticks), from its next write;
    -- the next case checks the sleep alone.
    local log = srv:logtext()
    assert.truthy(log:find("stream ended by sleep: stopping", 1, true)
      or log:find("stream ended by write: stopping", 1, true), log)
    srv.stopped = true
  end)

  it("wakes a stream already sleeping a long time", function()
    local srv = H.start(APP, { flags = { "--shutdown-timeout", "10" } })
    local c = open_stream(srv, 30)
    local t0 = H.now()
    srv:signal("TERM")
    local rest = c:read_all()
    assert.is_true(H.now() - t0 < 1.5)
    assert.truthy(rest:find("0\r\n\r\n$"), rest)
    c:close()
    assert.equal(0, srv:wait(5))
    assert.truthy(srv:logtext():find("stream ended by sleep: stopping", 1, true), srv:logtext())
    srv.stopped = true
  end)

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
