-- Light threads (http.spawn), timers (http.timer, http.every) and
-- http.on_start, in `moonhttp run` scripts and in a served app.
local H = require "helper"

local function run(source)
  local code, out = H.run_lua(source)
  assert.equal(0, code, out)
  return out
end

describe("light threads", function()
  it("fan out: three 50 ms waits in threads take about 50 ms, not 150", function()
    local out = run([[
      local t0 = http.now()
      local ths = {}
      for i = 1, 3 do ths[i] = http.spawn(function(x) http.sleep(0.05); return x * 2, "ok" end, i) end
      for i = 1, 3 do print(ths[i]:join()) end
      print(http.now() - t0 < 0.12)
    ]])
    assert.equal("true\t2\tok\ntrue\t4\tok\ntrue\t6\tok\ntrue\n", out)
  end)

  it("join times out, kill ends a thread, errors come back as false, err", function()
    local out = run([[
      local slow = http.spawn(function() http.sleep(5) return 1 end)
      print(slow:join(0.05))
      print(slow:kill())
      print(slow:join())
      print(slow:kill())
      local ok, err = http.spawn(function() error("boom", 0) end):join()
      print(ok, err)
      local quick = http.spawn(function() return "done" end)
      http.sleep(0.01)
      print(quick:join())
      print(quick:join())
    ]])
    -- the failing thread is also logged, with its traceback
    assert.matches("light thread error: boom\nstack traceback:", out)
    out = out:gsub("%d%d%d%d%-[^\n]*light thread error:.-\n(false)", "%1")
    assert.equal("false\ttimeout\ntrue\nfalse\tkilled\nfalse\tended\nfalse\tboom\n"
      .. "true\tdone\ntrue\tdone\n", out)
  end)

  it("kills a killed thread's own sockets and threads", function()
    local out = run([[
      local inner
      local t = http.spawn(function()
        inner = http.spawn(function() http.sleep(5) end)
        http.sleep(5)
      end)
      http.sleep(0.01)
      t:kill()
      print(inner:join())
    ]])
    assert.equal("false\tkilled\n", out)
  end)

  it("raises for misuse", function()
    local out = run([[
      print(pcall(http.spawn, 42))
      local me
      me = http.spawn(function() return pcall(me.join, me) end)
      print(me:join())
    ]])
    assert.matches("false\t[^\n]*function expected", out)
    assert.matches("true\tfalse\t[^\n]*cannot join itself", out)
  end)

  it("threads of a request are killed when the handler returns early", function()
    local srv = H.start([[
      local http = require "moonhttp"
      local state = {}
      http.handle("/early", function(req, res)
        state.t = http.spawn(function() http.sleep(5); state.finished = true end)
        res:write("left")
      end)
      http.handle("/joined", function(req, res)
        local t = http.spawn(function() http.sleep(0.02); return "from thread" end)
        res:write(select(2, t:join()))
      end)
      http.handle("POST /body-in-thread", function(req, res)
        local t = http.spawn(function() return req:body() end)
        local ok, err = t:join()
        res:write(tostring(ok), " ", err:match("only the handler itself") or err, " ", req:body())
      end)
      http.handle("/status", function(req, res)
        res:write(tostring(state.t), " ", tostring(state.finished))
      end)
    ]])
    assert.equal("left", srv:get("/early").body)
    assert.equal("from thread", srv:get("/joined").body)
    assert.equal("false only the handler itself abc",
      srv:request("POST", "/body-in-thread", nil, "abc").body)
    assert.equal("moonhttp.Thread (ended) nil", srv:get("/status").body)
    srv:stop()
  end)
end)

