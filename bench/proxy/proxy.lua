-- The proxy under test (bench/proxy.sh): every request forwarded with
-- http.proxy to the upstream in $PROXY_UPSTREAM, over the default client's
-- pool; or, with $PROXY_UPSTREAMS ("host:port,host:port"), to an
-- http.upstream group of them (round robin, 64 idle connections per server).
local http = require "moonhttp"
local target = assert(os.getenv("PROXY_UPSTREAM"), "set PROXY_UPSTREAM")
local group = os.getenv("PROXY_UPSTREAMS")
if group then
  local servers = {}
  for s in group:gmatch("[^,]+") do servers[#servers + 1] = s end
  target = http.upstream{ servers = servers, keepalive = 64 }
end
http.handle("/", function(req, res) return http.proxy(req, res, target) end)
