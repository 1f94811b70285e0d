-- Helpers for the reload, workers and operations specs: polling, child
-- processes, and load generation (wrk when installed, else a Lua loop).
local H = require "helper"
local socket = require "socket"

local O = {}

--- Calls fn until it returns a truthy value or `timeout` seconds pass.
function O.wait_for(fn, timeout, step)
  local deadline = H.now() + (timeout or 5)
  repeat
    local v = fn()
    if v then return v end
    H.sleep(step or 0.01)
  until H.now() > deadline
  return nil
end

--- Pids of the direct children of pid (the workers of a master).
function O.children(pid)
  local p = io.popen("pgrep -P " .. pid)
  local pids = {}
  for line in p:lines() do pids[#pids + 1] = tonumber(line) end
  p:close()
  table.sort(pids)
  return pids
end

--- True when strace is installed; else the test is marked pending (and
-- fails in CI, where scripts/deps.sh installs it: a skip there would hide
-- that the spec proved nothing).
function O.need_strace()
  if O.has("strace") then return true end
  assert(not os.getenv("CI"), "strace is not installed (scripts/deps.sh installs it)")
  pending("strace is not installed")
  return false
end

--- Runs fn while strace counts the system calls `names` ("epoll_ctl,read")
-- of pid's worker (its first child, or pid itself with one worker).
-- Returns calls and errors by name (0 when none) and strace's summary.
function O.syscalls(pid, names, fn)
  local out = os.tmpname()
  local st = io.popen(string.format("strace -f -qq -c -e trace=%s -p %d -o %s 2>&1 & echo $!",
    names, O.children(pid)[1] or pid, out))
  local spid = assert(st:read("n"))
  st:close()
  socket.sleep(0.5) -- attached
  fn()
  os.execute("kill -INT " .. spid)
  socket.sleep(0.3)
  local f = assert(io.open(out))
  local summary = f:read("a")
  f:close()
  os.remove(out)
  local calls, errors = setmetatable({}, { __index = function() return 0 end }),
    setmetatable({}, { __index = function() return 0 end })
  for line in summary:gmatch("[^\n]+") do
    local col = {}
    for x in line:gmatch("%S+") do col[#col + 1] = x end
    -- % time, seconds, usecs/call, calls, [errors,] syscall
    if (#col == 5 or #col == 6) and tonumber(col[4]) then
      calls[col[#col]] = tonumber(col[4])
      errors[col[#col]] = #col == 6 and tonumber(col[5]) or 0
    end
  end
  return calls, errors, summary
end

function O.has(cmd)
  return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == true
end

--- GET path; returns status (or nil, err) without raising.
function O.status(port, path)
  local ok, res = pcall(H.request, port, "GET", path)
  if ok and res then return res.status, res end
  return nil, res
end

-- A running load: wrk in the background (bounded duration), parsed at the end.
local Load = {}
Load.__index = Load

--- Starts `wrk -d seconds` against url. Returns nil when wrk is missing.
function O.start_wrk(url, seconds, conns)
  if not O.has("wrk") then return nil end
  local out = H.tmpname(".wrk")
  local cmd = string.format("wrk -t2 -c%d -d%ds %s >%s 2>&1", conns or 16, seconds, url, out)
  local pipe = io.popen(cmd, "r")
  return setmetatable({ pipe = pipe, out = out }, Load)
end

--- Waits for wrk and returns { requests, non2xx, socket_errors, text }.
function Load:finish()
  self.pipe:close()
  local text = H.read_file(self.out) or ""
  os.remove(self.out)
  local r = { text = text, requests = tonumber(text:match("(%d+) requests in")) or 0 }
  r.non2xx = tonumber(text:match("Non%-2xx or 3xx responses: (%d+)")) or 0
  local c, rd, w, t = text:match("Socket errors: connect (%d+), read (%d+), write (%d+), timeout (%d+)")
  r.socket_errors = c and (tonumber(c) + tonumber(rd) + tonumber(w) + tonumber(t)) or 0
  return r
end

--- Sequential keep-alive-free requests for `seconds` (the fallback load), calling
-- `during` once after the first request. Returns { requests, failures, statuses }.
function O.lua_load(port, path, seconds, during)
  local r = { requests = 0, failures = 0, statuses = {} }
  local deadline = H.now() + seconds
  while H.now() < deadline do
    local status = O.status(port, path)
    r.requests = r.requests + 1
    if status ~= 200 then
      r.failures = r.failures + 1
      r.statuses[#r.statuses + 1] = tostring(status)
    end
    if during and r.requests == 1 then during(); during = nil end
  end
  return r
end

O.socket = socket
return O
