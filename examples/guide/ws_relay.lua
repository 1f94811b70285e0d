-- docs/reference/websocket-proxy.md's example, whole: WebSocket upgrades
-- relayed to the server on 127.0.0.1:9001, by hand or through http.proxy.
local http = require "moonhttp"

-- by hand: any checks first, then the relay
http.handle("GET /chat", function(req, res)
  local ok, kind, detail = http.relay_upgrade(req, res, "ws://127.0.0.1:9001/chat",
    { idle_timeout = 120 })
  if not ok then                       -- nothing was sent: answer as you like
    res:status(kind == "timeout" and 504 or 502)
    res:write("upstream unavailable\n")
  end
end)

-- or through http.proxy, which relays any request that asks to upgrade
http.handle("/app/", function(req, res)
  return http.proxy(req, res, "http://127.0.0.1:9001", { idle_timeout = 120 })
end)
