-- http.channel across worker processes: WebSocket subscribers on 2 workers
-- all get one publish; a slow subscriber is told how many it missed; a
-- publisher killed holding the channels' lock stops nobody else. Clients
-- are Debian's python3-websockets (spec/clients/chan_client.py).
local H = require "helper"
local O = require "ops_helper"

local APP = [[
local http = require "moonhttp"
local room = http.channel("room")
local function pid() return io.open("/proc/self/stat"):read("n") end

http.handle("GET /chat", function(req, res)
  local ws = assert(req:websocket())
  local sub = room:subscribe{ queue = tonumber(req:arg("q") or "128") }
  ws:send("ready " .. pid())
  if req:arg("slow") then http.sleep(tonumber(req:arg("slow"))) end
  local ended
  while true do
    local msg, err, n = sub:receive()
    if msg then
      if not ws:send(msg) then ended = "send failed"; break end
    elseif err == "missed" then
      ws:send("missed " .. n)
    else
      ended = err
      break
    end
  end
  io.stderr:write("subscriber ended: ", ended, "\n")
end)

http.handle("GET /pub", function(req, res)
  local n = tonumber(req:arg("n") or "1")
  for i = 1, n do
    assert(room:publish(req:arg("m") .. (n > 1 and (" " .. i) or "")))
  end
  res:write("ok")
end)

-- what a script gets wrong is an error at the call, not a crash
http.handle("GET /misuse", function(req, res)
  local out = {}
  for _, f in ipairs{
    function() http.channel("") end,
    function() http.channel(string.rep("x", 65)) end,
    function() room:subscribe{ queue = 0 } end,
    function() room:subscribe{ qeue = 4 } end,
    function() room:publish({}) end,
  } do
    local ok, err = pcall(f)
    out[#out + 1] = tostring(ok) .. " " .. tostring(err):gsub("^.-:%d+: ", "")
  end
  local ok, err = room:publish(string.rep("x", 64 * 1024 + 1))
  out[#out + 1] = tostring(ok) .. " " .. tostring(err)
  local sub = room:subscribe()
  out[#out + 1] = table.concat({ tostring(sub:receive(0.05)) }, " ")
  sub:close()
  out[#out + 1] = table.concat({ tostring(select(2, sub:receive())) }, " ")
  res:write(table.concat(out, "\n"))
end)
]]

local function client(srv, scenario, arg)
  local cmd = ("/usr/bin/python3 spec/clients/chan_client.py http://127.0.0.1:%d %s %s 2>&1"):format(
    srv.port, scenario, arg or "")
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  p:close()
  return out
end

describe("http.channel", function()
  local srv, hold
  before_each(function()
    hold = H.tmpname(".pid")
    srv = H.start(APP, { flags = { "--workers", "2" }, env = "MOONHTTP_TEST_CHAN_HOLD=" .. hold })
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
  end)
  after_each(function()
    if not srv.stopped then assert.equal(0, srv:stop()) end
    os.remove(hold)
  end)

  it("delivers one publish to 200 WebSocket subscribers on both workers", function()
    local out = client(srv, "fanout", 200)
    assert.truthy(out:find("got 200 of 200", 1, true), out)
    assert.truthy(out:find("workers 2", 1, true), out)
  end)

  it("tells a slow subscriber how many it missed, and the publisher never waits", function()
    local out = client(srv, "slow")
    -- a queue of 4: the oldest 16 of 20 were dropped while it slept
    assert.equal("published in under 0.5 s true\nmissed 16\nmsg 17\nmsg 18\nmsg 19\nmsg 20\n", out)
  end)

  it("keeps delivering after a publisher is killed holding the lock", function()
    local out = client(srv, "kill", hold)
    assert.truthy(out:find("held by a worker with subscribers true", 1, true), out)
    assert.truthy(out:find("survivors true all got it true", 1, true), out)
    assert.truthy(srv:logtext():find("channels: a process died holding their lock", 1, true))
    -- and the replacement worker serves channels too
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    out = client(srv, "fanout", 20)
    assert.truthy(out:find("got 20 of 20", 1, true), out)
  end)

  it("keeps a subscriber blocked in receive through SIGTERM's drain; a second SIGTERM ends it at once", function()
    local cmd = ("/usr/bin/python3 spec/clients/chan_client.py http://127.0.0.1:%d stop 2>&1"):format(srv.port)
    local p = assert(io.popen(cmd))
    assert.equal("ready", p:read("l"))
    srv:signal("TERM")
    -- the drain (shutdown_timeout, 10 s) keeps it: the server is still there after 1 s
    H.sleep(1)
    assert.is_true(srv:alive())
    local t0 = H.now()
    srv:signal("TERM")
    assert.equal(0, srv:wait(5))
    srv.stopped = true
    local took = H.now() - t0
    assert.equal("closed 1001", p:read("l"))
    p:close()
    -- a subscriber left blocked holds the stop for the drain (10 s and more): half
    -- of it tells the two apart, also with ASan's exit on a loaded machine
    assert.truthy(took < 5, ("the stop took %.2f s"):format(took))
  end)

  it("answers misuse with errors, and values for runtime failures", function()
    local body = assert(srv:try_get("/misuse"))
    assert.equal(table.concat({
      "false bad argument #1 to 'channel' (a channel name is 1 to 64 bytes)",
      "false bad argument #1 to 'channel' (a channel name is 1 to 64 bytes)",
      "false bad argument #1 to 'subscribe' (queue must be an integer from 1 to 65536)",
      'false ch:subscribe: unknown option "qeue" (did you mean "queue"?)',
      "false bad argument #1 to 'publish' (string expected, got table)",
      "nil too large",
      "nil",
      "closed",
    }, "\n"), body)
  end)
end)

describe("http.channel and a reload in place (one worker)", function()
  it("ends the old code's subscribers with \"stopping\" (no drain window)", function()
    local srv = H.start(APP, { flags = { "--drain-timeout", "0", "--drain-spread", "0" } })
    finally(function() if not srv.stopped then srv:stop() end end)
    local cmd = ("/usr/bin/python3 spec/clients/chan_client.py http://127.0.0.1:%d stop 2>&1"):format(srv.port)
    local p = assert(io.popen(cmd))
    assert.equal("ready", p:read("l"))
    local t0 = H.now()
    srv:signal("HUP")
    assert.equal("closed 1001", p:read("l"))
    p:close()
    assert.truthy(O.wait_for(function()
      return srv:logtext():find("subscriber ended: stopping", 1, true)
    end, 1), srv:logtext())
    assert.truthy(H.now() - t0 < 1)
    assert.equal(0, srv:stop())
  end)
end)

describe("http.channel while the script loads", function()
  it("is an error that says when channels can be used", function()
    local path = H.script([[
local http = require "moonhttp"
http.channel("x"):publish("too early")
]])
    local _, out = H.run({ "--check", path })
    assert.truthy(out:find("channels can be used once the server has started", 1, true), out)
  end)
end)
