-- WebSocket echo round trips through http.websocket: one message in flight,
-- `n` round trips of a 32-byte text message, percentiles of each one's time.
-- moonhttp run bench/ws/client_latency.lua ws://127.0.0.1:PORT/ [n]
local http = require "moonhttp"
local url, n = arg[1], tonumber(arg[2]) or 5000
local ws = assert(http.websocket(url))
for _ = 1, 200 do assert(ws:send("warm")) assert(ws:receive()) end
local t = {}
for i = 1, n do
  local t0 = http.clock()
  assert(ws:send("0123456789abcdef0123456789abcdef"))
  assert(ws:receive())
  t[i] = http.clock() - t0
end
table.sort(t)
local function pct(p) return t[math.max(1, math.floor(n * p))] * 1e6 end
print(string.format("n=%d p50=%.1fus p90=%.1fus p99=%.1fus", n, pct(0.5), pct(0.9), pct(0.99)))
ws:close()
