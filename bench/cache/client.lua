-- bench/cache_callgrind.sh: n keep-alive GETs on one connection, one at a time.
-- lua5.4 client.lua PORT N hit|miss|cond
local socket = require "socket"
local port, n, mode = tonumber(arg[1]), tonumber(arg[2]), arg[3]
local c = assert(socket.connect("127.0.0.1", port))
c:settimeout(60)
for i = 1, n do
  local path = mode == "miss" and ("/m?i=" .. i) or "/h"
  local extra = mode == "cond" and 'If-None-Match: "v1"\r\n' or ""
  assert(c:send("GET " .. path .. " HTTP/1.1\r\nHost: b\r\n" .. extra .. "\r\n"))
  local status = assert(c:receive("*l"))
  local len = 0
  while true do
    local line = assert(c:receive("*l"))
    if line == "" then break end
    local v = line:lower():match("^content%-length:%s*(%d+)")
    if v then len = tonumber(v) end
  end
  if len > 0 then assert(c:receive(len)) end
  if i == 1 and not status:match(" [23]0%d ") then error("client: " .. status) end
end
c:close()
