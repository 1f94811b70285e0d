-- The front of bench/proxy/ws_latency.sh: every WebSocket handshake is
-- relayed to the echo server at UPSTREAM (an env var, http://host:port) by
-- http.proxy, which switches to the C byte relay after the upstream's 101.
local http = require "moonhttp"
local up = assert(os.getenv("UPSTREAM"), "set UPSTREAM=http://127.0.0.1:PORT")
http.handle("/", function(req, res)
  return http.proxy(req, res, up)
end)
