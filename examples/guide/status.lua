-- docs/reference/client.md's first example, whole: a handler that asks an
-- API for its status and answers with what it said.
local http = require "moonhttp"

local function api_status()
  local r <close> = assert(http.fetch("https://api.example.com/status", { timeout = 2 }))
  if r.status ~= 200 then return end       -- the body need not be read: see draining
  local data = http.json.decode(r:body())
  return data
end

http.handle("GET /status", function(req, res)
  local data = api_status()
  if not data then return res:json({ error = "the API is unwell" }, 502) end
  res:json({ api = data.state })
end)
