-- Run-once work across workers: http.on_start(fn, { once = true }) runs in
-- one worker per start and per reload, and is taken over when that worker
-- dies before it is done; http.every(interval, fn, { once = true }) ticks
-- in one worker at a time and moves when that worker dies. The jobs append
-- "<what> <pid>" lines to a file the spec reads.
local H = require "helper"
local O = require "ops_helper"

local APP = [[
local http = require "moonhttp"
local path = os.getenv("ONCE_LOG")
local function pid() return io.open("/proc/self/stat"):read("n") end
local function mark(what)
  local f = assert(io.open(path, "a"))
  f:write(what, " ", pid(), "\n")
  f:close()
end
http.on_start(function()
  mark("begin")
  http.sleep(tonumber(os.getenv("ONCE_SLEEP") or "0.2"))
  mark("end")
end, { once = true })
http.on_start(function()
  mark("each")
  http.every(0.1, function() mark("tick") end, { once = true })
end)
http.handle("GET /pid", function(req, res) res:write(pid()) end)
]]

-- { what = { pid = count } } from the log file
local function marks(path)
  local out = {}
  for what, pid in (H.read_file(path) or ""):gmatch("(%a+) (%d+)\n") do
    out[what] = out[what] or {}
    out[what][pid] = (out[what][pid] or 0) + 1
  end
  return out
end

local function count(t)
  local n, total = 0, 0
  for _, c in pairs(t or {}) do n, total = n + 1, total + c end
  return n, total
end

local function start(extra_env)
  local log = H.tmpname(".once")
  local srv = H.start(APP, { flags = { "--workers", "2" },
                            env = "ONCE_LOG=" .. log .. " " .. (extra_env or "") })
  assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
  return srv, log
end

