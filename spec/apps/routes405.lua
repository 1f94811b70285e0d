-- No catch-all: method mismatches are visible as 405.
local http = require "moonhttp"
local function show(req, res) res:write(req.pattern) end
http.handle("GET /r/{id}", show)
http.handle("POST /r/{id}", show)
http.handle("PUT /r/special", show)
http.handle("GET /tree/", show)
http.handle("DELETE /tree/x", show)
