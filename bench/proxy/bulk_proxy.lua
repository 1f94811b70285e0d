-- The proxy of bench/proxy/bulk.sh: every request to $PROXY_UPSTREAM with
-- http.proxy, bodies of any size streamed both ways.
local http = require "moonhttp"
http.server{ max_body_bytes = "4g" }
local target = assert(os.getenv("PROXY_UPSTREAM"), "set PROXY_UPSTREAM")
http.handle("/", function(req, res) return http.proxy(req, res, target, { timeout = 0 }) end)
