-- The app the limits and timeout specs talk to.
local http = require "moonhttp"

http.handle("GET /hello", function(req, res) res:write("hello") end)

http.handle("GET /sleep", function(req, res)
  http.sleep(tonumber(req:arg("s") or "1"))
  res:write("slept")
end)

http.handle("GET /sleep-extended", function(req, res)
  res:set_write_timeout(5)
  http.sleep(tonumber(req:arg("s") or "1"))
  res:write("slept")
end)

http.handle("POST /echo", function(req, res)
  local body, err = req:body()
  if not body then res:status(400); res:write("error: ", err) return end
  res:write(body)
end)

http.handle("POST /patient", function(req, res)
  req:set_read_timeout(5)
  local body, err = req:body()
  if not body then res:status(400); res:write("error: ", err) return end
  res:write(body)
end)

http.handle("POST /stream-in", function(req, res)
  local n = 0
  while true do
    local data, err = req:read(4096)
    if not data then
      if err then res:write("error: ", err) return end
      break
    end
    n = n + #data
  end
  res:write(tostring(n))
end)

http.handle("GET /big", function(req, res)
  local chunk = string.rep("x", 65536)
  for i = 1, tonumber(req:arg("chunks") or "100") do
    local ok, err = res:write(chunk)
    if not ok then http.log("info", "big: ", err) return end
  end
end)
