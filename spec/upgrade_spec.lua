-- Binary upgrade (issue 45): SIGUSR2 makes the master exec the binary now on
-- disk as a new master on the same listening sockets; once its workers
-- serve, the old master's workers drain as a reload's do and it exits. Under
-- load nothing is refused nor cut; a new binary or script that cannot start
-- leaves the old master serving and says why. The server runs from a copy of
-- the binary in a directory of its own, so a spec can replace that file as a
-- package update would.
local H = require "helper"
local O = require "ops_helper"
local cjson = require "cjson"

local APP = [[
local http = require "moonhttp"
local VERSION = "%s"
http.handle("GET /version", function(req, res) res:write("version=" .. VERSION) end)
http.handle("GET /ws", function(req, res)
  local ws = assert(req:websocket({ ping_interval = 0, idle_timeout = 0 }))
  ws:send(VERSION)
  while true do
    local data = ws:receive()
    if not data then return end
    ws:send(VERSION .. ":" .. data)
  end
end)
]]

local DRAIN, SPREAD = 1.5, 0.5
local NWS = 200 -- WebSockets held open through the upgrade

local function pid_in(path)
  return tonumber((H.read_file(path) or ""):match("%d+"))
end

local function alive(pid)
  return pid and os.execute("kill -0 " .. pid .. " 2>/dev/null") == true
end

