-- examples/api.lua's 12 routes (same patterns, same bodies, registered first)
-- plus 1,000 more, for bench/routes.sh: does a big route table slow down the
-- requests the 12 serve? The extra routes are a realistic mix that Go's
-- ServeMux would accept (no two overlap without one being more specific):
--
--   per service svc1..svc100 under /v1/ (10 routes each = 1,000):
--     GET    /v1/svcN/items            POST   /v1/svcN/items
--     GET    /v1/svcN/items/{id}       PUT    /v1/svcN/items/{id}
--     DELETE /v1/svcN/items/{id}       GET    /v1/svcN/items/{id}/history
--     GET    /v1/svcN/health           GET    /v1/svcN/users/{uid}/items/{id}
--     /v1/svcN/docs/  (subtree)        GET    /v1/svcN/files/{path...}
--
-- minus 12 of those (svc100's last two and svc99..svc95's last two), replaced
-- by 12 neighbours of the benchmarked routes under /api/, so the lookup of
-- /api/users and /api/items/N walks nodes that have siblings:
--     GET /api/products, GET /api/products/{id}, POST /api/products,
--     GET /api/items/{id}/reviews, GET /api/items/{id}/reviews/{rid},
--     GET /api/users/{id}/orders (more specific than the /api/users/ subtree),
--     GET /api/orders/{id}/lines, GET /api/stats, GET /api/stats/{day},
--     /api/admin/ (subtree), GET /api/search, GET /api/health
-- Total: 12 + 1,000 = 1,012 patterns.
local http = require "moonhttp"

-- The 12 routes of examples/api.lua, unchanged: run that script itself.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "../../examples/api.lua")

local function json_body(body)
  return function(req, res)
    res:header("Content-Type", "application/json")
    res:write(body)
  end
end

local extra = 0
local function handle(pattern, body)
  http.handle(pattern, json_body(body))
  extra = extra + 1
end

-- 12 neighbours under /api/.
for _, p in ipairs {
  "GET /api/products", "GET /api/products/{id}", "POST /api/products",
  "GET /api/items/{id}/reviews", "GET /api/items/{id}/reviews/{rid}",
  "GET /api/users/{id}/orders", "GET /api/orders/{id}/lines",
  "GET /api/stats", "GET /api/stats/{day}", "/api/admin/", "GET /api/search", "GET /api/health",
} do
  handle(p, '{"name":"extra"}')
end

-- 100 services × 10 routes, minus the 12 above.
for n = 1, 100 do
  local base = "/v1/svc" .. n
  local routes = {
    "GET " .. base .. "/items", "POST " .. base .. "/items",
    "GET " .. base .. "/items/{id}", "PUT " .. base .. "/items/{id}",
    "DELETE " .. base .. "/items/{id}", "GET " .. base .. "/items/{id}/history",
    "GET " .. base .. "/health", "GET " .. base .. "/users/{uid}/items/{id}",
    base .. "/docs/", "GET " .. base .. "/files/{path...}",
  }
  local keep = n >= 95 and 8 or 10
  for i = 1, keep do
    handle(routes[i], '{"name":"extra","svc":' .. n .. '}')
  end
end

assert(extra == 1000, "expected 1000 extra routes, got " .. extra)
