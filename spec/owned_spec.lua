-- Nothing left behind by a dead worker (issue 45): shared-dict keys set with
-- { owner = "worker" } are removed by the master when that worker exits,
-- however it ends (kill -9 here, a stop below), while keys without an owner
-- and the other worker's stay; a dead worker's channel subscriptions are
-- released, so publishing goes on reaching the living; moonhttp.presence's
-- members, built on them, vanish with the worker that joined them.
local H = require "helper"
local O = require "ops_helper"

local APP = [[
local http = require "moonhttp"
http.server{ shared = { state = "1m", lobby = "1m" } }
local lobby = require("moonhttp.presence").new{ dict = "lobby" }
local function me() return tostring(io.open("/proc/self/stat"):read("n")) end
http.handle("GET /own", function(req, res)
  local k = req:arg("k")
  assert(http.shared.state:set(k, me(), { owner = "worker" }))
  assert(http.shared.state:set("plain:" .. k, me()))
  res:write(me())
end)
http.handle("GET /get", function(req, res)
  res:write(tostring(http.shared.state:get(req:arg("k"))))
end)
http.handle("GET /misuse", function(req, res)
  local ok, err = pcall(http.shared.state.set, http.shared.state, "k", 1, { owner = "me" })
  local ok2, err2 = pcall(http.shared.state.set, http.shared.state, "k", 1, { ownr = "worker" })
  res:write(tostring(ok), " ", err, "\n", tostring(ok2), " ", err2)
end)
http.handle("GET /hold", function(req, res)
  local sub = http.channel("room"):subscribe()
  res:write(me() .. "\n") -- sent before the receive waits (the flush rule)
  while true do
    local msg = sub:receive()
    if not msg then return end
    res:write(msg .. "\n")
  end
end)
http.handle("GET /join", function(req, res)
  assert(lobby:join("room1", req:arg("m"), me()))
  res:write(me())
end)
http.handle("GET /list", function(req, res)
  local names = {}
  for m, pid in pairs(lobby:list("room1")) do names[#names + 1] = m .. "=" .. pid end
  table.sort(names)
  res:write(lobby:count("room1"), " ", table.concat(names, ","))
end)
http.handle("GET /presence_misuse", function(req, res)
  local ok, err = pcall(lobby.join, lobby, "room1", "")
  local ok2, err2 = pcall(require("moonhttp.presence").new, {})
  res:write(tostring(ok), " ", err, "\n", tostring(ok2), " ", err2)
end)
http.handle("GET /pub", function(req, res)
  res:write(tostring(http.channel("room"):publish(req:arg("m"))))
end)
]]

-- Requests path .. i (i = 1, 2, ...) until at least `least` were made and both workers
-- answered some: the names each worker's requests made, by pid, then the two pids.
local function on_both(srv, path, least)
  local by = {}
  for i = 1, 200 do
    local pid = srv:get(path .. i).body
    by[pid] = by[pid] or {}
    table.insert(by[pid], path:match("=(.*)$") .. i)
    local n = 0
    for _ in pairs(by) do n = n + 1 end
    if i >= least and n == 2 and #O.children(srv.pid) == 2 then break end
  end
  local a, b = table.unpack(O.children(srv.pid))
  a, b = tostring(a), tostring(b)
  assert.truthy(by[a] and by[b], "both workers answered " .. path)
  return by, a, b
end

describe("keys a worker owns", function()
  it("go when it is killed -9; its subscriptions are released and publishing goes on", function()
    local srv = H.start(APP, { flags = { "--workers", "2" } })
    finally(function() if not srv.stopped then srv:stop() end end)
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    -- keys owned by each worker (the accepting worker is the kernel's choice)
    local owned, victim, survivor = on_both(srv, "/own?k=k", 60)
    -- streams subscribed to the channel in both workers
    local holds = {}
    for _ = 1, 30 do
      local c = srv:connect()
      assert(c:send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n"))
      repeat local h = c:read_line() until h == ""
      local line = c:read_line() -- the chunk size, then the pid
      local pid = (c:read_line() or ""):match("%d+")
      assert.truthy(line and pid, "a /hold stream answered")
      holds[pid] = holds[pid] or {}
      table.insert(holds[pid], c)
      if holds[victim] and holds[survivor] then break end
    end
    local seen = {}
    for pid, cs in pairs(holds) do seen[#seen + 1] = pid .. "=" .. #cs end
    assert.truthy(holds[victim] and holds[survivor], "both workers hold subscriptions: " .. table.concat(seen, " ") .. " victim " .. victim .. " survivor " .. survivor)
    local t0 = H.now()
    os.execute("kill -9 " .. victim)
    -- the victim's owned keys go within about a second; its plain keys and the survivor's stay
    local gone = O.wait_for(function()
      for _, k in ipairs(owned[victim]) do
        if srv:get("/get?k=" .. k).body ~= "nil" then return false end
      end
      return true
    end, 3, 0.02)
    local took = H.now() - t0
    assert.truthy(gone, "the killed worker's keys stayed")
    assert.truthy(took < 1, took)
    for _, k in ipairs(owned[victim]) do assert.equal(victim, srv:get("/get?k=plain:" .. k).body) end
    for _, k in ipairs(owned[survivor]) do assert.equal(survivor, srv:get("/get?k=" .. k).body) end
    assert.truthy(srv:logtext():find(("shared dict state: %d keys of worker %s removed with it"):format(
      #owned[victim], victim), 1, true), srv:logtext())
    -- publishing goes on: every living subscriber gets it
    assert.equal("true", srv:get("/pub?m=after").body)
    for _, c in ipairs(holds[survivor]) do
      c:read_line()
      assert.equal("after\n", c:read_line())
      c:close()
    end
    for _, c in ipairs(holds[victim]) do c:close() end
    print(("kill -9 of a worker owning %d keys: gone in %.3f s"):format(#owned[victim], took))
    assert.equal(0, srv:stop())
  end)

  it("go when the worker stops, and a wrong owner is an error", function()
    local srv = H.start(APP, { flags = { "--workers", "2" } })
    finally(function() if not srv.stopped then srv:stop() end end)
    assert.equal("false dict:set: owner must be \"worker\" (the key goes when this worker exits)\n"
      .. "false dict:set: unknown option \"ownr\" (did you mean \"owner\"?)",
      (srv:get("/misuse").body:gsub("[^\n ]*:%d+: ", "")))
    local pid = srv:get("/own?k=a").body
    os.execute("kill -TERM " .. pid) -- one worker stops cleanly; the master replaces it
    assert.truthy(O.wait_for(function() return srv:get("/get?k=a").body == "nil" end, 3))
    assert.equal(pid, srv:get("/get?k=plain:a").body)
    assert.equal(0, srv:stop())
  end)

  it("presence: a killed worker's members leave the room", function()
    local srv = H.start(APP, { flags = { "--workers", "2" } })
    finally(function() if not srv.stopped then srv:stop() end end)
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    local joined, victim, survivor = on_both(srv, "/join?m=p", 40)
    local by = { [victim] = #joined[victim], [survivor] = #joined[survivor] }
    local total = by[victim] + by[survivor]
    assert.equal(tostring(total), srv:get("/list").body:match("^%d+"))
    os.execute("kill -9 " .. victim)
    local list
    assert.truthy(O.wait_for(function()
      list = srv:get("/list").body
      return list:match("^%d+") == tostring(by[survivor])
    end, 1, 0.02), list)
    assert.falsy(list:find("=" .. victim, 1, true), list)
    local _, n = list:gsub("=" .. survivor, "")
    assert.equal(by[survivor], n)
    assert.equal("false presence: member must be a non-empty string without NUL bytes\n"
      .. 'false presence.new: dict must name a shared dict (presence.new{ dict = "presence" })',
      (srv:get("/presence_misuse").body:gsub("[^\n ]*:%d+: ", "")))
    assert.equal(0, srv:stop())
  end)
end)
