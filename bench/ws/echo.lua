-- bench/ws.sh: the moonhttp side, a WebSocket echo (and, idle, a socket waiting in receive).
local http = require "moonhttp"
http.handle("GET /echo", function(req, res)
  local ws = req:websocket{ ping_interval = 0, idle_timeout = 0 }
  if not ws then return end
  while true do
    local data, kind = ws:receive()
    if not data then return end
    ws:send(data, kind)
  end
end)
