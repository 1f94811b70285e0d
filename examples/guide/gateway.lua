-- docs/guide/proxy.md's first example, whole: /api/... passed to the
-- upstream on 127.0.0.1:9000 without its /api prefix.
local http = require "moonhttp"

local api = http.client{ max_idle_per_host = 64 }  -- the upstream's own pool (optional)

http.handle("/api/", function(req, res)
  return http.proxy(req, res, "http://127.0.0.1:9000", {
    client = api,
    read_timeout = 30,
    via = "gateway",
    request = function(up)                   -- rewrite the upstream request
      up.path = up.path:gsub("^/api", "")
      up.headers["X-Gateway"] = { "1" }
    end,
    response = function(head)                -- rewrite the response head
      head.headers["Server"] = nil
    end,
  })
end)
