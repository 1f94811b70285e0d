-- wrk -s bench/tfb/wrk/seed.lua URL: the seed's 12 routes in turn, one per
-- request (each one Redis GET on the server side).
local paths = { "/api/users", "/api/users/", "/api/orders", "/api/orders/" }
for i = 0, 7 do paths[#paths + 1] = "/api/items/" .. i end
local reqs, n = {}, 0
init = function()
  for i, p in ipairs(paths) do reqs[i] = wrk.format("GET", p) end
end
request = function()
  n = n % #reqs + 1
  return reqs[n]
end
