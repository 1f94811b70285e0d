-- Three 50 ms upstream calls per request: /serial makes them one after the
-- other, /threads in three light threads. UPSTREAM=host:port of upstream.lua.
local http = require "moonhttp"
local up = "http://" .. assert(os.getenv("UPSTREAM"), "set UPSTREAM") .. "/slow"

local function call()
  local resp = assert(http.fetch(up))
  return resp:body()
end

http.handle("GET /serial", function(req, res)
  for _ = 1, 3 do call() end
  res:write("done")
end)

http.handle("GET /threads", function(req, res)
  local ts = {}
  for i = 1, 3 do ts[i] = http.spawn(call) end
  for i = 1, 3 do assert(ts[i]:join()) end
  res:write("done")
end)
