-- App-defined metrics: http.metrics.counter/gauge/histogram, summed over the
-- workers through the shared table and served by the metrics handler beside
-- the built-in ones, in the Prometheus text format.
local H = require "helper"

-- Parses the text format strictly: every line a HELP, a TYPE or a sample of
-- the family announced before it; label values unescaped. Returns families
-- by name: { type, help, samples = { { name, labels = {...}, value } } }.
local function parse(text)
  local families, current = {}, nil
  for line in text:gmatch("([^\n]*)\n") do
    local name, help = line:match("^# HELP ([%a_:][%w_:]*) (.*)$")
    if name then
      assert(not families[name], "family twice: " .. name)
      current = { name = name, help = help, samples = {} }
      families[name] = current
    else
      local tname, ty = line:match("^# TYPE ([%a_:][%w_:]*) (%a+)$")
      if tname then
        assert(current and current.name == tname, "TYPE without its HELP: " .. line)
        current.type = ty
      else
        local sname, rest = line:match("^([%a_:][%w_:]*)(.*)$")
        assert(sname and current, "not a sample line: " .. line)
        local ok = sname == current.name
        if current.type == "histogram" then
          ok = sname == current.name .. "_bucket" or sname == current.name .. "_sum"
            or sname == current.name .. "_count"
        end
        assert(ok, "sample outside its family: " .. line)
        local labels = {}
        if rest:sub(1, 1) == "{" then
          local pos = 2
          while rest:sub(pos, pos) ~= "}" do
            local lname, after = rest:match("^([%a_][%w_]*)=\"()", pos)
            assert(lname, "bad label in: " .. line)
            local value, i = {}, after
            while true do
              local c = rest:sub(i, i)
              assert(c ~= "", "unterminated label value: " .. line)
              if c == "\\" then
                local n = rest:sub(i + 1, i + 1)
                value[#value + 1] = n == "n" and "\n" or n
                i = i + 2
              elseif c == '"' then
                break
              else
                value[#value + 1] = c
                i = i + 1
              end
            end
            labels[lname] = table.concat(value)
            pos = i + 1
            if rest:sub(pos, pos) == "," then pos = pos + 1 end
          end
          rest = rest:sub(pos + 1)
        end
        local value = rest:match("^ (%S+)$")
        assert(value, "bad sample value: " .. line)
        local num = value == "+Inf" and math.huge or value == "-Inf" and -math.huge or tonumber(value)
        assert(num or value == "NaN", "bad number: " .. line)
        current.samples[#current.samples + 1] = { name = sname, labels = labels, value = num }
      end
    end
  end
  return families
end

-- The value of the sample `name` whose labels are exactly `labels`.
local function value(families, family, name, labels)
  local f = assert(families[family], "no family " .. family)
  for _, s in ipairs(f.samples) do
    local same = s.name == name
    for k, v in pairs(labels or {}) do same = same and s.labels[k] == v end
    for k in pairs(s.labels) do same = same and (labels or {})[k] ~= nil end
    if same then return s.value end
  end
end

local function scrape(srv)
  local res = assert(srv:get("/metrics"))
  assert.equal(200, res.status)
  return parse(res.body), res.body
end

local APP = [[
local http = require "moonhttp"
local function answer(res, ok, err) res:write(tostring(ok) .. "," .. tostring(err)) end
local hits = http.metrics.counter("app_hits_total", "Hits by page.\nSecond line \\ here.", { "page", "method" })
local depth = http.metrics.gauge("app_queue_depth", "Jobs waiting.")
local lat = http.metrics.histogram("app_upstream_seconds", "Upstream time.", { "upstream" },
  { buckets = { 0.1, 1, 10 } })
local idle = http.metrics.counter("app_idle_total", "Never updated.")
local few = http.metrics.counter("app_few_total", "Bounded.", { "k" }, { max_series = 3 })
http.handle("GET /metrics", http.metrics_handler())
http.handle("GET /hit/{page}", function(req, res)
  assert(hits:inc(1, { page = req:pathvalue("page"), method = "GET" }))
  assert(hits:inc({ req:pathvalue("page"), "ANY" }))
  assert(depth:inc(2))
  assert(depth:dec())
  assert(lat:observe(0.5, { upstream = "pg" }))
  assert(lat:observe(20, { upstream = "pg" }))
  local f = io.open("/proc/self/stat")
  local me = f:read("n")
  f:close()
  res:write(tostring(me))
end)
http.handle("GET /set/{v}", function(req, res)
  answer(res, depth:set(tonumber(req:pathvalue("v"))))
end)
http.handle("GET /few/{k}", function(req, res)
  answer(res, few:inc(1, { k = req:pathvalue("k") }))
end)
http.handle("GET /label", function(req, res)
  answer(res, hits:inc(1, { page = req:arg("v"), method = "X" }))
end)
http.handle("GET /misuse/{what}", function(req, res)
  local what = req:pathvalue("what")
  if what == "negative" then hits:inc(-1, { page = "x", method = "GET" })
  elseif what == "missing" then hits:inc(1, { page = "x" })
  elseif what == "unknown" then hits:inc(1, { page = "x", method = "GET", extra = "y" })
  elseif what == "nan" then depth:set(0 / 0)
  elseif what == "declare" then http.metrics.counter("app_late_total", "Too late.")
  end
  res:write("no error\n")
end)
]]

describe("http.metrics with 2 workers", function()
  local srv
  setup(function() srv = H.start(APP, { flags = { "--workers", "2" } }) end)
  teardown(function() if srv then srv:stop() end end)

  it("shows a metric without labels at 0 before its first update", function()
    local f = scrape(srv)
    assert.equal("counter", f.app_idle_total.type)
    assert.equal(0, value(f, "app_idle_total", "app_idle_total"))
    assert.equal("Never updated.", f.app_idle_total.help)
  end)

  it("sums counters, gauges and histograms over both workers", function()
    local before = scrape(srv)
    local base = value(before, "app_hits_total", "app_hits_total", { page = "home", method = "GET" }) or 0
    local pids, n = {}, 0
    while n < 400 do
      local res = assert(srv:get("/hit/home"))
      assert.equal(200, res.status)
      pids[res.body] = true
      n = n + 1
      if n >= 20 and next(pids, next(pids)) then break end
    end
    assert.truthy(next(pids, next(pids)), "both workers answered")
    -- a scrape lands on either worker: both see every worker's counts
    for _ = 1, 4 do
      local f = scrape(srv)
      assert.equal(base + n, value(f, "app_hits_total", "app_hits_total", { page = "home", method = "GET" }))
      assert.equal(base + n, value(f, "app_hits_total", "app_hits_total", { page = "home", method = "ANY" }))
      assert.equal("counter", f.app_hits_total.type)
      assert.equal("Hits by page.\\nSecond line \\\\ here.", f.app_hits_total.help)
      local h = { upstream = "pg" }
      assert.equal("histogram", f.app_upstream_seconds.type)
      assert.equal(0, value(f, "app_upstream_seconds", "app_upstream_seconds_bucket", { upstream = "pg", le = "0.1" }))
      assert.equal(base + n, value(f, "app_upstream_seconds", "app_upstream_seconds_bucket", { upstream = "pg", le = "1" }))
      assert.equal(base + n, value(f, "app_upstream_seconds", "app_upstream_seconds_bucket", { upstream = "pg", le = "10" }))
      assert.equal(2 * (base + n), value(f, "app_upstream_seconds", "app_upstream_seconds_bucket", { upstream = "pg", le = "+Inf" }))
      assert.equal(2 * (base + n), value(f, "app_upstream_seconds", "app_upstream_seconds_count", h))
      assert.equal(20.5 * (base + n), value(f, "app_upstream_seconds", "app_upstream_seconds_sum", h))
      assert.equal(base + n, value(f, "app_queue_depth", "app_queue_depth"))
    end
    -- the built-in families are still there, unchanged
    local _, text = scrape(srv)
    assert.truthy(text:find('moonhttp_requests_total{pattern="GET /hit/{page}",status="2xx"}', 1, true))
  end)

  it("sets a gauge, with the value written as the text format wants", function()
    assert.equal("true,nil", srv:get("/set/-2.5").body)
    assert.equal(-2.5, value(scrape(srv), "app_queue_depth", "app_queue_depth"))
    assert.equal("true,nil", srv:get("/set/1e300").body)
    assert.equal(1e300, value(scrape(srv), "app_queue_depth", "app_queue_depth"))
  end)

  it("bounds a metric's series: past max_series an update is nil, err and logged once", function()
    local got = {}
    for i = 1, 6 do got[i] = srv:get("/few/k" .. i).body end
    for i = 1, 3 do assert.equal("true,nil", got[i]) end
    for i = 4, 6 do assert.equal("nil,too many series", got[i]) end
    assert.equal("true,nil", srv:get("/few/k2").body) -- a known series still counts
    local f = scrape(srv)
    assert.equal(3, #f.app_few_total.samples)
    assert.equal(2, value(f, "app_few_total", "app_few_total", { k = "k2" }))
    local log = srv:logtext()
    local _, warnings = log:gsub("app_few_total: more than max_series = 3", "")
    assert.is_true(warnings >= 1 and warnings <= 2, log) -- once per worker at most
  end)

  it("escapes label values and refuses ones that are not UTF-8", function()
    assert.equal("true,nil", srv:get('/label?v=a%22b%5Cc%0Ad').body)
    assert.equal(1, value(scrape(srv), "app_hits_total", "app_hits_total", { page = 'a"b\\c\nd', method = "X" }))
    assert.equal("nil,bad label value", srv:get("/label?v=%FF").body)
    assert.equal("nil,bad label value", srv:get("/label?v=a%00b").body)
    assert.equal("nil,label values too long", srv:get("/label?v=" .. string.rep("x", 300)).body)
  end)

  it("raises on misuse in a handler (a 500, the server goes on)", function()
    for _, what in ipairs({ "negative", "missing", "unknown", "nan", "declare" }) do
      assert.equal(500, srv:get("/misuse/" .. what).status, what)
    end
    local log = srv:logtext()
    assert.truthy(log:find("a counter only goes up", 1, true))
    assert.truthy(log:find("1 label values for 2 labels", 1, true))
    assert.truthy(log:find("3 label values for 2 labels", 1, true))
    assert.truthy(log:find("NaN is not a value", 1, true))
    assert.truthy(log:find("only while the script loads", 1, true))
    assert.equal(200, srv:get("/hit/after").status)
  end)
end)

describe("http.metrics declarations", function()
  local function check(src)
    local code, out = H.run({ "--check", H.script('local http = require "moonhttp"\n' .. src) })
    return code, out
  end

  local bad = {
    { 'http.metrics.counter("app:x", "h")', "name \"app:x\": a name is letters, digits and _" },
    { 'http.metrics.counter("9x", "h")', "not starting with a digit" },
    { 'http.metrics.gauge("moonhttp_x", "h")', "are the server's own" },
    { 'http.metrics.counter("x", "h", { "__x" })', "starting with __ are reserved" },
    { 'http.metrics.histogram("x", "h", { "le" })', "le is the histogram's own label" },
    { 'http.metrics.counter("x", "h", { "a", "a" })', "given twice" },
    { 'http.metrics.counter("x", "h", { "a", "b", "c", "d", "e", "f", "g", "h", "i" })', "at most 8 labels" },
    { 'http.metrics.counter("x", "h", nil, { max_serie = 3 })', 'unknown option "max_serie" (did you mean "max_series"?)' },
    { 'http.metrics.counter("x", "h", nil, { max_series = 0 })', "max_series must be an integer" },
    { 'http.metrics.counter("x", "h", nil, { buckets = { 1 } })', "buckets are for histograms" },
    { 'http.metrics.counter("x", "h", nil, { per_worker = true })', "per_worker is true or false, and only for a gauge" },
    { 'http.metrics.gauge("x", "h", nil, { per_worker = "yes" })', "per_worker is true or false, and only for a gauge" },
    { 'http.metrics.histogram("x", "h", nil, { buckets = { 1, 0.5 } })', "increasing order" },
    { 'http.metrics.counter("x", "h"); http.metrics.gauge("x", "h")', '"x" is declared twice' },
    { 'http.metrics.counter("x")', "bad argument #2" },
  }
  for _, case in ipairs(bad) do
    it("refuses " .. case[1], function()
      local code, out = check(case[1])
      assert.equal(1, code, out)
      assert.truthy(out:find(case[2], 1, true), out)
      assert.truthy(out:find(":2:", 1, true), "names the script's line: " .. out)
    end)
  end

  it("accepts good ones", function()
    local code, out = check([[
      http.metrics.counter("app_requests_total", "Requests.", { "route", "code" })
      http.metrics.gauge("app_temperature_celsius", "", nil, { max_series = 1 })
      http.metrics.histogram("app_seconds", "Time.", { "op" }, { buckets = { 0.001, 0.01, 0.1 }, max_series = 4096 })
    ]])
    assert.equal(0, code, out)
  end)
end)

describe("http.metrics across a reload", function()
  it("keeps counts, and a metric whose labels changed is refused until a restart", function()
    local script = H.tmpname(".lua")
    local function app(labels)
      H.write_file(script, ([[
        local http = require "moonhttp"
        local function answer(res, ok, err) res:write(tostring(ok) .. "," .. tostring(err)) end
        local c = http.metrics.counter("app_kept_total", "Kept.", %s)
        http.handle("GET /metrics", http.metrics_handler())
        http.handle("GET /inc", function(req, res)
          answer(res, c:inc(1, %s))
        end)
      ]]):format(labels, labels == "nil" and "nil" or '{ "x" }'))
    end
    app("nil")
    local srv = H.start(script)
    finally(function() srv:stop() end)
    assert.equal("true,nil", srv:get("/inc").body)
    app("nil")
    srv:signal("HUP")
    local deadline = H.now() + 5
    while H.now() < deadline and not srv:logtext():find("reloaded (SIGHUP)", 1, true) do H.sleep(0.05) end
    assert.truthy(srv:logtext():find("reloaded (SIGHUP)", 1, true))
    assert.equal("true,nil", srv:get("/inc").body)
    assert.equal(2, value(scrape(srv), "app_kept_total", "app_kept_total"))
    app('{ "x" }')
    srv:signal("HUP")
    deadline = H.now() + 5
    local body
    repeat
      H.sleep(0.1)
      body = srv:get("/inc").body
    until body ~= "true,nil" or H.now() > deadline
    assert.equal("nil,declared differently before", body)
    assert.truthy(srv:logtext():find("app_kept_total: declared differently before (another type, labels or buckets: a restart applies the change)", 1, true))
    assert.equal(2, value(scrape(srv), "app_kept_total", "app_kept_total"))
  end)
end)

describe("a per_worker gauge", function()
  local O = require "ops_helper"

  it("sums the workers' shares, and a worker killed with -9 takes its share with it within 1 s", function()
    local srv = H.start([[
local http = require "moonhttp"
local players = http.metrics.gauge("app_players", "Players connected here.", { "room" }, { per_worker = true })
http.handle("GET /metrics", http.metrics_handler())
http.handle("GET /join", function(req, res)
  assert(players:inc(1, { room = "lobby" }))
  local f = io.open("/proc/self/stat")
  res:write(tostring(f:read("n")))
  f:close()
end)
]], { flags = { "--workers", "2" } })
    finally(function() srv:stop() end)
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    local by_pid, n = {}, 0
    while n < 400 do
      local pid = assert(srv:get("/join")).body
      by_pid[pid] = (by_pid[pid] or 0) + 1
      n = n + 1
      if n >= 20 and next(by_pid, next(by_pid)) then break end
    end
    local victim, share = next(by_pid)
    assert.truthy(next(by_pid, victim), "both workers answered")
    assert.equal(n, value(scrape(srv), "app_players", "app_players", { room = "lobby" }))
    os.execute("kill -9 " .. victim)
    local t0 = H.now()
    assert.truthy(O.wait_for(function()
      local ok, f = pcall(scrape, srv)
      return ok and value(f, "app_players", "app_players", { room = "lobby" }) == n - share
    end, 1), "the killed worker's share is still counted")
    print(("per_worker gauge: %d -> %d %.2f s after kill -9"):format(n, n - share, H.now() - t0))
    -- its replacement counts from its own zero, in the slot the dead one left
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    for _ = 1, 40 do assert(srv:get("/join")) end
    assert.equal(n - share + 40, value(scrape(srv), "app_players", "app_players", { room = "lobby" }))
  end)
end)
