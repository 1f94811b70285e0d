-- http.channel across the instances of a cluster, through the real binary
-- and one real redis-server: three instances of two workers each; a
-- message published on one reaches the subscribers of every worker of every
-- instance, through one Redis subscription connection per instance; 2,000
-- room channels, each its own; redis-server restarted mid-stream: the
-- publishes it missed fail, every subscriber gets a gap notice, and
-- delivery resumes.
local H = require "helper"
local O = require "ops_helper"
local C = require "helpers.cluster"

local function app(port)
  return string.format([[
local http = require "moonhttp"
http.server{ cluster = { redis = "redis://127.0.0.1:%d/0", name = "lobby", heartbeat = 0.25, ttl = 2 } }
local function pid() return math.tointeger(io.open("/proc/self/stat"):read("n")) end
local function note(line)
  local f = io.open(os.getenv("NOTES"), "a")
  f:write(line, "\n")
  f:close()
end
-- every worker listens to the lobby
http.on_start(function()
  local sub = assert(http.channel("lobby"):subscribe({ queue = 1000 }))
  while true do
    local msg, err = sub:receive()
    if err == "stopping" then return end
    note(pid() .. " lobby " .. (msg or err))
  end
end)
-- and to this server's own lobby
http.on_start(function()
  local sub = assert(http.channel("lobby", { cluster = false }):subscribe())
  while true do
    local msg, err = sub:receive()
    if err == "stopping" then return end
    note(pid() .. " local " .. (msg or err))
  end
end)
http.handle("GET /pub_local", function(req, res)
  local ok, err = http.channel("lobby", { cluster = false }):publish(req:arg("m"))
  res:write(ok and "ok" or ("error " .. tostring(err)))
end)
http.handle("GET /pub", function(req, res)
  local ok, err = http.channel(req:arg("ch") or "lobby"):publish(req:arg("m"))
  res:write(ok and "ok" or ("error " .. tostring(err)))
end)
-- a thread per room, each listening to its room's channel (in a timer's task, which waits
-- for them: a handler's threads end with it)
http.handle("GET /rooms", function(req, res)
  local n = tonumber(req:arg("n"))
  http.timer(0, function()
    local threads = {}
    for i = 1, n do
      threads[i] = http.spawn(function()
        local sub = assert(http.channel("room:" .. i):subscribe())
        local msg, err = sub:receive(30)
        note("room:" .. i .. " " .. (msg or err))
      end)
    end
    for _, t in ipairs(threads) do t:join() end
  end)
  res:write("ok")
end)
http.handle("GET /pub_rooms", function(req, res)
  local n = 0
  for i = 1, tonumber(req:arg("n")) do
    if http.channel("room:" .. i):publish("m" .. i) then n = n + 1 end
  end
  res:write(n)
end)
]], port)
end

local PREFIX = "moonhttp:cluster:lobby:channel:"

local redis_cli = C.redis_cli

