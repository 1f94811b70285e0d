-- docs/guide/workers.md's subscriber, whole: what is published on Redis's
-- "news" channel goes to the room channel of every worker, and from there
-- to each client of /news as a server-sent event.
local http = require "moonhttp"
local redis = require "moonhttp.redis"

local room = http.channel("room")

http.on_start(function()
  local r = assert(redis.connect{ timeout = 60 })
  assert(r:subscribe("news"))
  while true do
    local kind, ch, msg = r:read_message()
    if not kind then break end        -- "stopping": a stop or reload began
    room:publish(msg)
  end
end)

http.handle("GET /news", function(req, res)
  local sub <close> = room:subscribe()
  local sse = res:sse()
  while true do
    local msg = sub:receive()
    if not msg or not sse:send{ data = msg } then return end
  end
end)
