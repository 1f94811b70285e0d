-- examples/api.lua's 12 routes plus one that never yields, for bench/guards.sh:
-- does a handler spinning into handler_cpu_limit hurt the API's throughput?
local http = require "moonhttp"
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "../../examples/api.lua")
http.handle("GET /spin", function(req, res) while true do end end)
