-- A per-client rate limiter on a shared dict: at most LIMIT requests per
-- WINDOW seconds per client address, counted by all workers together.
--   moonhttp --workers 2 examples/ratelimit.lua
--   for i in $(seq 12); do curl -s -o /dev/null -w '%{http_code} ' localhost:8080/; done
local http = require "moonhttp"

http.server{ shared = { limits = "1m" } } -- about 10,000 clients at 64-128 bytes each

local LIMIT, WINDOW = 10, 60
local limits = http.shared.limits

-- Fixed windows: one counter per client and window, created by incr's init
-- with a TTL of one window, so old windows expire by themselves.
http.use(function(next)
  return function(req, res)
    local window = math.floor(os.time() / WINDOW)
    local client = req.remote_addr:match("^(.*):%d+$") -- the address without the port
    local count, err = limits:incr(client .. "@" .. window, 1, 0, WINDOW)
    if not count then -- when full, old counters are evicted first; fail open on anything else
      http.log("warn", "rate limiter: ", err)
    elseif count > LIMIT then
      res:header("Retry-After", tostring(WINDOW - os.time() % WINDOW))
      res:status(429)
      res:write("too many requests\n")
      return
    end
    next(req, res)
  end
end)

http.handle("GET /", function(req, res)
  res:write("hello\n")
end)
