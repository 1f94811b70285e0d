-- bench/cache_callgrind.sh: the origin, a small cacheable JSON answer.
local http = require "moonhttp"
http.handle("GET /", function(req, res)
  res:header("Cache-Control", "max-age=600")
  res:header("ETag", '"v1"')
  res:json({ name = "baseline", users = {} })
end)
