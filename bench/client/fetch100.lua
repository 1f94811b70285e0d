-- moonhttp run bench/client/fetch100.lua URL MODE [CA] [N]
-- MODE: drain (defaults), nodrain (drain_bytes = 0), nodrain-noresume, readall
-- (read each body).
-- N sequential GETs that check the status and close; prints the elapsed ms
-- and the client's stats.
local http = require "moonhttp"
local socket = require "socket"
local url, mode, ca, n = arg[1], arg[2] or "drain", arg[3], tonumber(arg[4]) or 100
if ca == "" then ca = nil end
-- nodrain-noresume: also no TLS session resumption (every dial a full handshake)
local c = http.client{ drain_bytes = mode:match("^nodrain") and 0 or nil,
  tls = ca and { ca = ca, resume = mode ~= "nodrain-noresume" } or nil }
local t0 = socket.gettime()
for i = 1, n do
  local r <close> = assert(c:fetch(url))
  assert(r.status == 200, r.status)
  if mode == "readall" then
    while r:read(65536) do end
  end
end
print(string.format("ms %.1f", (socket.gettime() - t0) * 1000))
local s = c:stats()
print(string.format("stats dials=%d reuses=%d drains=%d abandoned=%d closed_unread=%d",
  s.dials, s.reuses, s.drains_completed, s.drains_abandoned, s.closed_unread))
