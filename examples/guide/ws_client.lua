-- docs/reference/websocket-client.md's example, whole: a handler that sends
-- lines to a chat server over a WebSocket while it reads what comes back.
local http = require "moonhttp"

local function relay(token, lines, handle)
  local ws, err = http.websocket("wss://chat.example/live", {
    protocols = { "chat.v2" }, headers = { Authorization = "Bearer " .. token } })
  if not ws then return nil, err end
  http.spawn(function()                 -- one task writes...
    for line in lines do ws:send(line) end
  end)
  while true do                         -- ...while this one reads
    local msg = ws:receive()
    if not msg then break end
    handle(msg)
  end
  return true
end

http.handle("POST /say", function(req, res)
  local heard = {}
  local ok, err = relay(os.getenv("CHAT_TOKEN") or "t0ken", (req:body() or ""):gmatch("[^\n]+"),
    function(msg) heard[#heard + 1] = msg end)
  if not ok then return res:json({ error = err }, 502) end
  res:json(heard)
end)
