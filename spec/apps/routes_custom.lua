-- Custom 404 and 405 handlers, and Go 1.22's 301 redirects.
local http = require "moonhttp"
http.server{ redirect_code = 301 }
http.handle("GET /thing", function(req, res) res:write("thing") end)
http.handle("POST /thing", function(req, res) res:write("posted") end)
http.handle("/sub/", function(req, res) res:write("sub") end)
http.not_found(function(req, res)
  res:json({ error = "no route", path = req.path })
end)
http.method_not_allowed(function(req, res, allow)
  res:write("use one of: ", allow)
end)
