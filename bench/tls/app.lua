-- The benchmark app: one small response, as nginx's `return 200 "hello world"`.
local http = require "moonhttp"
http.handle("GET /", function(req, res) res:write("hello world") end)
