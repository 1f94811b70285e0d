-- moonhttp run examples/fetch100.lua [url]: the article's 100 GETs that only check the status.
local http = require "moonhttp"
for i = 1, 100 do
  local r <close> = assert(http.fetch(arg[1] or "https://index.golang.org/index"))
  assert(r.status == 200, r.status)
end
print(require("cjson").encode(http.client_stats()))
