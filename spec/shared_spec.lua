-- Shared dicts (http.shared.<name>) through the real binary: every method and
-- its return conventions, misuse, TTL, eviction, two workers incrementing one
-- key, a worker killed while it holds the dict's lock, reloads, settings.
local H = require "helper"
local O = require "ops_helper"
local socket = require "socket"

local APP = [[
local http = require "moonhttp"
http.server{ shared = SHARED_MARK }
local cache = http.shared.cache -- a handle may be taken while the script loads
local function pid() return io.open("/proc/self/stat"):read("n") end

-- Each call's results joined with spaces, one line per call.
local function calls(list)
  local out = {}
  for _, f in ipairs(list) do
    local t = table.pack(f())
    for i = 1, t.n do
      local v = t[i]
      t[i] = math.type(v) == "float" and string.format("%.1f", v) or tostring(v)
    end
    out[#out + 1] = table.concat(t, " ")
  end
  return table.concat(out, "\n") .. "\n"
end

http.handle("GET /methods", function(req, res)
  cache:flush_all()
  res:write(calls{
    function() return cache:set("s", "text") end,
    function() return cache:get("s") end,
    function() return cache:get("missing") end,
    function() return cache:add("s", 1) end,
    function() return cache:add("new", 1) end,
    function() return cache:replace("nope", 1) end,
    function() return cache:replace("new", 2), cache:get("new") end,
    function() return cache:incr("ctr", 1) end,
    function() return cache:incr("ctr", 1, 10) end,
    function() return cache:incr("ctr", 5) end,
    function() return math.type(cache:get("ctr")) end,
    function() return cache:incr("ctr", 0.5) end,
    function() return math.type(cache:get("ctr")) end,
    function() return cache:incr("s", 1) end,
    function() return cache:set("f", 1.5), math.type(cache:get("f")) end,
    function() return cache:set("i", 7), math.type(cache:get("i")) end,
    function() return cache:set("b", false), cache:get("b") end,
    function() return cache:set("t", true, 100), cache:ttl("t") > 99, cache:ttl("s") end,
    function() return cache:ttl("missing") end,
    function() return cache:expire("s", 50), cache:ttl("s") > 49 end,
    function() return cache:expire("missing", 5) end,
    function() return cache:delete("i"), cache:get("i"), cache:delete("i") end,
    function() return cache:set("s", nil), cache:get("s") end,
    function() local k = cache:keys(); table.sort(k); return table.concat(k, ",") end,
    function() return #cache:keys(2) end,
    function() return cache:set("big", string.rep("x", 5000)), #cache:get("big") end,
    function() local before = cache:free_space(); cache:flush_all()
      return cache:free_space() > before, #cache:keys() end,
    function() return tostring(cache) end,
  })
end)

local misuse = {
  table_value = function() cache:set("k", {}) end,
  empty_key = function() cache:get("") end,
  key_type = function() cache:get({}) end,
  incr_string = function() cache:incr("k", "1") end,
  negative_ttl = function() cache:set("k", 1, -1) end,
  undeclared = function() return http.shared.nope end,
}
http.handle("GET /misuse/{what}", function(req, res)
  local ok, err = pcall(misuse[req:pathvalue("what")])
  res:write(tostring(ok), " ", tostring(err))
end)

http.handle("GET /incr", function(req, res)
  for _ = 1, tonumber(req:arg("n")) do cache:incr("hits", 1, 0) end
  res:write(pid())
end)
http.handle("GET /get", function(req, res)
  local v = cache:get(req:arg("k"))
  res:write(tostring(v))
end)
http.handle("GET /set", function(req, res)
  local ok, err = cache:set(req:arg("k"), req:arg("v"), tonumber(req:arg("ttl") or "0"))
  res:write(tostring(ok), " ", tostring(err))
end)
http.handle("GET /ttl", function(req, res) res:write(tostring(cache:ttl(req:arg("k")))) end)
http.handle("GET /free", function(req, res) res:write(cache:free_space(), " ", #cache:keys(0)) end)
http.handle("GET /pid", function(req, res) res:write(pid()) end)

http.handle("GET /fill", function(req, res)
  local small = http.shared.small
  small:flush_all()
  local value = string.rep("v", 100)
  local forced
  for i = 1, 200 do
    local ok, err, f = small:set("k" .. i, value)
    assert(ok, err)
    forced = forced or f
  end
  local first, last = small:get("k1"), small:get("k200")
  -- Touch the least recently used key: the next one in line is evicted instead.
  local keys = small:keys(0)
  local lru, next_lru = keys[#keys], keys[#keys - 1]
  small:get(lru)
  small:set("one-more", value)
  res:write(calls{
    function() return forced, first, last == value end,
    function() return small:get(lru) == value, small:get(next_lru) end,
    function() return small:set("huge", string.rep("h", 9000)) end,
    function() return small:get("one-more") == value, #keys > 20 end,
  })
end)
]]

local function app(shared)
  return (APP:gsub("SHARED_MARK", shared or '{ cache = "1m", small = "8k" }'))
end

local function body(srv, path)
  local res = assert(srv:get(path))
  assert.equal(200, res.status, res.body)
  return res.body
end

describe("http.shared", function()
  local srv
  setup(function() srv = H.start(app()) end)
  teardown(function() assert.equal(0, srv:stop()) end)

  it("answers every method as OpenResty's ngx.shared.DICT does", function()
    assert.equal(table.concat({
      "true",
      "text",
      "nil",
      "nil exists",
      "true",
      "nil not found",
      "true 2",
      "nil not found",
      "11",
      "16",
      "integer",
      "16.5",
      "float",
      "nil not a number",
      "true float",
      "true integer",
      "true false",
      "true true 0.0",
      "nil not found",
      "true true",
      "nil not found",
      "true nil true",
      "true nil",
      "b,ctr,f,new,t",
      "2",
      "true 5000",
      "true 0",
      "http.shared.cache",
    }, "\n") .. "\n", body(srv, "/methods"))
  end)

  for what, message in pairs({
    table_value = "string, number or boolean expected",
    empty_key = "empty key",
    key_type = "string expected",
    incr_string = "number expected",
    negative_ttl = "ttl must be 0",
    undeclared = "http.shared.nope: no such shared dict",
  }) do
    it("raises on misuse: " .. what, function()
      local b = body(srv, "/misuse/" .. what)
      assert.truthy(b:find("^false "), b)
      assert.truthy(b:find(message, 1, true), b)
    end)
  end

  it("expires entries after their ttl", function()
    assert.equal("true nil", body(srv, "/set?k=short&v=1&ttl=0.3"))
    assert.equal("1", body(srv, "/get?k=short"))
    local left = tonumber(body(srv, "/ttl?k=short"))
    assert.truthy(left > 0 and left <= 0.3, left)
    H.sleep(0.4)
    assert.equal("nil", body(srv, "/get?k=short"))
    assert.equal("nil", body(srv, "/ttl?k=short"))
  end)

  it("evicts the least recently used entries when full, and fails only what cannot fit", function()
    assert.equal(table.concat({
      "true nil true",       -- evictions happened (forcible), the first key went, the last is there
      "true nil",            -- the touched LRU key stayed; the next one was evicted
      "nil no memory",       -- 9000 bytes cannot fit in an 8k dict at all
      "true true",
    }, "\n") .. "\n", body(srv, "/fill"))
  end)
end)

describe("http.shared with two workers", function()
  local srv
  after_each(function()
    if srv and not srv.stopped then assert.equal(0, srv:stop()) end
  end)

  --- Sends a request on each of n connections at once; returns the bodies.
  local function parallel(path, n)
    local conns = {}
    for i = 1, n do
      conns[i] = srv:connect()
      assert(conns[i]:send("GET " .. path .. " HTTP/1.1\r\nHost: x\r\n\r\n"))
    end
    local bodies = {}
    for i = 1, n do
      conns[i]:settimeout(20)
      local res = assert(conns[i]:read_response())
      assert.equal(200, res.status, res.body)
      bodies[i] = res.body
      conns[i]:close()
    end
    return bodies
  end

  it("sums concurrent incr from both workers exactly", function()
    srv = H.start(app(), { flags = { "--workers", "2" } })
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    local pids, sent, rounds = {}, 0, 0
    repeat
      for _, pid in ipairs(parallel("/incr?n=5000", 4)) do pids[pid] = (pids[pid] or 0) + 1 end
      sent = sent + 4 * 5000
      rounds = rounds + 1
      local n = 0
      for _ in pairs(pids) do n = n + 1 end
    until (n == 2 and rounds >= 3) or rounds == 30
    local n = 0
    for _ in pairs(pids) do n = n + 1 end
    assert.equal(2, n, "only one worker served the increments")
    assert.equal(tostring(sent), body(srv, "/get?k=hits"))
  end)

  it("goes on when a worker is killed while it holds the lock", function()
    local pidfile = H.tmpname(".pid")
    srv = H.start(app(), { flags = { "--workers", "2" }, env = "MOONHTTP_TEST_SHM_HOLD=" .. pidfile })
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    assert.equal("true nil", body(srv, "/set?k=a&v=before"))
    local free_before = body(srv, "/free")
    -- This worker builds the new entry, then sleeps holding the lock.
    local holder = srv:connect()
    assert(holder:send("GET /set?k=hold:x&v=" .. string.rep("y", 300) .. " HTTP/1.1\r\nHost: x\r\n\r\n"))
    local pid = O.wait_for(function()
      local s = H.read_file(pidfile)
      return s and tonumber(s:match("%d+"))
    end, 5)
    assert.truthy(pid, "the hold hook did not run")
    -- The other worker blocks on the lock...
    local waiter = srv:connect()
    assert(waiter:send("GET /get?k=a HTTP/1.1\r\nHost: x\r\n\r\n"))
    waiter:settimeout(0.3)
    assert.is_nil(waiter:read_response())
    -- ...until the holder dies: the lock is recovered and the dict is whole.
    os.execute("kill -9 " .. pid)
    waiter:settimeout(5)
    local res = assert(waiter:read_response())
    assert.equal("before", res.body)
    waiter:close()
    holder:close()
    assert.truthy(O.wait_for(function()
      return srv:logtext():find("died holding its lock", 1, true)
    end, 2), srv:logtext())
    assert.equal("nil", body(srv, "/get?k=hold:x")) -- the killed write did not happen
    assert.equal(free_before, body(srv, "/free"))    -- and its blocks were reclaimed
    assert.equal("true nil", body(srv, "/set?k=a&v=after"))
    assert.equal("after", body(srv, "/get?k=a"))
    os.remove(pidfile)
  end)

  it("keeps the data across SIGHUP reloads, and a changed size waits for a restart", function()
    local path = H.script(app())
    srv = H.start(path, { flags = { "--workers", "2" } })
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    local old = O.children(srv.pid)
    assert.equal("true nil", body(srv, "/set?k=kept&v=yes"))
    H.write_file(path, app('{ cache = "2m", small = "8k", added = "64k" }') ..
      [[http.handle("GET /added", function(req, res)
          http.shared.added:set("x", 1); res:write(http.shared.added:get("x")) end)]])
    srv:signal("HUP")
    assert.truthy(O.wait_for(function()
      local kids = O.children(srv.pid)
      return #kids == 2 and kids[1] ~= old[1] and kids[1] ~= old[2] and kids[2] ~= old[1]
          and kids[2] ~= old[2]
    end, 5), "new workers did not take over")
    assert.equal("yes", body(srv, "/get?k=kept"))
    assert.equal("1", body(srv, "/added"))
    local log = srv:logtext()
    assert.truthy(log:find("shared dict cache keeps its size of 1048576 bytes and its data; "
      .. "the new size (2097152 bytes) needs a restart", 1, true), log)
  end)

  it("keeps the data across a reload of a single worker", function()
    local path = H.script(app())
    srv = H.start(path)
    assert.equal("true nil", body(srv, "/set?k=kept&v=yes"))
    H.write_file(path, app() .. "\n-- changed\n")
    srv:signal("HUP")
    assert.truthy(O.wait_for(function() return srv:logtext():find("reloaded", 1, true) end, 5))
    assert.equal("yes", body(srv, "/get?k=kept"))
  end)
end)

describe("examples/ratelimit.lua", function()
  it("lets 10 requests a minute through per client, with two workers sharing the counters", function()
    if os.time() % 60 > 50 then H.sleep(61 - os.time() % 60) end -- stay inside one window
    local srv = H.start("examples/ratelimit.lua", { flags = { "--workers", "2" } })
    finally(function() srv:stop() end)
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    local statuses, pids = {}, {}
    for i = 1, 12 do
      local res = assert(srv:get("/"))
      statuses[i] = res.status
      if i == 12 then
        assert.equal("too many requests\n", res.body)
        local wait = tonumber(res.headers["retry-after"])
        assert.truthy(wait and wait >= 1 and wait <= 60, res.headers["retry-after"])
      end
    end
    assert.equal("200 200 200 200 200 200 200 200 200 200 429 429", table.concat(statuses, " "))
  end)
end)

describe("shared settings", function()
  local function check(shared)
    local path = H.script("local http = require 'moonhttp'\n\nhttp.server{ shared = " .. shared .. " }\n")
    local code, out = H.run({ "--check", path })
    return code, out, path
  end

  it("are checked by --check, naming the script line", function()
    local code, out, path = check('{ cache = "16q" }')
    assert.equal(1, code)
    assert.truthy(out:find(path .. ":3: http.server: shared.cache: \"16q\" is not a size", 1, true), out)
    code, out = check('{ cache = "1k" }')
    assert.equal(1, code)
    assert.truthy(out:find("shared.cache: 1024 bytes is out of range", 1, true), out)
    code, out = check('{ ["bad name"] = "1m" }')
    assert.equal(1, code)
    assert.truthy(out:find('"bad name" is not a name', 1, true), out)
    code, out = check('"16m"')
    assert.equal(1, code)
    assert.truthy(out:find("shared: expected a table { name = size }, got string", 1, true), out)
    code, out = check('{ cache = "16m", limits = 65536 }')
    assert.equal(0, code, out)
  end)

  it("come from --shared too", function()
    local srv = H.start([[
      local http = require "moonhttp"
      http.handle("GET /", function(req, res)
        http.shared.flag:set("k", 41)
        res:write(http.shared.flag:incr("k", 1), " ", tostring(http.shared.other:free_space() > 0))
      end)
    ]], { flags = { "--shared", "flag=64k,other=16k" } })
    finally(function() srv:stop() end)
    assert.equal("42 true", body(srv, "/"))
    assert.equal(0, srv:stop())
    local code, out = H.run({ "--shared", "flag", "x.lua" })
    assert.equal(2, code)
    assert.truthy(out:find('shared: expected name=size, got "flag"', 1, true), out)
  end)

  it("refuse a dict used while the script loads", function()
    local code, out = H.run({ "--check", H.script([[
      local http = require "moonhttp"
      http.server{ shared = { c = "64k" } }
      http.shared.c:set("k", 1)
    ]]) })
    assert.equal(1, code)
    assert.truthy(out:find(":3: http.shared.c: shared dicts can be used once the server has started", 1, true), out)
  end)
end)