local function lines_of(text)
  local out = {}
  for line in text:gmatch("[^\n]+") do out[#out + 1] = line end
  return out
end

local function lines(path) return lines_of(H.read_file(path) or "") end

-- How many instances Redis says listen to channel name.
local function listeners(port, name)
  return tonumber(redis_cli(port, "PUBSUB NUMSUB " .. PREFIX .. name):match("\n(%d+)$")) or 0
end

-- Redis connections in pub/sub mode.
local function subscribed_clients(port)
  local n = 0
  for line in redis_cli(port, "CLIENT LIST"):gmatch("[^\n]+") do
    if line:find(" sub=[1-9]") or line:find(" psub=[1-9]") then n = n + 1 end
  end
  return n
end

describe("channels across a cluster of three instances", function()
  local fx = C.fixture()

  local function start_three()
    local script = H.script(app(fx.redis.port))
    for i = 1, 3 do
      fx.servers[i] = H.start(script, { flags = { "--workers", "2" }, env = "NOTES=" .. fx.notes .. "." .. i })
    end
    for i = 1, 3 do
      assert.truthy(O.wait_for(function() return #O.children(fx.servers[i].pid) == 2 end, 5))
    end
    assert.truthy(O.wait_for(function() return listeners(fx.redis.port, "lobby") == 3 end, 5),
      "instances subscribed to the lobby: " .. listeners(fx.redis.port, "lobby"))
  end

  -- The lobby lines of instance i: { [pid] = { msg, ... } }.
  local function lobby_of(i)
    local by = {}
    for _, l in ipairs(lines(fx.notes .. "." .. i)) do
      local pid, msg = l:match("^(%d+) lobby (.*)$")
      if pid then
        by[pid] = by[pid] or {}
        table.insert(by[pid], msg)
      end
    end
    return by
  end

  local function count(t)
    local n = 0
    for _ in pairs(t) do n = n + 1 end
    return n
  end

  it("deliver a publish on one to every worker of every instance, one subscription each", function()
    start_three()
    assert.equal("ok", fx.servers[2]:get("/pub?m=hello").body)
    for i = 1, 3 do
      assert.truthy(O.wait_for(function()
        local by = lobby_of(i)
        if count(by) ~= 2 then return false end
        for _, msgs in pairs(by) do
          if msgs[1] ~= "hello" then return false end
        end
        return true
      end, 5), "instance " .. i .. ": " .. (H.read_file(fx.notes .. "." .. i) or ""))
    end
    -- six workers listen; Redis sees one subscription connection per instance
    assert.equal(3, subscribed_clients(fx.redis.port))
  end)

  it("keep a { cluster = false } channel to its server", function()
    start_three()
    assert.equal("ok", fx.servers[1]:get("/pub_local?m=mine").body)
    assert.equal("ok", fx.servers[1]:get("/pub?m=everyone").body)
    for i = 1, 3 do
      assert.truthy(O.wait_for(function() return count(lobby_of(i)) == 2 end, 5))
    end
    local text = H.read_file(fx.notes .. ".1")
    assert.equal(2, select(2, text:gsub("%d+ local mine\n", "")), text)
    for i = 2, 3 do
      text = H.read_file(fx.notes .. "." .. i)
      assert.falsy(text:find("local"), text)
    end
    -- Redis has the relay's own name and the lobby, not the local one
    assert.equal(2, #lines_of(redis_cli(fx.redis.port, "PUBSUB CHANNELS '*'")))
  end)

  it("carry 2,000 room channels, each to its own room", function()
    start_three()
    local N = 2000
    for i = 2, 3 do assert.equal("ok", fx.servers[i]:get("/rooms?n=" .. N).body) end
    assert.truthy(O.wait_for(function()
      return listeners(fx.redis.port, "room:1") == 2 and listeners(fx.redis.port, "room:" .. N) == 2
        and tonumber(redis_cli(fx.redis.port, "PUBSUB NUMPAT")) == 0
        and select(2, redis_cli(fx.redis.port, "PUBSUB CHANNELS '" .. PREFIX .. "room:*'"):gsub("\n", "")) == N - 1
    end, 10), "rooms subscribed: " .. listeners(fx.redis.port, "room:1"))
    assert.equal(tostring(N), fx.servers[1]:get("/pub_rooms?n=" .. N).body)
    for i = 2, 3 do
      assert.truthy(O.wait_for(function() return #lines(fx.notes .. "." .. i) >= N end, 10),
        "instance " .. i .. " got " .. #lines(fx.notes .. "." .. i))
      local got = {}
      for _, l in ipairs(lines(fx.notes .. "." .. i)) do
        local room, msg = l:match("^room:(%d+) (.*)$")
        if room then
          assert.equal("m" .. room, msg)
          got[room] = true
        end
      end
      assert.equal(N, count(got))
    end
    -- the rooms' subscribers are gone: their names leave Redis
    assert.truthy(O.wait_for(function() return listeners(fx.redis.port, "room:1") == 0 end, 5))
  end)

  it("give a gap notice when redis-server restarts mid-stream, and deliver on", function()
    start_three()
    local port = fx.redis.port
    local sent, failed = {}, 0
    local restarted = false
    for k = 1, 80 do
      local body = fx.servers[1]:get("/pub?m=" .. k).body
      if body == "ok" then sent[#sent + 1] = k else failed = failed + 1 end
      if k == 20 then
        fx.redis:stop()
        restarted = true
      elseif k == 30 and restarted then
        fx.redis = H.service(string.format("redis-server --port %d --bind 127.0.0.1 --save '' "
          .. "--appendonly no --daemonize no", port), function(text)
          if text:find("Ready to accept connections", 1, true) then return port end
        end)
        assert.truthy(O.wait_for(function() return listeners(port, "lobby") == 3 end, 5))
      end
      H.sleep(0.02)
    end
    assert.is_true(failed >= 5, failed .. " publishes failed while redis-server was away")
    assert.equal(80 - failed, #sent)
    for i = 1, 3 do
      assert.truthy(O.wait_for(function()
        for _, msgs in pairs(lobby_of(i)) do
          if msgs[#msgs] ~= tostring(sent[#sent]) then return false end
        end
        return true
      end, 5), H.read_file(fx.notes .. "." .. i))
      local by = lobby_of(i)
      assert.equal(2, count(by))
      for pid, msgs in pairs(by) do
        -- in order, none twice, none that failed; one gap, between the outage's two sides
        local last, gaps, gap_at = 0, 0, nil
        for j, m in ipairs(msgs) do
          if m == "gap" then
            gaps, gap_at = gaps + 1, j
          else
            local k = tonumber(m)
            assert.is_true(k > last, "instance " .. i .. " worker " .. pid .. ": " .. table.concat(msgs, " "))
            last = k
          end
        end
        assert.equal(1, gaps, table.concat(msgs, " "))
        assert.is_true(tonumber(msgs[gap_at - 1]) <= 20 and tonumber(msgs[gap_at + 1]) > 30, table.concat(msgs, " "))
        assert.equal(tostring(sent[1]), msgs[1])
      end
    end
    assert.equal(3, subscribed_clients(port))
  end)
end)
