-- bench/channels: WebSocket subscribers of one channel, and a publisher.
-- A message "t:<clock>" comes back to its client as the milliseconds from the
-- publish to that subscriber's resume (http.clock is CLOCK_MONOTONIC, one
-- clock for every worker), so the figure excludes the client's own time.
local http = require "moonhttp"
local room = http.channel("room")

http.handle("GET /chat", function(req, res)
  local ws = assert(req:websocket())
  local sub <close> = room:subscribe()
  ws:send("ready")
  while true do
    local msg = sub:receive()
    if not msg then break end
    if msg:sub(1, 2) == "t:" then
      msg = ("%.2f"):format((http.clock() - tonumber(msg:sub(3))) * 1000)
    end
    if not ws:send(msg) then break end
  end
end)

http.handle("GET /pub", function(req, res)
  assert(room:publish("t:" .. http.clock()))
  res:write("ok")
end)

-- n publishes of size bytes from one task, nobody subscribed to "bench"
local bench = http.channel("bench")
http.handle("GET /rate", function(req, res)
  local n, msg = tonumber(req:arg("n")), string.rep("x", tonumber(req:arg("size") or "64"))
  local t0 = http.clock()
  for _ = 1, n do bench:publish(msg) end
  local dt = http.clock() - t0
  res:write(("%d publishes of %d bytes in %.3f s: %.0f/s\n"):format(n, #msg, dt, n / dt))
end)
