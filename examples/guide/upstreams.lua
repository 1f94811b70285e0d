-- docs/guide/proxy.md's upstream group, whole: three servers behind one name,
-- health-checked, balanced, retried.
local http = require "moonhttp"

http.server{ shared = { upstreams = "1m" } }       -- where the up/down marks live

local api = http.upstream{
  servers = { "10.0.0.1:8080", { addr = "10.0.0.2:8080", weight = 2 }, "api3.internal:8080" },
  balance = "round_robin",                         -- or "least_conn", "hash(header:X-User)"
  max_fails = 1, fail_timeout = 10,                -- passive checks
  health = { path = "/health", interval = 5, timeout = 2, expect = 200 },
  retries = { tries = 2, on = { "error", "timeout", "502", "503" }, idempotent_only = true },
  keepalive = 32,
  shared = "upstreams",
}

http.handle("/api/", function(req, res) return http.proxy(req, res, api) end)

http.handle("GET /me", function(req, res)             -- or a fetch of your own
  local r <close>, kind = api:fetch("/users/me", { headers = { Cookie = req:header("cookie") } })
  if not r then return res:status(502) end
  res:write(r:body())
end)
