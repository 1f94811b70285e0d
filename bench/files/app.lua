-- bench/files.sh copies this beside the generated public/ and json20k.json.
local http = require "moonhttp"
local dir = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local f = assert(io.open(dir .. "/json20k.json", "rb"))
local json = f:read("a")
f:close()

http.server{ compress = { types = { "text/*", "application/json", "application/javascript",
  "image/svg+xml" }, min_bytes = 1024, level = 1 } }
http.handle("GET /static/", http.files("public", { max_age = 3600 }))
http.handle("GET /json", function(req, res)
  res:header("Content-Type", "application/json")
  res:write(json)
end)
