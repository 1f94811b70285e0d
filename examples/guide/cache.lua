-- docs/guide/proxy.md's response cache, whole: what the upstream on
-- 127.0.0.1:9000 lets a shared cache keep is answered from a shared dict,
-- and an expired entry stands in for 5 minutes while the upstream fails.
local http = require "moonhttp"

http.server{ shared = { cache = "64m" } }
local cache = require("moonhttp.cache").new{
  dict = http.shared.cache,   -- entries live here: every worker sees them
  stale_if_error = 300,       -- serve an expired entry for 5 more minutes if the upstream fails
}
http.handle("/api/", cache:wrap(function(req, res)
  return http.proxy(req, res, "http://127.0.0.1:9000")
end))
