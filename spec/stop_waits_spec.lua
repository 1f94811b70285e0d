-- A stop or a reload reaches every task: background tasks (on_start
-- functions, timer callbacks) blocked in a socket read, a
-- Redis subscription or http.sleep, and a WebSocket handler waiting
-- somewhere else than ws:receive, hear nil, "stopping" when the stop reaches
-- them (SIGINT: at once; SIGTERM: when its drain ends), so the stop takes
-- well under their timeouts.
local H = require "helper"
local O = require "ops_helper"
local socket = require "socket"

local APP = [[
local http = require "moonhttp"
local redis = require "moonhttp.redis"
local function say(...) io.stderr:write(table.concat({ ... }, " "), "\n") end

-- a peer that accepts (the spec's listening socket) and never says a word
local function blocked_read(who)
  local s = http.tcp()
  s:settimeouts(5, 5, 30)
  assert(s:connect("127.0.0.1", tonumber(os.getenv("SILENT_PORT"))))
  say(who, "reading")
  local data, err = s:receive()
  say(who, "read:", tostring(data), tostring(err))
end

http.on_start(function()
  http.timer(0, blocked_read, "timer")
  http.timer(0, function()
    say("timer sleeping")
    say("timer slept:", tostring(http.sleep(30)), tostring(select(2, http.sleep(30))))
  end)
  if os.getenv("REDIS_PORT") then
    http.timer(0, function()
      local r = assert(redis.connect{ port = tonumber(os.getenv("REDIS_PORT")), timeout = 30 })
      assert(r:subscribe("news"))
      say("subscriber reading")
      while true do
        local kind, ch, msg = r:read_message()
        if not kind then say("subscriber ended:", tostring(ch)) break end
      end
    end)
  end
  blocked_read("on_start")
  say("on_start stopping() =", tostring(http.stopping()))
end)

http.handle("GET /ws", function(req, res)
  local ws = assert(req:websocket())
  say("ws handler sleeping")
  local ok, err = http.sleep(30) -- not in ws:receive
  say("ws handler woke:", tostring(ok), tostring(err))
end)
]]

local KEY = "dGhlIHNhbXBsZSBub25jZQ=="

local function open_ws(srv)
  local c = srv:connect()
  assert(c:send("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    .. "Sec-WebSocket-Key: " .. KEY .. "\r\nSec-WebSocket-Version: 13\r\n\r\n"))
  assert.equal("HTTP/1.1 101 Switching Protocols", c:read_line())
  return c
end

local function count(text, s)
  local _, n = text:gsub(s:gsub("%p", "%%%0"), "")
  return n
end

describe("a stop with tasks blocked in waits", function()
  local silent, redis_svc
  before_each(function()
    silent = assert(socket.bind("127.0.0.1", 0))
  end)
  after_each(function()
    silent:close()
    if redis_svc then redis_svc:stop(); redis_svc = nil end
  end)

  local function env()
    local _, port = silent:getsockname()
    return "SILENT_PORT=" .. port .. (redis_svc and (" REDIS_PORT=" .. redis_svc.port) or "")
  end

  -- Rows: the signal, the flags, and when the stop may end. SIGTERM drains (the
  -- WebSocket and the tasks that may feed it go on for shutdown_timeout, 0.5 s
  -- here, its last 0.2 s closing), then every wait hears "stopping"; SIGINT
  -- stops at once. Before the drain on stop, SIGTERM's row ended in 0.1 s.
  for _, row in ipairs({
    { "TERM", { "--shutdown-timeout", "0.5", "--drain-spread", "0.2" }, 0.3, 0.5 + 1 },
    { "INT", { "--shutdown-timeout", "10" }, 0, 1 },
  }) do
    local sig, flags, from, upto = row[1], row[2], row[3], row[4]
    it(("SIG%s ends every waiting call of 2 workers with nil, \"stopping\" in %g to %g s"):format(sig, from, upto), function()
      redis_svc = H.redis()
      local f = { "--workers", "2" }
      for _, x in ipairs(flags) do f[#f + 1] = x end
      local srv = H.start(APP, { env = env(), flags = f })
      local ws = open_ws(srv)
      assert.truthy(O.wait_for(function()
        local t = srv:logtext()
        return count(t, "on_start reading") == 2 and count(t, "timer reading") == 2
          and count(t, "subscriber reading") == 2 and count(t, "timer sleeping") == 2
          and count(t, "ws handler sleeping") == 1
      end, 5), srv:logtext())
      local t0 = H.now()
      srv:signal(sig)
      ws:read_bytes(2) -- the close frame (1001): the client goes
      ws:close()
      local status = srv:wait(10)
      local took = H.now() - t0
      srv.stopped = true
      local log = srv:logtext()
      assert.equal(0, status, log)
      assert.is_true(took >= from and took < upto, "the stop took " .. took .. " s\n" .. log)
      print(string.format("SIG%s, 2 workers, reads of 30 s: stopped in %.3f s", sig, took))
      assert.equal(2, count(log, "on_start read: nil stopping"), log)
      assert.equal(2, count(log, "timer read: nil stopping"), log)
      assert.equal(2, count(log, "subscriber ended: stopping"), log)
      assert.equal(2, count(log, "timer slept: nil stopping"), log)
      assert.equal(2, count(log, "on_start stopping() = true"), log)
      assert.equal(1, count(log, "ws handler woke: nil stopping"), log)
    end)
  end

  it("ends the old code's waits at a reload in place, leaving no task to kill", function()
    local srv = H.start(APP, { env = env(), flags = { "--shutdown-timeout", "10" } })
    assert.truthy(O.wait_for(function()
      local t = srv:logtext()
      return count(t, "on_start reading") == 1 and count(t, "timer reading") == 1
        and count(t, "timer sleeping") == 1
    end, 5), srv:logtext())
    local t0 = H.now()
    srv:signal("HUP")
    assert.truthy(O.wait_for(function()
      local t = srv:logtext()
      return count(t, "on_start read: nil stopping") == 1 and count(t, "timer read: nil stopping") == 1
        and count(t, "timer slept: nil stopping") == 1
    end, 1), srv:logtext())
    local took = H.now() - t0
    assert.is_true(took < 1)
    print(string.format("reload in place: the old code's waits ended after %.3f s", took))
    -- the new code's tasks wait on as usual
    assert.truthy(O.wait_for(function() return count(srv:logtext(), "on_start reading") == 2 end, 5))
    assert.falsy(srv:logtext():find("still running", 1, true))
    local t1 = H.now()
    assert.equal(0, srv:stop())
    assert.is_true(H.now() - t1 < 1.5, srv:logtext())
  end)
end)
