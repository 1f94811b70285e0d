-- The 12-route REST API of the benchmark in the Go net/http article
-- (shared/SEEDS.md): the same paths and byte-identical JSON bodies.
--   moonhttp examples/api.lua     then     curl localhost:8080/api/users
local http = require "moonhttp"

local function json_body(body)
  return function(req, res)
    res:header("Content-Type", "application/json")
    res:write(body)
  end
end

http.handle("/api/users", json_body('{"name":"baseline","users":[]}'))
http.handle("/api/users/", json_body('{"name":"baseline","user":{}}'))
http.handle("/api/orders", json_body('{"name":"baseline","orders":[]}'))
http.handle("/api/orders/", json_body('{"name":"baseline","order":{}}'))
for i = 0, 7 do
  http.handle("/api/items/" .. i, json_body('{"name":"baseline","item":{}}'))
end