describe("binary upgrade (SIGUSR2)", function()
  local dir, bin, script, pid_file, srv
  local real_bin = H.bin

  local function start(workers)
    H.bin = bin
    local ok, s = pcall(H.start, script, { flags = { "--workers", tostring(workers), "--pid-file", pid_file,
      "--drain-timeout", tostring(DRAIN), "--drain-spread", tostring(SPREAD), "--metrics", "127.0.0.1:0",
      "--once-start-timeout", "1" } })
    H.bin = real_bin
    assert(ok, s)
    return s
  end

  before_each(function()
    dir = H.tmpname("-upgrade")
    assert(os.execute("mkdir -p " .. H.shell_quote(dir)))
    bin, script, pid_file = dir .. "/moonhttp", dir .. "/app.lua", dir .. "/moonhttp.pid"
    assert(os.execute(("cp %s %s"):format(H.shell_quote(real_bin), H.shell_quote(bin))))
    H.write_file(script, APP:format("v1"))
    srv = start(2)
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
  end)

  after_each(function()
    -- the new master, if one took over, is no child of the spec's: stop it by its pid file
    local new = pid_in(pid_file)
    if new and new ~= srv.pid and alive(new) then
      os.execute("kill -TERM " .. new)
      O.wait_for(function() return not alive(new) end, 10)
    end
    if not srv.stopped then srv:stop() end
    os.execute("rm -rf " .. H.shell_quote(dir))
  end)

  it("refuses and cuts nothing under load, the new code answers, the old master leaves after draining", function()
    H.write_file(script, APP:format("v2"))
    local wrk = O.start_wrk(("http://127.0.0.1:%d/version"):format(srv.port), 4, 8)
    local metrics_port = assert(srv:wait_log("metrics on [^\n]*%(port (%d+)%)"))
    local cmd = ("/usr/bin/python3 spec/clients/upgrade_client.py %d %d %d 2>&1"):format(srv.port, srv.pid, NWS)
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    local ok, r = pcall(cjson.decode, out:match("{.*}") or "")
    assert(ok and r, out .. srv:logtext())
    local log = srv:logtext()
    -- requests with new connections and kept-alive ones: all answered 200; both codes
    -- answer while both masters' workers accept, only the new one once the old master left
    assert.truthy(r.requests > 100, out)
    assert.same({ 0, 0, 0, 0 }, { r.refused, r.cut, r.bad_status, r.timeout }, out .. log)
    assert.same({ { "v1" }, { "v2" }, 0 }, { r.first, r.last, r.old_after_exit }, out)
    -- the WebSockets stayed on the old code through the handover, then closed as a drain does
    assert.same({ { "v1" }, NWS, { ["1001"] = NWS }, {} }, { r.ws_first, r.echo_old, r.close_codes, r.ws_errors }, out)
    -- the old master left once its workers drained: not before the window, not long after
    assert.truthy(r.old_master_left_after and r.old_master_left_after >= DRAIN
      and r.old_master_left_after < DRAIN + SPREAD + 5, out)
    assert.equal(0, srv:wait(5))
    if wrk then
      local w = wrk:finish()
      assert.equal(0, w.socket_errors, w.text)
      assert.equal(0, w.non2xx, w.text)
    end
    -- the new master is the pid file's, serves the same port with the new code, and the old pid file is gone
    local new = pid_in(pid_file)
    assert.truthy(new and new ~= srv.pid and alive(new), log)
    assert.is_nil(H.read_file(pid_file .. ".oldbin"))
    assert.equal("version=v2", srv:try_get("/version"))
    -- the metrics listener was handed over too: the same port, served by the new master
    assert.truthy(log:find(new .. ": metrics on 127.0.0.1:0 (port " .. metrics_port .. ")", 1, true), log)
    assert.equal(200, (O.status(tonumber(metrics_port), "/metrics")))
    assert.truthy(log:find(srv.pid .. ": upgrade (SIGUSR2): the new master " .. new .. " serves", 1, true), log)
    assert.truthy(log:find(srv.pid .. ": stopped: the new master " .. new .. " serves", 1, true), log)
    H.check_sanitizers(log, "upgrade")
  end)

  -- What replaces the binary or the script, and what the old master's log must say.
  local broken = {
    { "a new binary that exits at start", function()
      os.remove(bin) -- a new inode, as a package update's rename gives
      H.write_file(bin, "#!/bin/sh\necho 'new binary: bad build' >&2\nexit 3\n")
      assert(os.execute("chmod +x " .. H.shell_quote(bin)))
    end, "ended %(exit status 3%) before it served" },
    { "a new script that does not load", function()
      H.write_file(script, APP:format("v2") .. "http.handle('GET /x', function() end\n")
    end, "ended %(exit status 1%) before it served" },
    { "a new binary that crashes at start", function()
      os.remove(bin)
      H.write_file(bin, "#!/bin/sh\nkill -SEGV $$\n")
      assert(os.execute("chmod +x " .. H.shell_quote(bin)))
    end, "ended %(killed by signal 11%) before it served" },
    { "a binary that is gone", function() os.remove(bin) end, "failed: cannot execute [^\n]*No such file" },
    -- stopped once_start_timeout (1 s, below) + 10 s after it started
    { "a new binary that never serves", function()
      os.remove(bin)
      H.write_file(bin, "#!/bin/sh\nexec sleep 60\n")
      assert(os.execute("chmod +x " .. H.shell_quote(bin)))
    end, "ended %(killed by signal 15%) before it served", 15 },
  }
  for _, row in ipairs(broken) do
    local name, breaks, says, within = row[1], row[2], row[3], row[4]
    it(name .. " leaves the old master serving, and its log says why", function()
      breaks()
      local before = srv:logtext()
      srv:signal("USR2")
      assert.truthy(srv:wait_log("upgrade %(SIGUSR2%)[^\n]*" .. says, within or 5), srv:logtext())
      assert.truthy(srv:logtext():find("this master[^\n]* serves on"), srv:logtext())
      -- the same master, the same workers, the old code; the pid file is its own again
      assert.equal("version=v1", srv:try_get("/version"))
      assert.is_true(srv:alive())
      assert.equal(srv.pid, pid_in(pid_file))
      assert.is_nil(H.read_file(pid_file .. ".oldbin"))
      assert.is_nil(srv:logtext():sub(#before + 1):find("old worker", 1, true))
      assert.equal(0, srv:stop())
    end)
  end
end)
