-- docs/guide/workers.md's shared dicts, whole: a count every worker adds to.
local http = require "moonhttp"

http.server{ shared = { cache = "16m", limits = "1m" } }   -- or --shared cache=16m,limits=1m
local cache = http.shared.cache                            -- a handle; use it in handlers

http.handle("POST /visits", function(req, res)
  res:json({ visits = cache:incr("visits", 1, 0) })
end)

http.handle("POST /online/{name}", function(req, res)   -- gone when this worker exits
  cache:set("online:" .. req:pathvalue("name"), true, { owner = "worker", ttl = 3600 })
  res:json({ online = cache:get("online:" .. req:pathvalue("name")) })
end)
