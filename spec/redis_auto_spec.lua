-- moonhttp.redis's automatic pipelining (redis.connect{ auto_pipeline = true }),
-- through the real binary against a real redis-server: commands issued by
-- different tasks in one loop iteration go out together on one shared
-- connection, each caller gets its own reply, an error reply stays with its
-- command, a failed connection fails every command in flight, and commands
-- that block or change the connection's state never share it.
local H = require "helper"

local function run(source, port)
  local code, out = H.run_lua(string.format("local redis = require 'moonhttp.redis'\n"
    .. "local PORT = %d\n", port) .. source)
  assert.equal(0, code, out)
  return out
end

-- A Lua script that keeps redis-server busy for `seconds` (a slow reply).
local SPIN = [[
local t = redis.call('TIME')
local s = t[1] + t[2] / 1e6
while true do
  local n = redis.call('TIME')
  if n[1] + n[2] / 1e6 - s > tonumber(ARGV[1]) then break end
end
return 'spun']]

describe("moonhttp.redis auto_pipeline", function()
  local srv

  setup(function() srv = H.redis() end)
  teardown(function() srv:stop() end)

  it("sends the commands of one loop iteration together and answers each its own", function()
    local out = run([==[
      local ctl = assert(redis.connect{ port = PORT })
      local function reads()
        return tonumber(ctl:info("stats"):match("total_reads_processed:(%d+)"))
      end
      local clients = select(2, ctl:client("list"):gsub("\n", ""))
      local AUTO = { port = PORT, auto_pipeline = true }
      for i = 1, 100 do ctl:set("auto:" .. i, "v" .. i) end
      local before = reads()
      local threads, got = {}, {}
      for i = 1, 100 do
        threads[i] = http.spawn(function()
          local r = assert(redis.connect(AUTO))
          got[i] = assert(r:get("auto:" .. i))
          assert(r:keepalive())
        end)
      end
      for i = 1, 100 do threads[i]:join() end
      local ok = 0
      for i = 1, 100 do if got[i] == "v" .. i then ok = ok + 1 end end
      -- redis read the 100 commands in a few reads (one per connection each, without)
      local used = reads() - before
      print(ok, used < 10 and "few reads" or used .. " reads",
        select(2, ctl:client("list"):gsub("\n", "")) - clients)
    ]==], srv.port)
    assert.equal("100\tfew reads\t1\n", out)
  end)

  it("answers 1,500 concurrent commands, past the queue's bound on connections of their own", function()
    local out = run([==[
      local AUTO = { port = PORT, auto_pipeline = true, pool_size = 8 }
      local r0 = assert(redis.connect{ port = PORT })
      r0:del("auto:n")
      local threads, got = {}, {}
      for i = 1, 1500 do
        threads[i] = http.spawn(function()
          local r = assert(redis.connect(AUTO))
          got[i] = r:incr("auto:n")
          r:keepalive()
        end)
      end
      for i = 1, 1500 do threads[i]:join() end
      local seen, dup = {}, 0
      for i = 1, 1500 do
        if seen[got[i]] then dup = dup + 1 end
        seen[got[i]] = true
      end
      print(r0:get("auto:n"), dup, #got)
    ]==], srv.port)
    assert.equal("1500\t0\t1500\n", out)
  end)

  it("keeps an error reply with its command in the middle of a batch", function()
    local out = run([==[
      local AUTO = { port = PORT, auto_pipeline = true }
      local r0 = assert(redis.connect{ port = PORT })
      r0:set("auto:str", "x")
      r0:set("auto:a", "A")
      r0:set("auto:b", "B")
      local res = {}
      local function go(i, f)
        return http.spawn(function()
          local r = assert(redis.connect(AUTO))
          res[i] = table.pack(f(r))
        end)
      end
      local t = {
        go(1, function(r) return r:get("auto:a") end),
        go(2, function(r) return r:lpush("auto:str", "y") end), -- WRONGTYPE
        go(3, function(r) return r:nosuchcommand() end),
        go(4, function(r) return r:get("auto:b") end),
      }
      for _, th in ipairs(t) do th:join() end
      print(res[1][1], res[2][1], res[2][2]:match("^WRONGTYPE") ~= nil, res[3][1],
        res[3][2]:match("^ERR unknown command") ~= nil, res[4][1])
    ]==], srv.port)
    assert.equal("A\tnil\ttrue\tnil\ttrue\tB\n", out)
  end)

  it("fails every command in flight when redis-server dies, then connects anew", function()
    local victim = H.redis()
    local out = run(string.format([==[
      local SPIN = %q
      local AUTO = { port = PORT, auto_pipeline = true, timeout = 5 }
      local res = {}
      local threads = {}
      -- redis-server is busy with the first command when it is killed: the
      -- batch's replies never come
      os.execute("(sleep 0.3; kill -9 %d) >/dev/null 2>&1 &")
      for i = 1, 10 do
        threads[i] = http.spawn(function()
          local r = assert(redis.connect(AUTO))
          if i == 1 then
            res[i] = table.pack(r:eval(SPIN, 0, 2))
          else
            res[i] = table.pack(r:get("k" .. i))
          end
        end)
      end
      local t0 = http.clock()
      for i = 1, 10 do threads[i]:join() end
      local failed = 0
      for i = 1, 10 do
        if res[i][1] == nil and type(res[i][2]) == "string" then failed = failed + 1 end
      end
      print(failed, http.clock() - t0 < 2)
      http.sleep(0.2)
      local r = assert(redis.connect(AUTO))
      print(r:get("k"))
    ]==], SPIN, victim.pid), victim.port)
    victim:stop()
    assert.equal("10\ttrue\nnil\tconnection refused\n", out)
  end)

  it("bounds a slow reply by timeout, for every command of its batch, then goes on", function()
    local out = run(string.format([==[
      local SPIN = %q
      local AUTO = { port = PORT, auto_pipeline = true, timeout = 0.5 }
      local res, threads = {}, {}
      for i = 1, 3 do
        threads[i] = http.spawn(function()
          local r = assert(redis.connect(AUTO))
          local t0 = http.clock()
          if i == 1 then res[i] = table.pack(r:eval(SPIN, 0, 1.2)) else res[i] = table.pack(r:ping()) end
          res[i].took = http.clock() - t0
        end)
      end
      for i = 1, 3 do threads[i]:join() end
      for i = 1, 3 do print(res[i][1], res[i][2], res[i].took > 0.4 and res[i].took < 1.0) end
      http.sleep(1) -- the script ends in redis-server
      local r = assert(redis.connect(AUTO))
      print(r:ping())
    ]==], SPIN), srv.port)
    assert.equal("nil\ttimeout\ttrue\nnil\ttimeout\ttrue\nnil\ttimeout\ttrue\nPONG\n", out)
  end)

  it("never shares a connection for commands that block or change its state", function()
    local out = run([==[
      local AUTO = { port = PORT, auto_pipeline = true }
      local r = assert(redis.connect(AUTO))
      -- SELECT takes a connection of its own, and the client keeps it
      print(r:select(2), r:set("auto:only2", "yes"), r:get("auto:only2"), r:reused() >= 0)
      assert(r:keepalive())
      local other = assert(redis.connect(AUTO))
      print(other:get("auto:only2") == redis.null) -- the shared connection is still on db 0
      -- a transaction stays on one connection while another task's commands share theirs
      local tx = assert(redis.connect(AUTO))
      print(tx:multi(), tx:incr("auto:tx"), tx:incr("auto:tx"))
      local th = http.spawn(function()
        local o = assert(redis.connect(AUTO))
        return o:set("auto:tx", 100)
      end)
      print(th:join())
      local replies = tx:exec()
      print(#replies, replies[1], replies[2])
      tx:keepalive()
      -- a blocking command waits on its own connection, not in front of others
      local b = assert(redis.connect(AUTO))
      local waiting = http.spawn(function() return b:blpop("auto:list", 2) end)
      http.sleep(0.1)
      local o = assert(redis.connect(AUTO))
      local t0 = http.clock()
      print(o:rpush("auto:list", "item"), http.clock() - t0 < 0.5)
      local _, list = waiting:join()
      print(list[1], list[2])
    ]==], srv.port)
    assert.equal("OK\tOK\tyes\ttrue\ntrue\nOK\tQUEUED\tQUEUED\ntrue\tOK\n2\t101\t102\n1\ttrue\nauto:list\titem\n", out)
  end)

  it("refuses a bad option and a bad argument as misuse, and keeps working", function()
    local out = run([==[
      print(pcall(redis.connect, { port = PORT, auto_pipeline = "yes" }))
      local r = assert(redis.connect{ port = PORT, auto_pipeline = true })
      print(pcall(r.set, r, "k", {}))
      print(r:set("auto:after", "ok"), r:get("auto:after"))
    ]==], srv.port)
    assert.matches("^false\t[^\n]*auto_pipeline must be a boolean\nfalse\t[^\n]*argument 3 must be a string "
      .. "or number[^\n]*\nOK\tok\n$", out)
  end)

  it("serves 1,000 concurrent HTTP handlers through the shared connection", function()
    local app = H.start(string.format([[
      local http = require "moonhttp"
      local redis = require "moonhttp.redis"
      local AUTO = { port = %d, auto_pipeline = true }
      http.handle("/v/{k}", function(req, res)
        local r = assert(redis.connect(AUTO))
        local v, err = r:echo("echo:" .. req:pathvalue("k"))
        r:keepalive()
        if not v then res:status(503) return res:write(err) end
        res:write(tostring(v))
      end)
      local before
      http.on_start(function()
        local r = assert(redis.connect{ port = %d })
        before = tonumber(r:info("stats"):match("total_reads_processed:(%%d+)"))
        r:keepalive()
      end)
      http.handle("/stats", function(req, res)
        local r = assert(redis.connect{ port = %d })
        res:write(tostring(tonumber(r:info("stats"):match("total_reads_processed:(%%d+)")) - before))
        r:keepalive()
      end)
    ]], srv.port, srv.port, srv.port))
    -- the requests come faster than one round trip each: handlers wait on
    -- the pipe together, and each must get the reply to its own ECHO
    local N = 1000
    local conns = {}
    for i = 1, N do conns[i] = H.connect(app.port) end
    for i = 1, N do conns[i]:send("GET /v/" .. i .. " HTTP/1.1\r\nHost: t\r\n\r\n") end
    local wrong = {}
    for i = 1, N do
      local res = conns[i]:read_response()
      assert.equal(200, res.status, res.body)
      if res.body ~= "echo:" .. i then wrong[#wrong + 1] = i .. " -> " .. res.body end
      conns[i]:close()
    end
    local stats = H.request(app.port, "GET", "/stats")
    app:stop()
    assert.same({}, wrong)
    -- and they shared: far fewer writes to redis-server than requests
    print("\n  redis-server reads for " .. N .. " requests: " .. stats.body)
    assert.is_true(tonumber(stats.body) < N / 2, "redis-server read " .. stats.body .. " times")
  end)
end)
