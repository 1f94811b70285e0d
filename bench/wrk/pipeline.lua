-- HTTP/1.1 pipelining, depth 16: every write carries 16 GET /api/users
-- requests back to back. wrk counts each parsed response as one request, so
-- requests/sec stays comparable with the unpipelined runs. This removes most
-- of the per-request syscall and wakeup cost and shows how much the server's
-- own request handling costs. The string is built once, in init, so wrk's
-- own Lua does no work per request.
local depth = 16
local batch

init = function(args)
  batch = string.rep("GET /api/users HTTP/1.1\r\nHost: x\r\n\r\n", depth)
end

request = function()
  return batch
end

-- p99.9 and max lines like every other load (timed per batch here, as above).
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "latency.lua")
