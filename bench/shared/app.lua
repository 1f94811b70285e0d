-- moonhttp side of bench/notes/2026-12-03-shared.md: N operations on http.shared.bench per
-- request, timed inside the handler with os.clock (CPU seconds of this
-- process), so neither HTTP nor the load generator is in the figure.
local http = require "moonhttp"
http.server{ shared = { bench = "16m" } }

local KEYS = 1000
local keys, counters = {}, {}
for i = 1, KEYS do keys[i], counters[i] = "key:" .. i, "count:" .. i end

http.handle("GET /fill", function(req, res)
  local d = http.shared.bench
  for i = 1, KEYS do d:set(keys[i], "value " .. i) end
  res:write("ok")
end)

http.handle("GET /get", function(req, res)
  local d, n = http.shared.bench, tonumber(req:arg("n"))
  local t0 = os.clock()
  for i = 1, n do d:get(keys[i % KEYS + 1]) end
  res:write(string.format("%.0f", n / (os.clock() - t0)))
end)

http.handle("GET /incr", function(req, res)
  local d, n = http.shared.bench, tonumber(req:arg("n"))
  local t0 = os.clock()
  for i = 1, n do d:incr(counters[i % KEYS + 1], 1, 0) end
  res:write(string.format("%.0f", n / (os.clock() - t0)))
end)

-- Two workers, one key: each request adds n; the total must be the sum.
http.handle("GET /one", function(req, res)
  local d, n = http.shared.bench, tonumber(req:arg("n"))
  for _ = 1, n do d:incr("one", 1, 0) end
  res:write(io.open("/proc/self/stat"):read("n"))
end)
http.handle("GET /one/total", function(req, res) res:write(tostring(http.shared.bench:get("one"))) end)
