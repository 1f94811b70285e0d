-- sd_notify without systemd: a fake NOTIFY_SOCKET (spec/servers/notify_listener.py
-- on a unix datagram socket) records what the server tells its service
-- manager across a start, reloads (a good one and a failing one) and a stop,
-- with one worker and with a master, and when the watchdog pings stop.
local H = require "helper"

local APP = [[
local http = require "moonhttp"
http.handle("GET /env", function(req, res)
  res:write(tostring(os.getenv("NOTIFY_SOCKET")), " ", tostring(os.getenv("WATCHDOG_USEC")))
end)
http.handle("GET /block", function(req, res)
  os.execute("sleep 2.5") -- blocks the worker's event loop
  res:write("done")
end)
]]

local function listener(path)
  local svc = H.service("/usr/bin/python3 spec/servers/notify_listener.py " .. H.shell_quote(path),
    function(text) return text:find("listening", 1, true) and 0 end)
  function svc:messages()
    local out = {}
    for t, msg in (H.read_file(self.log) or ""):gmatch("\n([%d.]+) ([^\n]*)") do
      out[#out + 1] = { t = tonumber(t), msg = msg }
    end
    return out
  end
  -- The messages other than WATCHDOG=1, once `n` of them have come (or after 10 s).
  function svc:states(n)
    local deadline = H.now() + 10
    repeat
      local got = {}
      for _, m in ipairs(self:messages()) do
        if m.msg ~= "WATCHDOG=1" then got[#got + 1] = m.msg end
      end
      if #got >= n or H.now() > deadline then return got end
      H.sleep(0.05)
    until false
  end
  return svc
end

local function now_usec()
  local f = assert(io.popen("python3 -c 'import time; print(int(time.monotonic() * 1e6))'"))
  local v = tonumber(f:read("l"))
  f:close()
  return v
end

-- Start, a good reload, a failing one (the old code keeps serving), a stop.
local function lifecycle(notify_socket, flags)
  local path = notify_socket:gsub("^@", "/tmp/")
  local svc = listener(notify_socket)
  local script = H.script(APP)
  local srv = H.start(script, { flags = flags, env = "NOTIFY_SOCKET=" .. H.shell_quote(notify_socket) })
  local ok, err = pcall(function()
    assert.same({ "READY=1" }, svc:states(1))
    assert.equal("nil nil", srv:get("/env").body) -- not passed on to the app
    srv:signal("HUP")
    local states = svc:states(3)
    assert.equal("READY=1", states[3], table.concat(states, " / "))
    local usec = tonumber(states[2]:match("^RELOADING=1|MONOTONIC_USEC=(%d+)$"))
    assert(usec, states[2])
    assert.is_true(math.abs(now_usec() - usec) < 5e6, "MONOTONIC_USEC is not CLOCK_MONOTONIC")
    H.write_file(script, "local http = require 'moonhttp'\nhttp.handle(") -- a syntax error
    srv:signal("HUP")
    states = svc:states(5)
    assert.matches("^RELOADING=1|MONOTONIC_USEC=%d+$", states[4])
    assert.equal("READY=1", states[5])
    assert.equal(200, srv:get("/env").status)
    assert.equal(0, srv:stop())
    H.sleep(0.3) -- the listener has printed all there was
    states = svc:states(6)
    assert.equal("STOPPING=1", states[6])
    assert.equal(6, #states, table.concat(states, " / ")) -- nothing after it
  end)
  srv:stop()
  svc:stop()
  os.remove(path)
  os.remove(script)
  assert(ok, err)
end

-- Seconds between successive WATCHDOG=1 messages from `from` on.
local function watchdog_gaps(svc, from)
  local gaps, last = {}, nil
  for _, m in ipairs(svc:messages()) do
    if m.msg == "WATCHDOG=1" and m.t >= from then
      if last then gaps[#gaps + 1] = m.t - last end
      last = m.t
    end
  end
  return gaps
end

local function watchdog(flags)
  local path = H.tmpname(".notify")
  local svc = listener(path)
  local srv = H.start(APP, { flags = flags,
    env = "NOTIFY_SOCKET=" .. path .. " WATCHDOG_USEC=1000000" })
  local ok, err = pcall(function()
    H.sleep(1.6)
    local t0 = H.now()
    local calm = watchdog_gaps(svc, 0)
    assert.is_true(#calm >= 2, "pings: " .. #calm)
    for _, g in ipairs(calm) do assert.is_true(g < 0.8, "gap " .. g) end
    assert.equal("done", srv:get("/block").body)
    H.sleep(1.2)
    local longest = 0
    for _, g in ipairs(watchdog_gaps(svc, 0)) do longest = math.max(longest, g) end
    assert.is_true(longest > 1.3, "a stuck loop did not stop the pings (longest gap " .. longest .. ")")
    local after = watchdog_gaps(svc, t0 + 2.6)
    assert.is_true(#after >= 1, "the pings did not come back")
  end)
  srv:stop()
  svc:stop()
  os.remove(path)
  assert(ok, err)
end

describe("sd_notify", function()
  it("one worker: READY, RELOADING/READY around reloads, STOPPING", function()
    lifecycle(H.tmpname(".notify"), {})
  end)

  it("a master: READY once the workers serve, and over the abstract namespace", function()
    lifecycle("@" .. H.tmpname(".notify"):match("[^/]+$"), { "--workers", "2" })
  end)

  it("one worker: WATCHDOG=1 stops while the event loop is stuck", function()
    watchdog({})
  end)

  it("a master: WATCHDOG=1 only while every worker's loop turns", function()
    watchdog({ "--workers", "2", "--worker-stall-timeout", "0" })
  end)

  it("serves unmanaged when NOTIFY_SOCKET is unusable", function()
    local srv = H.start(APP, { env = "NOTIFY_SOCKET=relative/path" })
    assert.equal(200, srv:get("/env").status)
    assert.equal(0, srv:stop())
    assert.matches("NOTIFY_SOCKET \"relative/path\" is not a unix socket path", srv:logtext(), 1, true)
  end)
end)
