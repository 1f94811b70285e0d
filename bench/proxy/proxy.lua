-- The proxy under test (bench/proxy.sh): every request forwarded with
-- http.proxy to the upstream in $PROXY_UPSTREAM, over the default client's pool.
local http = require "moonhttp"
local UP = assert(os.getenv("PROXY_UPSTREAM"), "set PROXY_UPSTREAM")
http.handle("/", function(req, res) return http.proxy(req, res, UP) end)
