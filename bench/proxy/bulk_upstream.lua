-- The upstream of bench/proxy/bulk.sh: GET /big?mb=N streams N MiB (one
-- 64 KiB string written over and over, Content-Length set), PUT /sink reads
-- a body of any size as it arrives and answers how many bytes it got.
local http = require "moonhttp"
http.server{ max_body_bytes = "4g" }

local CHUNK = string.rep("x", 65536)

http.handle("GET /big", function(req, res)
  local mb = tonumber(req.query:match("mb=(%d+)") or "1024")
  res:header("Content-Length", tostring(mb * 1048576))
  for _ = 1, mb * 16 do
    if not res:write(CHUNK) then return end
  end
end)

http.handle("PUT /sink", function(req, res)
  local n = 0
  while true do
    local piece, err = req:read(262144)
    if not piece then
      if err then return res:write("error: ", err, "\n") end
      break
    end
    n = n + #piece
  end
  res:write(tostring(n), "\n")
end)