describe("{ once = true } with 2 workers", function()
  local srv, log
  after_each(function()
    if srv and not srv.stopped then assert.equal(0, srv:stop()) end
    if log then os.remove(log) end
  end)

  it("runs on_start once, every in one worker, both again after a worker dies or a reload", function()
    srv, log = start()
    assert.truthy(O.wait_for(function()
      local m = marks(log)
      return count(m.each) == 2 and count(m["end"]) == 1 and select(2, count(m.tick)) >= 5
    end, 10), H.read_file(log))
    H.sleep(0.3) -- a second run would have begun by now
    local m = marks(log)
    assert.same({ 1, 1 }, { count(m.begin) }, H.read_file(log))
    assert.equal(1, (count(m.tick)), "ticks from one worker only: " .. H.read_file(log))

    -- the worker that ticks dies: the other one (or its replacement) takes over
    local holder = tonumber((next(m.tick)))
    os.execute("kill -9 " .. holder)
    -- (the survivor may take the tick over before the replacement has started:
    -- both are waited for, the start of an ASan worker on a busy machine is slow)
    assert.truthy(O.wait_for(function()
      local mm = marks(log)
      if count(mm.each) ~= 3 then return false end
      for p, n in pairs(mm.tick) do if tonumber(p) ~= holder and n >= 3 then return true end end
    end, 10), H.read_file(log))
    -- the replacement worker did not run the once on_start of this start again
    m = marks(log)
    assert.same({ 1, 1 }, { count(m.begin) }, H.read_file(log))
    assert.equal(3, (count(m.each)))

    -- a reload is a new start: the once on_start runs once more, in one worker
    os.remove(log)
    srv:signal("HUP")
    assert.truthy(O.wait_for(function()
      m = marks(log)
      return count(m.each) == 2 and count(m["end"]) == 1
    end, 10), H.read_file(log) or "")
    H.sleep(0.5)
    -- the old workers gave the tick back when they stopped: one ticker again
    assert.truthy(O.wait_for(function() return select(2, count(marks(log).tick)) >= 3 end, 10),
      H.read_file(log))
    m = marks(log)
    assert.same({ 1, 1 }, { count(m.begin) }, H.read_file(log))
    local recent = {}
    for p in (H.read_file(log)):gmatch("tick (%d+)\n") do recent[#recent + 1] = p end
    for i = #recent - 2, #recent do assert.equal(recent[#recent], recent[i]) end
  end)

  it("hands a once on_start to another worker when its worker dies before it is done", function()
    srv, log = start("ONCE_SLEEP=30")
    local first = O.wait_for(function() return next(marks(log).begin or {}) end, 5)
    assert.truthy(first, H.read_file(log) or "")
    H.sleep(0.3) -- the other worker waits for it meanwhile
    assert.same({ 1, 1 }, { count(marks(log).begin) }, H.read_file(log))
    os.execute("kill -9 " .. first)
    -- another worker begins it at once: not the 30 s the dead one would have slept
    assert.truthy(O.wait_for(function()
      local b = marks(log).begin or {}
      for p in pairs(b) do if p ~= first then return true end end
    end, 3), H.read_file(log))
    local m = marks(log)
    assert.same({ 2, 2 }, { count(m.begin) }, H.read_file(log))
    assert.is_nil(m["end"])
  end)
end)

describe("{ once = true }", function()
  it("runs in the only worker of a lone process", function()
    local log = H.tmpname(".once")
    local srv = H.start(APP, { env = "ONCE_LOG=" .. log })
    assert.truthy(O.wait_for(function()
      local m = marks(log)
      return count(m["end"]) == 1 and select(2, count(m.tick)) >= 2
    end, 5), H.read_file(log) or "")
    assert.equal(0, srv:stop())
    os.remove(log)
  end)

  it("checks its options", function()
    local code, out = H.run({ "--check", H.script([[
      local http = require "moonhttp"
      http.on_start(function() end, { onse = true })
    ]]) })
    assert.are_not.equal(0, code)
    assert.truthy(out:find('http.on_start: unknown option "onse" (did you mean "once"?)', 1, true), out)
    local srv = H.start([[
      local http = require "moonhttp"
      http.handle("GET /", function(req, res)
        local ok, err = pcall(http.every, 1, function() end, { once = true, interval = 2 })
        res:write(tostring(ok), " ", tostring(err):gsub("^.-:%d+: ", ""))
      end)
    ]])
    local r = H.request(srv.port, "GET", "/")
    assert.equal(200, r.status)
    assert.truthy(r.body:find('false http.every: unknown option "interval"', 1, true), r.body)
    assert.equal(0, srv:stop())
  end)
end)

-- The other workers wait for a once on_start: a worker accepts only after
-- every { once = true } on_start of its code has run (in it or another
-- worker), so what the job creates exists for every request. A job that
-- fails lets them go on; one that runs past once_start_timeout is logged
-- and the workers serve anyway.
local WAIT_APP = [[
local http = require "moonhttp"
http.server{ shared = { s = "1m" } }
http.on_start(function()
  http.sleep(tonumber(os.getenv("ONCE_SLEEP")))
  if os.getenv("ONCE_FAIL") then error("schema failed") end
  http.shared.s:set("schema", "ready")
end, { once = true })
http.handle("GET /key", function(req, res)
  res:write(http.shared.s:get("schema") or "missing", " ", io.open("/proc/self/stat"):read("n"))
end)
]]

-- n requests, each on its own connection, all sent before any answer is read
local function answers(port, n)
  local socket = require "socket"
  local conns, out = {}, {}
  for i = 1, n do
    conns[i] = assert(socket.connect("127.0.0.1", port))
    conns[i]:settimeout(10)
  end
  for _, c in ipairs(conns) do c:send("GET /key HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") end
  for _, c in ipairs(conns) do
    local text, err, part = c:receive("*a")
    out[#out + 1] = (text or part or err):match("\r\n\r\n(.*)$") or ("no answer: " .. tostring(err))
    c:close()
  end
  return out
end

describe("workers waiting for a once on_start", function()
  local srv
  after_each(function()
    if srv and not srv.stopped then assert.equal(0, srv:stop()) end
    srv = nil
  end)

  it("serve no request before it has run: every worker's answer sees what it made", function()
    srv = H.start(WAIT_APP, { flags = { "--workers", "3" }, env = "ONCE_SLEEP=0.5" })
    local t0 = require("socket").gettime()
    local pids, n = {}, 0
    while require("socket").gettime() - t0 < 1.5 do
      for _, a in ipairs(answers(srv.port, 30)) do
        assert.truthy(a:match("^ready %d+$"), a)
        pids[a:match("%d+$")] = true
        n = n + 1
      end
    end
    local workers = 0
    for _ in pairs(pids) do workers = workers + 1 end
    assert.truthy(workers >= 2, "answers from " .. workers .. " workers")
    assert.truthy(n >= 30)
  end)

  it("go on when it fails (logged)", function()
    srv = H.start(WAIT_APP, { flags = { "--workers", "2" }, env = "ONCE_SLEEP=0.2 ONCE_FAIL=1" })
    for _, a in ipairs(answers(srv.port, 10)) do assert.truthy(a:match("^missing %d+$"), a) end
    assert.truthy(srv:logtext():find("schema failed", 1, true), srv:logtext())
  end)

  it("serve after once_start_timeout when it runs on, with a warning", function()
    srv = H.start(WAIT_APP, { flags = { "--workers", "2", "--once-start-timeout", "1" },
                              env = "ONCE_SLEEP=30" })
    local t0 = require("socket").gettime()
    for _, a in ipairs(answers(srv.port, 10)) do assert.truthy(a:match("^missing %d+$"), a) end
    local waited = require("socket").gettime() - t0
    assert.truthy(waited > 0.7 and waited < 5, "waited " .. waited .. " s")
    assert.truthy(srv:logtext():find("still running after 1 s (once_start_timeout)", 1, true), srv:logtext())
  end)
end)

describe("a once on_start that blocks its worker's loop", function()
  it("is a stall: the worker is killed and replaced though it never served", function()
    local srv = H.start([[
      local http = require "moonhttp"
      http.on_start(function() os.execute("sleep 4") end, { once = true })
      http.handle("GET /", function(req, res) res:write("ok") end)
    ]], { flags = { "--workers", "2", "--worker-stall-timeout", "1" } })
    assert.truthy(O.wait_for(function() return srv:logtext():find("stalled", 1, true) end, 4),
      srv:logtext())
    assert.truthy(srv:logtext():find("blocked in a C or system call", 1, true), srv:logtext())
    assert.equal(0, srv:stop())
  end)
end)