describe("timers", function()
  it("run once, repeat, cancel, and pass arguments", function()
    local out = run([[
      local n = 0
      local e = http.every(0.02, function() n = n + 1 end)
      http.timer(0.01, function(a, b) print("timer", a, b) end, "x", 2)
      local c = http.timer(0.01, function() print("never") end)
      print(c:cancel(), c:cancel())
      http.sleep(0.15)
      print(e:cancel(), n >= 4, n <= 8)
      local before = n
      http.sleep(0.05)
      print(n == before)
    ]])
    assert.equal("true\tfalse\ntimer\tx\t2\ntrue\ttrue\ttrue\ntrue\n", out)
  end)

  it("a failing callback is logged with its traceback and the next one still runs", function()
    local code, out = H.run_lua([[
      http.timer(0, function() error("timer fails") end)
      http.sleep(0.02)
      local ok = false
      http.timer(0, function() http.sleep(0.01); ok = true end)
      http.sleep(0.05)
      print("after", ok)
    ]])
    assert.equal(0, code, out)
    assert.matches("timer error: [^\n]*timer fails\nstack traceback:", out)
    assert.matches("after\ttrue", out)
  end)

  it("counts failing timers, on_start functions and threads in the metrics", function()
    local srv = H.start([[
      local http = require "moonhttp"
      http.on_start(function()
        http.timer(0, function() error("timer fails") end)
        http.every(0.01, function(self) error("every fails") end)
        http.spawn(function() error("thread fails") end):join()
        error("on_start fails")
      end)
      http.handle("GET /metrics", http.metrics_handler())
    ]])
    H.sleep(0.2)
    local text = srv:get("/metrics").body
    srv:stop()
    local timers = tonumber(text:match('moonhttp_task_errors_total{kind="timer"} (%d+)'))
    assert.truthy(timers and timers >= 3, text)
    assert.matches('moonhttp_task_errors_total{kind="on_start"} 1\n', text)
    assert.matches('moonhttp_task_errors_total{kind="thread"} 1\n', text)
    assert.matches("on_start error: [^\n]*on_start fails", srv:logtext())
  end)

  it("refuses timers past max_pending_timers", function()
    local path = H.script([[
      local http = require "moonhttp"
      local n, err = 0
      for i = 1, 10 do
        local t, e = http.timer(10, function() end)
        if t then n = n + 1 else err = e end
      end
      print(n, err)
    ]])
    local code, out = H.run({ "run", "--max-pending-timers", "4", path })
    os.remove(path)
    assert.equal(0, code, out)
    assert.equal("4\ttoo many pending timers\n", out)
  end)

  it("cannot be set while the script loads", function()
    local code, out = H.run({ "--check", H.script([[
      local http = require "moonhttp"
      http.timer(1, function() end)
    ]]) })
    assert.are_not.equal(0, code)
    assert.matches("not while the script loads", out)
  end)

  it("on_start runs in the worker, may wait, and timers of a reloaded generation stop", function()
    local file = H.tmpname(".count")
    local script = H.script(string.format([[
      local http = require "moonhttp"
      local started, ticks = "no", 0
      http.on_start(function()
        http.sleep(0.01) -- may wait
        started = "yes"
        http.every(0.02, function()
          ticks = ticks + 1
          local f = io.open(%q, "a"); f:write("GEN\n"); f:close()
        end)
      end)
      http.handle("/", function(req, res) res:write(started) end)
    ]], file))
    local srv = H.start(script)
    H.sleep(0.1)
    assert.equal("yes", srv:get("/").body)
    assert.truthy((H.read_file(file) or ""):find("GEN"))
    -- reload with code that writes a different marker: the old timer must stop
    H.write_file(script, (H.read_file(script):gsub("GEN", "NEW")))
    srv:signal("HUP")
    H.sleep(0.3)
    H.write_file(file, "")
    H.sleep(0.15)
    local after = H.read_file(file)
    srv:stop()
    os.remove(file)
    assert.truthy(after:find("NEW"), after)
    assert.falsy(after:find("GEN"), after)
  end)

  it("kills the previous code's background loops shutdown_timeout after a reload", function()
    local file = H.tmpname(".count")
    local script = H.script(string.format([[
      local http = require "moonhttp"
      local function mark(tag) local f = io.open(%q, "a"); f:write(tag, "\n"); f:close() end
      http.on_start(function()
        -- loops that never return: an on_start function, a light thread, a timer callback
        http.spawn(function() while true do mark("GEN-thread"); http.sleep(0.02) end end)
        http.timer(0, function() while true do mark("GEN-timer"); http.sleep(0.02) end end)
        while true do mark("GEN-start"); http.sleep(0.02) end
      end)
      http.handle("/", function(req, res) res:write("GEN") end)
    ]], file))
    local srv = H.start(script, { flags = { "--shutdown-timeout", "0.5" } })
    H.sleep(0.2)
    H.write_file(script, (H.read_file(script):gsub("GEN", "NEW")))
    srv:signal("HUP")
    H.sleep(0.2)
    assert.equal("NEW", srv:get("/").body)
    -- within shutdown_timeout the old loops still run...
    H.write_file(file, "")
    H.sleep(0.1)
    local during = H.read_file(file)
    -- ...and after it they are gone
    H.sleep(0.6)
    H.write_file(file, "")
    H.sleep(0.15)
    local after = H.read_file(file)
    local log = srv:logtext()
    assert.equal(0, srv:stop())
    os.remove(file)
    for _, tag in ipairs({ "GEN-start", "GEN-thread", "GEN-timer" }) do
      assert.truthy(during:find(tag, 1, true), tag .. " should still run: " .. during)
      assert.falsy(after:find(tag, 1, true), tag .. " should be killed: " .. after)
    end
    assert.truthy(after:find("NEW-start", 1, true), after)
    assert.truthy(log:find("3 background tasks of the previous code still running after shutdown_timeout; killing them", 1, true), log)
  end)
end)
