local http = require "moonhttp"
http.handle("GET /hello", function(req, res) res:write("hello world") end)
