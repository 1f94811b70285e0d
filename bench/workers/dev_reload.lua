-- Save-to-new-response latency of `moonhttp --dev`: rewrites a module the app
-- requires, then polls (every 2 ms, a fresh connection each time) until a
-- response carries the new value. Reports min / median / p90 / max over N saves.
--
-- usage: MOONHTTP_BIN=build/moonhttp lua5.4 bench/workers/dev_reload.lua [saves]
package.path = "spec/?.lua;" .. package.path
local H = require "helper"

local saves = tonumber(arg[1]) or 30
local dir = H.tmpname("-devbench")
assert(os.execute("mkdir -p " .. dir))
H.write_file(dir .. "/value.lua", 'return "v0"\n')
H.write_file(dir .. "/app.lua", [[
local http = require "moonhttp"
local value = require "value"
http.handle("GET /v", function(req, res) res:write(value) end)
]])
local srv = H.start(dir .. "/app.lua", { flags = { "--dev" } })

local function get()
  local ok, res = pcall(H.request, srv.port, "GET", "/v")
  return ok and res and res.body
end

local times = {}
for i = 1, saves do
  local want = "v" .. i
  local t0 = H.now()
  H.write_file(dir .. "/value.lua", string.format("return %q\n", want))
  while get() ~= want do
    H.sleep(0.002)
    assert(H.now() - t0 < 5, "no reload within 5 s")
  end
  times[#times + 1] = (H.now() - t0) * 1000
  H.sleep(0.05)
end
srv:stop()
os.execute("rm -rf " .. dir)
table.sort(times)
local function pct(p) return times[math.max(1, math.ceil(#times * p))] end
print(string.format("dev reload, %d saves: min %.1f ms, median %.1f ms, p90 %.1f ms, max %.1f ms (target < 200 ms)",
  #times, times[1], pct(0.5), pct(0.9), times[#times]))
