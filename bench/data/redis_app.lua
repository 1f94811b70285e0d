-- One Redis GET per request (/redis) against the same handler without Redis
-- (/plain). REDIS_PORT: the redis-server's port; POOL: the pool size.
local http = require "moonhttp"
local redis = require "moonhttp.redis"
local port = tonumber((assert(os.getenv("REDIS_PORT"), "set REDIS_PORT")))
local pool = tonumber(os.getenv("POOL") or "16")

http.handle("GET /plain", function(req, res)
  res:write("value")
end)

http.handle("GET /redis", function(req, res)
  local r = assert(redis.connect{ port = port, pool_size = pool })
  local v = assert(r:get("bench:key"))
  r:keepalive()
  res:write(v)
end)
