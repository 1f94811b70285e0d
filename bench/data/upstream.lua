-- A slow upstream for the fan-out bench: every answer takes 50 ms.
local http = require "moonhttp"
http.handle("GET /slow", function(req, res) http.sleep(0.05); res:write("ok") end)
