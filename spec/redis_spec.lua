-- moonhttp.redis against a real redis-server (started here on a free
-- loopback port), and its reply parser against malformed replies from a
-- fake peer (spec/servers/echo.py's "raw").
local H = require "helper"

local function run(source, port)
  local code, out = H.run_lua(string.format("local redis = require 'moonhttp.redis'\n"
    .. "local PORT = %d\n", port) .. source)
  assert.equal(0, code, out)
  return out
end

describe("moonhttp.redis", function()
  local srv

  setup(function() srv = H.redis() end)
  teardown(function() srv:stop() end)

  it("runs any command as a method and maps RESP2 replies", function()
    local out = run([[
      local r = assert(redis.connect{ port = PORT })
      print(r:set("k", "v"), r:get("k"), r:get("missing") == redis.null)
      print(r:incr("n"), math.type(r:incrby("n", 41)))
      print(r:hset("h", "f", "x"), r:hgetall("h")[1], r:hgetall("h")[2])
      print(r:call("ECHO", "bin\r\n\0data") == "bin\r\n\0data")
      local nested = r:eval("return {1, {2, 'three'}, false}", 0)
      print(#nested, nested[1], nested[2][1], nested[2][2], nested[3] == redis.null)
      print(r:del("k", "h"), r:exists("k"))
      print(#r:lrange("nolist", 0, -1))
    ]], srv.port)
    assert.equal("OK\tv\ttrue\n1\tinteger\n1\tf\tx\ntrue\n3\t1\t2\tthree\ttrue\n2\t0\n0\n", out)
  end)

  it("returns error replies as nil, msg, distinct from transport errors", function()
    local out = run([[
      local r = assert(redis.connect{ port = PORT })
      r:set("s", "x")
      print(r:lpush("s", "y"))
      print(r:nosuchcommand())
      print(r:get("s")) -- the connection is still fine after an error reply
      print(redis.connect{ port = 1 })
      print(pcall(r.set, r, "k", {}))
    ]], srv.port)
    assert.matches("^nil\tWRONGTYPE Operation against a key holding the wrong kind of value\n"
      .. "nil\tERR unknown command 'NOSUCHCOMMAND'[^\n]*\nx\nnil\tconnection refused\n"
      .. "false\t[^\n]*argument 3 must be a string or number", out)
  end)

  it("pipelines commands into one list of replies", function()
    local out = run([[
      local r = assert(redis.connect{ port = PORT })
      local replies = r:pipeline(function(p)
        p:set("p", 5)
        p:incrby("p", 2)
        p:get("p")
        p:hget("p", "f") -- wrong type: an error reply inside the list
        p:get("nothing")
      end)
      print(#replies, replies[1], replies[2], replies[3], tostring(replies[4]):match("^WRONGTYPE") ~= nil,
        replies[5] == redis.null)
      print(#r:pipeline(function() end))
    ]], srv.port)
    assert.equal("5\tOK\t7\t7\ttrue\ttrue\n0\n", out)
  end)

  it("selects a db and reuses pooled connections", function()
    local out = run([[
      local r = assert(redis.connect{ port = PORT, db = 3 })
      r:set("only3", "yes")
      print(r:reused())
      assert(r:keepalive())
      local again = assert(redis.connect{ port = PORT, db = 3 })
      print(again:reused(), again:get("only3"))
      again:keepalive()
      local zero = assert(redis.connect{ port = PORT })
      print(zero:reused(), zero:get("only3") == redis.null)
    ]], srv.port)
    assert.equal("0\n1\tyes\n0\ttrue\n", out)
  end)

  -- The pool's next user expects db 0 (its own db), no open transaction and
  -- nothing watched: a connection left otherwise is closed, not parked.
  it("closes, not parks, a connection left on another db or in a transaction", function()
    local out = run([[
      local function step(fn)
        local r = assert(redis.connect{ port = PORT })
        fn(r)
        assert(r:keepalive())
        local next_user = assert(redis.connect{ port = PORT })
        local reused, db0 = next_user:reused() > 0, next_user:get("db0")
        next_user:keepalive()
        return (reused and "reused " or "new ") .. tostring(db0)
      end
      assert(redis.connect{ port = PORT }):set("db0", "here")
      print("select", step(function(r) assert(r:select(5)) end))
      print("pipelined select", step(function(r) r:pipeline(function(p) p:select(6) end) end))
      print("multi", step(function(r) assert(r:multi()); r:set("queued", 1) end))
      print("watch", step(function(r) assert(r:watch("db0")) end))
      print("multi exec", step(function(r) assert(r:multi()); r:set("t", 1); assert(r:exec()) end))
      print("watch unwatch", step(function(r) r:watch("db0"); assert(r:unwatch()) end))
      print("pipelined multi exec", step(function(r)
        r:pipeline(function(p) p:multi(); p:incr("t"); p:exec() end)
      end))
      print("plain", step(function(r) r:get("db0") end))
    ]], srv.port)
    assert.equal("select\tnew here\npipelined select\tnew here\nmulti\tnew here\nwatch\tnew here\n"
      .. "multi exec\treused here\nwatch unwatch\treused here\npipelined multi exec\treused here\n"
      .. "plain\treused here\n", out)
  end)

  it("reads replies larger than one read, and pipelined replies arriving together", function()
    local out = run([[
      local r = assert(redis.connect{ port = PORT })
      local big = string.rep("0123456789abcdef", 65536) -- 1 MiB
      assert(r:set("big", big))
      print(r:get("big") == big, r:strlen("big"))
      local replies = r:pipeline(function(p)
        for i = 1, 20000 do p:rpush("list", "item" .. i) end
      end)
      print(#replies, replies[20000])
      local list = r:lrange("list", 0, -1)
      print(#list, list[1], list[20000])
      assert(r:set("small", "v"))
      replies = assert(r:pipeline(function(p)
        for i = 1, 200 do if i % 50 == 0 then p:get("big") else p:get("small") end end
        p:ping()
      end))
      local same = 0
      for i = 1, 200 do if replies[i] == (i % 50 == 0 and big or "v") then same = same + 1 end end
      print(same, replies[201])
      print(r:keepalive())
      local again = assert(redis.connect{ port = PORT })
      print(again:reused(), again:llen("list"))
    ]], srv.port)
    assert.equal("true\t1048576\n20000\t20000\n20000\titem1\titem20000\n200\tPONG\ntrue\n1\t20000\n", out)
  end)

  it("checks an options table again once it changed, and keeps a parked client closed", function()
    local out = run([[
      local opts = { port = PORT }
      local r = assert(redis.connect(opts))
      assert(r:set("where", "db0"))
      assert(r:keepalive())
      opts.db = 5 -- the same table, changed: another pool key, SELECT 5
      local r5 = assert(redis.connect(opts))
      print(r5:get("where") == redis.null, r5:reused())
      assert(r5:set("where", "db5"))
      assert(r5:keepalive())
      opts.db = nil
      local r0 = assert(redis.connect(opts))
      print(r0:get("where"))
      print(r:get("where")) -- parked: its socket now serves r0
      assert(r0:keepalive())
      opts.dbb = 1
      print(pcall(redis.connect, opts))
      opts.dbb, opts.db = nil, -1
      print(pcall(redis.connect, opts))
    ]], srv.port)
    assert.matches("^true\t0\ndb0\nnil\tclosed\nfalse\t[^\n]*redis.connect[^\n]*dbb[^\n]*\n"
      .. "false\t[^\n]*db must be a number >= 0\n$", out)
  end)

  it("encodes commands: numbers whole as integers, others with 17 digits, misuse raised", function()
    local out = run([[
      local bytes = redis.encode("SET", "k\r\n", 1.5, 3.0, -42, 2^63, "", math.maxinteger)
      print((bytes:gsub("\r\n", "|")))
      print(pcall(redis.encode, "SET", "k", {}))
      local r = assert(redis.connect{ port = PORT })
      print(r:set("n", 7.0), r:get("n"), r:set("f", 0.1), r:get("f"))
    ]], srv.port)
    assert.matches("^%*8|%$3|SET|%$3|k||%$3|1%.5|%$1|3|%$3|%-42|%$22|9%.2233720368547758e%+18|%$0||%$19|9223372036854775807|\n"
      .. "false\t[^\n]*argument 3 must be a string or number, got table\n"
      .. "OK\t7\tOK\t0%.10000000000000001\n$", out)
  end)

  it("authenticates with a password", function()
    local locked = H.redis("--requirepass s3cret")
    local out = run([[
      print(redis.connect{ port = PORT, password = "wrong" })
      local r = assert(redis.connect{ port = PORT, password = "s3cret" })
      print(r:ping())
    ]], locked.port)
    locked:stop()
    assert.matches("^nil\tWRONGPASS[^\n]*\nPONG\n$", out)
  end)

  it("delivers pub/sub messages on a dedicated connection", function()
    local out = run([[
      local sub = assert(redis.connect{ port = PORT })
      print(sub:subscribe("news")[1])
      local t = http.spawn(function()
        local pub = assert(redis.connect{ port = PORT })
        http.sleep(0.02)
        pub:publish("news", "hello")
        pub:keepalive()
      end)
      print(sub:read_message())
      sub:settimeout(0.05)
      print(sub:read_message())
      print(sub:keepalive())
      t:join()
    ]], srv.port)
    assert.equal("subscribe\nmessage\tnews\thello\nnil\ttimeout\nnil\tsubscribed\n", out)
  end)

  it("under load, opens as many connections as the pool size", function()
    local out = run([[
      local ctl = assert(redis.connect{ port = PORT, pool_size = 1 })
      local before = select(2, ctl:client("list"):gsub("\n", ""))
      local threads = {}
      for i = 1, 50 do
        threads[i] = http.spawn(function()
          for j = 1, 20 do
            local r = assert(redis.connect{ port = PORT, pool_size = 4, db = 1 })
            assert(r:incr("load") )
            assert(r:keepalive())
          end
        end)
      end
      local peak = 0
      for i = 1, 50 do
        local n = select(2, ctl:client("list"):gsub("\n", ""))
        if n > peak then peak = n end
        threads[i]:join()
      end
      local r = assert(redis.connect{ port = PORT, pool_size = 4, db = 1 })
      print(r:get("load"), peak - before)
    ]], srv.port)
    assert.equal("1000\t4\n", out)
  end)

  -- The client's own reader (read ahead, cut in C) on replies from
  -- spec/servers/resp_peer.py: whole, cut at every byte ("trickle").
  describe("client reader", function()
    local peer
    setup(function()
      peer = H.service("/usr/bin/python3 spec/servers/resp_peer.py", function(text)
        return text:match("port (%d+)")
      end)
    end)
    teardown(function() peer:stop() end)

    -- prints a reply: nested values by kind, error replies inside arrays as E:msg
    local SHOW = [=[
      local function show(v, err)
        if type(v) == "table" and v ~= redis.null then
          local parts = {}
          for i = 1, #v do
            local e = v[i]
            if getmetatable(e) == redis.ErrorReply then parts[i] = "E:" .. e.err
            elseif e == redis.null then parts[i] = "null"
            elseif type(e) == "table" then parts[i] = "{" .. #e .. "}"
            else parts[i] = tostring(e) end
          end
          return "[" .. table.concat(parts, ",") .. "]"
        end
        if v == nil then return "nil|" .. tostring(err) end
        return math.type(v) and math.type(v) .. ":" .. v or tostring(v)
      end
    ]=]

    local rows = {
      { "status", "+OK\r\n", "OK" },
      { "status with LF only", "+OK\n", "OK" },
      { "integer", ":-42\r\n", "integer:-42" },
      { "integer at the edge", ":-9223372036854775808\r\n", "integer:-9223372036854775808" },
      { "empty bulk", "$0\r\n\r\n", "" },
      { "bulk with CRLF inside", "$4\r\na\r\nb\r\n", "a\r\nb" },
      { "nil bulk", "$-1\r\n", "redis.null" },
      { "nil array", "*-1\r\n", "redis.null" },
      { "error reply", "-ERR bad thing\r\n", "nil|ERR bad thing" },
      { "nested array", "*4\r\n:1\r\n*2\r\n+a\r\n$-1\r\n-ERR x\r\n*-1\r\n", "[1,{2},E:ERR x,null]" },
      { "unknown type byte", "!5\r\n", "nil|protocol error" },
      { "integer not a number", ":12x\r\n", "nil|protocol error" },
      { "integer too large", ":9223372036854775808\r\n", "nil|protocol error" },
      { "bulk length negative", "$-5\r\n", "nil|protocol error" },
      { "bulk too large", "$99999999999\r\n", "nil|protocol error" },
      { "bulk missing CRLF", "$2\r\nabcd\r\n", "nil|protocol error" },
      { "array too deep", string.rep("*1\r\n", 34) .. ":1\r\n", "nil|protocol error" },
    }
    for _, mode in ipairs({ "whole", "trickle" }) do
      for _, row in ipairs(rows) do
        it(row[1] .. " (" .. mode .. ")", function()
          local hex = row[2]:gsub(".", function(c) return string.format("%02x", c:byte()) end)
          local out = run(SHOW .. string.format([[
            local r = assert(redis.connect{ port = PORT, timeout = 2 })
            print(show(r:call("%s", "%s")))
          ]], hex, mode), peer.port)
          assert.equal(row[3] .. "\n", out)
        end)
      end
    end

    it("closes, not parks, a connection with bytes past the replies asked for", function()
      local out = run(SHOW .. [[
        local r = assert(redis.connect{ port = PORT })
        print(show(r:call("2b4f4b0d0a2b45585452410d0a")))
        print(r:keepalive())
        local again = assert(redis.connect{ port = PORT })
        print(again:reused())
      ]], peer.port)
      assert.equal("OK\nnil\tunread data\n0\n", out)
    end)

    it("answers closed, then nothing more, when the peer closes mid-reply", function()
      local out = run(SHOW .. [[
        local r = assert(redis.connect{ port = PORT })
        print(show(r:call("2a320d0a3a310d0a", "close")))
        print(show(r:get("k")))
      ]], peer.port)
      assert.equal("nil|closed\nnil|closed\n", out)
    end)
  end)

  -- Malformed and edge replies, as raw bytes from a fake peer.
  describe("reply parser", function()
    local echo
    setup(function() echo = H.echo_server() end)
    teardown(function() echo:stop() end)

    local rows = {
      { "status", "+OK\r\n", "OK" },
      { "integer", ":-42\r\n", "-42" },
      { "empty bulk", "$0\r\n\r\n", "" },
      { "nil bulk", "$-1\r\n", "redis.null" },
      { "nil array", "*-1\r\n", "redis.null" },
      { "bulk cut short", "$5\r\nhel", "nil|closed|true" },
      { "error reply", "-ERR bad thing\r\n", "nil|ERR bad thing|false" },
      { "unknown type byte", "!5\r\n", "nil|protocol error|true" },
      { "integer not a number", ":12x\r\n", "nil|protocol error|true" },
      { "bulk length not a number", "$abc\r\n", "nil|protocol error|true" },
      { "bulk length negative", "$-5\r\n", "nil|protocol error|true" },
      { "bulk too large", "$99999999999\r\n", "nil|protocol error|true" },
      { "bulk missing CRLF", "$2\r\nabcd\r\n", "nil|protocol error|true" },
      { "array cut short", "*3\r\n:1\r\n", "nil|closed|true" },
      { "array with an error element", "*2\r\n-ERR x\r\n:1\r\n", "table|ERR x|1" },
      { "peer closes", "", "nil|closed|true" },
    }
    for _, row in ipairs(rows) do
      it(row[1], function()
        local hex = row[2]:gsub(".", function(c) return string.format("%02x", c:byte()) end)
        local out = run(string.format([[
          local s = http.tcp()
          assert(s:connect("127.0.0.1", PORT))
          s:settimeouts(1, 1, 1)
          s:send("rawclose %s\n")
          local v, err, transport = redis.read_reply(s)
          if type(v) == "table" and v ~= redis.null then
            print("table", tostring(v[1]), v[2])
          elseif v ~= nil then
            print(tostring(v))
          else
            print(v, err, transport)
          end
        ]], hex == "" and "00" or hex), echo.port)
        assert.equal(row[3]:gsub("|", "\t") .. "\n", out)
      end)
    end
  end)
end)

describe("redis.parse_url", function()
  -- URL → the options it gives, printed as sorted k=v, or the error's start
  local rows = {
    { "redis://127.0.0.1", "host=127.0.0.1" },
    { "redis://h:6380/2", "db=2 host=h port=6380" },
    { "rediss://:s%40cret@h", "host=h password=s@cret tls=true" },
    { "redis://[::1]:7000", "host=::1 port=7000" },
    { "redis://h/", "host=h" },
    { "redis://u:p@h", "nil a user name (ACL) is not supported" },
    { "redis://h:99999", "nil port out of range" },
    { "redis://h/x", "nil expected /<db number>" },
    { "redis://", "nil no host" },
    { "http://h", "nil expected redis://" },
  }
  it("reads each URL row", function()
    local src = { "local redis = require 'moonhttp.redis'" }
    for _, row in ipairs(rows) do
      src[#src + 1] = string.format([[
do
  local o, err = redis.parse_url(%q)
  if not o then print("nil " .. err) else
    local t = {}
    for k, v in pairs(o) do t[#t + 1] = k .. "=" .. tostring(v) end
    table.sort(t)
    print(table.concat(t, " "))
  end
end]], row[1])
    end
    local code, out = H.run_lua(table.concat(src, "\n"))
    assert.equal(0, code, out)
    local i = 0
    for line in out:gmatch("[^\n]+") do
      i = i + 1
      assert.truthy(line:sub(1, #rows[i][2]) == rows[i][2], rows[i][1] .. " gave " .. line)
    end
    assert.equal(#rows, i)
  end)
end)
