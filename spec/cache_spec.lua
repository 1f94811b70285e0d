-- require "moonhttp.cache" (docs/guide/proxy.md, "Response cache") in front of
-- http.proxy, through the real binary: a front with 2 workers caches in a
-- shared dict what an upstream moonhttp answers, and the upstream counts the
-- requests that reached it (GET /hits?p=PATH), so a hit is a count that did
-- not move.
local H = require "helper"

local UPSTREAM = [[
local http = require "moonhttp"
http.server{ shared = { hits = "64k" } }
local hits = http.shared.hits
local function count(req) return hits:incr(req.path, 1, 0) end
http.handle("GET /fresh", function(req, res)
  local n = count(req)
  res:header("Cache-Control", "max-age=2")
  res:write("fresh " .. n)
end)
http.handle("GET /long", function(req, res)
  local n = count(req)
  res:header("Cache-Control", "public, max-age=60")
  res:write("long " .. n)
end)
http.handle("GET /shared", function(req, res)
  local n = count(req)
  res:header("Cache-Control", "max-age=60")
  res:write("shared " .. n)
end)
http.handle("GET /smax", function(req, res)
  local n = count(req)
  res:header("Cache-Control", "max-age=0, s-maxage=60")
  res:write("smax " .. n)
end)
http.handle("GET /nostore", function(req, res)
  local n = count(req)
  res:header("Cache-Control", "no-store")
  res:write("nostore " .. n)
end)
http.handle("GET /private", function(req, res)
  local n = count(req)
  res:header("Cache-Control", "private, max-age=60")
  res:write("private " .. n)
end)
http.handle("GET /vary", function(req, res)
  local n = count(req)
  res:header("Cache-Control", "max-age=60")
  res:header("Vary", "Accept-Language")
  res:write((req:header("accept-language") or "-") .. " " .. n)
end)
http.handle("GET /flaky", function(req, res)
  local n = count(req)
  if hits:get("down") then
    res:status(503)
    res:write("down")
    return
  end
  res:header("Cache-Control", "max-age=1")
  res:write("flaky " .. n)
end)
http.handle("GET /down", function(req, res)
  hits:set("down", req:arg("on") == "1" or nil)
  res:write("ok")
end)
-- validators; a conditional request that reached it is counted under PATH#cond
local LM = "Sun, 06 Dec 2026 01:00:00 GMT"
http.handle("GET /tagged", function(req, res)
  local n = count(req)
  if req:header("if-none-match") or req:header("if-modified-since") then
    hits:incr(req.path .. "#cond", 1, 0)
  end
  res:header("Cache-Control", "max-age=60")
  res:header("ETag", '"t1"')
  res:header("Last-Modified", LM)
  res:header("Content-Type", "text/plain")
  res:write("tagged " .. n)
end)
-- expires in a second; a conditional request with its ETag gets a 304 that says when it
-- was checked (X-Checked), and is counted under PATH#304
local function etagged(req, res, cc, tag)
  local n = count(req)
  local inm = req:header("if-none-match")
  if inm then hits:incr(req.path .. "#cond", 1, 0) end
  if hits:get("down") then
    res:status(503)
    res:write("down")
    return
  end
  res:header("Cache-Control", cc)
  res:header("ETag", tag)
  if inm == tag then
    hits:incr(req.path .. "#304", 1, 0)
    res:header("X-Checked", tostring(n))
    res:status(304)
    return
  end
  res:write(req.path:sub(2) .. " " .. n)
end
http.handle("GET /reval", function(req, res) etagged(req, res, "max-age=1", '"r1"') end)
http.handle("GET /strict", function(req, res) etagged(req, res, "max-age=1, must-revalidate", '"s1"') end)
http.handle("GET /flakytag", function(req, res) etagged(req, res, "max-age=1", '"f1"') end)
-- a new version at every request: a revalidation gets the whole new response
http.handle("GET /replaced", function(req, res)
  etagged(req, res, "max-age=1", '"v' .. (hits:get("/replaced") or 0) + 1 .. '"')
end)
http.handle("GET /reval-lm", function(req, res)
  local n = count(req)
  res:header("Cache-Control", "max-age=1")
  if req:header("if-modified-since") == LM then
    hits:incr(req.path .. "#304", 1, 0)
    res:status(304)
    return
  end
  res:header("Last-Modified", LM)
  res:write("reval-lm " .. n)
end)
-- slow to answer: concurrent misses overlap
http.handle("GET /slow", function(req, res)
  local n = count(req)
  http.sleep(0.3)
  res:header("Cache-Control", "max-age=60")
  res:write("slow " .. n)
end)
-- slow and never storable: collapsing must not queue its requests one after another
http.handle("GET /uncacheable", function(req, res)
  local n = count(req)
  http.sleep(1)
  res:header("Cache-Control", "private")
  res:write("uncacheable " .. n)
end)
http.handle("GET /t/slower", function(req, res)
  local n = count(req)
  http.sleep(1.2)
  res:header("Cache-Control", "max-age=60")
  res:write("slower " .. n)
end)
-- slow from its second request on: a background refresh takes a second
http.handle("GET /w/swr", function(req, res)
  local n = count(req)
  if n > 1 then http.sleep(1) end
  res:header("Cache-Control", "max-age=1")
  res:write("swr " .. n)
end)
http.handle("GET /hits", function(req, res)
  res:write(tostring(hits:get(req:arg("p")) or 0))
end)
]]

local FRONT = [[
local http = require "moonhttp"
local UP, DEAD = %q, %q
http.server{ workers = 2, shared = { cache = "1m", ctl = "64k" } }
local cache = require("moonhttp.cache").new{ dict = http.shared.cache, stale_if_error = 30 }
-- made at the first request, in the worker (math.random's seed is the same in every worker)
local WORKER
local function worker()
  WORKER = WORKER or http.hex.encode(http.crypto.random(6))
  return WORKER
end
local function upstream(req, res)
  return http.proxy(req, res, http.shared.ctl:get("dead") and DEAD or UP)
end
http.handle("GET /ctl/dead", function(req, res)
  http.shared.ctl:set("dead", req:arg("on") == "1" or nil)
  res:write("ok")
end)
-- keeps its worker busy (no yield) so that the next connection goes to the other one
http.handle("GET /ctl/spin", function(req, res)
  local t = os.clock() + 0.6
  while os.clock() < t do end
  res:header("X-Worker", worker())
end)
-- a waiter gives up on the request fetching its key after half a second
local short = require("moonhttp.cache").new{ dict = http.shared.cache, lock_timeout = 0.5 }
http.handle("/t/", function(req, res)
  res:header("X-Worker", worker())
  return short:serve(req, res, upstream)
end)
-- an expired entry answered at once for 10 s while it is fetched again
local swr = require("moonhttp.cache").new{ dict = http.shared.cache, stale_while_revalidate = 10 }
http.handle("/w/", function(req, res)
  return swr:serve(req, res, upstream)
end)
http.handle("/", function(req, res)
  res:header("X-Worker", worker())
  return cache:serve(req, res, upstream)
end)
]]

local function free_port()
  local socket = require "socket"
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return port
end

describe("moonhttp.cache", function()
  local up, front

  setup(function()
    up = H.start(UPSTREAM)
    front = H.start(FRONT:format("http://127.0.0.1:" .. up.port, "http://127.0.0.1:" .. free_port()),
      { script_workers = true })
  end)

  teardown(function()
    if front then front:stop() end
    if up then up:stop() end
  end)

  local function hits(path)
    return tonumber(up:get("/hits?p=" .. path).body)
  end

  it("answers a second GET from the cache (Age, X-Cache) without reaching the upstream", function()
    local r1 = front:get("/long")
    assert.equal(200, r1.status)
    assert.equal("long 1", r1.body)
    assert.equal("MISS", r1.headers["x-cache"])
    local r2 = front:get("/long")
    assert.equal("long 1", r2.body)
    assert.equal("HIT", r2.headers["x-cache"])
    assert.truthy(tonumber(r2.headers["age"]))
    assert.equal("public, max-age=60", r2.headers["cache-control"])
    local head = front:request("HEAD", "/long")
    assert.equal(200, head.status)
    assert.equal("6", head.headers["content-length"])
    assert.equal("HIT", head.headers["x-cache"])
    assert.equal(1, hits("/long"))
    local s1, s2 = front:get("/smax"), front:get("/smax") -- s-maxage wins over max-age=0
    assert.equal("smax 1", s2.body)
    assert.equal("HIT", s2.headers["x-cache"])
    assert.equal(1, hits("/smax"))
    assert.equal("MISS", s1.headers["x-cache"])
  end)

  it("shares entries across the 2 workers", function()
    -- each worker accepts on its own socket, picked by the kernel from a hash of the
    -- connection (or, with reuseport off, the idle one may take everything): one is
    -- kept busy (a spin) while the entry is asked for; tried until both were seen
    local workers, n = {}, 0
    local first = front:get("/shared")
    assert.equal("MISS", first.headers["x-cache"])
    workers[first.headers["x-worker"]] = true
    -- a GET the kernel gives to the spinning worker waits out its 0.6 s of CPU,
    -- seconds of wall time on a busy machine: it may take up to 20 s (the same
    -- request as front:get's, whose Host is part of the key)
    local function get(path)
      local c = H.connect(front.port, 20)
      assert(c:send("GET " .. path .. " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
      local r = assert(c:read_response())
      c:close()
      return r
    end
    for _ = 1, 20 do
      local spin = H.connect(front.port, 20)
      assert(spin:send("GET /ctl/spin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
      H.sleep(0.2)
      local r = get("/shared")
      assert.equal("shared 1", r.body)
      assert.equal("HIT", r.headers["x-cache"])
      workers[r.headers["x-worker"]] = true
      spin:read_all()
      spin:close()
      n = 0
      for _ in pairs(workers) do n = n + 1 end
      if n >= 2 then break end
    end
    assert.equal(1, hits("/shared"))
    assert.is_true(n >= 2, "every request went to one worker: sharing not shown")
  end)

  it("expires an entry after its max-age", function()
    -- max-age=2, counted from the first request's start (RFC 9111's age takes
    -- in the upstream's delay): with 1 s a loaded machine's two requests were
    -- more than that apart and the second was a miss already
    assert.equal("fresh 1", front:get("/fresh").body)
    assert.equal("fresh 1", front:get("/fresh").body)
    assert.equal(1, hits("/fresh"))
    H.sleep(2.2)
    local r = front:get("/fresh")
    assert.equal("fresh 2", r.body)
    assert.equal("MISS", r.headers["x-cache"])
    assert.equal(2, hits("/fresh"))
  end)

  it("does not store no-store or private responses", function()
    assert.equal("nostore 1", front:get("/nostore").body)
    assert.equal("nostore 2", front:get("/nostore").body)
    assert.equal("private 1", front:get("/private").body)
    assert.equal("private 2", front:get("/private").body)
    assert.equal(2, hits("/nostore"))
    assert.equal(2, hits("/private"))
  end)

  it("keeps one variant per value of the headers the response Varies on", function()
    assert.equal("fr 1", front:get("/vary", { ["Accept-Language"] = "fr" }).body)
    assert.equal("de 2", front:get("/vary", { ["Accept-Language"] = "de" }).body)
    assert.equal("fr 1", front:get("/vary", { ["Accept-Language"] = "fr" }).body)
    assert.equal("de 2", front:get("/vary", { ["Accept-Language"] = "de" }).body)
    assert.equal("- 3", front:get("/vary").body)
    assert.equal(3, hits("/vary"))
  end)

  it("serves a stale entry when the upstream answers 503 or cannot be reached (stale_if_error)", function()
    assert.equal("flaky 1", front:get("/flaky").body)
    H.sleep(1.2)
    up:get("/down?on=1")
    local r = front:get("/flaky")
    assert.equal(200, r.status)
    assert.equal("flaky 1", r.body)
    assert.equal("STALE", r.headers["x-cache"])
    assert.equal(2, hits("/flaky")) -- the upstream was asked, and failed
    up:get("/down?on=0")
    front:get("/ctl/dead?on=1")
    r = front:get("/flaky") -- the proxy's own 502: refused
    assert.equal(200, r.status)
    assert.equal("flaky 1", r.body)
    assert.equal("STALE", r.headers["x-cache"])
    front:get("/ctl/dead?on=0")
    r = front:get("/flaky")
    assert.equal("flaky 3", r.body)
    assert.equal("MISS", r.headers["x-cache"])
    -- without an entry, the error is the answer
    front:get("/ctl/dead?on=1")
    r = front:get("/never-cached")
    assert.equal(502, r.status)
    front:get("/ctl/dead?on=0")
  end)

  it("answers a client's If-None-Match / If-Modified-Since on a fresh hit with a 304, without the upstream", function()
    -- the first request is conditional too: the upstream is asked for the whole response
    -- (its validators hidden), which is stored, and the client gets its 304
    local r = front:get("/tagged", { ["If-None-Match"] = '"t1"' })
    assert.equal(304, r.status)
    assert.equal("", r.body)
    assert.equal('"t1"', r.headers["etag"])
    assert.equal("MISS", r.headers["x-cache"])
    assert.equal(1, hits("/tagged"))
    assert.equal(0, hits("/tagged#cond"))
    r = front:get("/tagged", { ["If-None-Match"] = 'W/"x", W/"t1"' }) -- weak comparison, a list
    assert.equal(304, r.status)
    assert.equal("HIT", r.headers["x-cache"])
    assert.equal('"t1"', r.headers["etag"])
    assert.equal("max-age=60", r.headers["cache-control"])
    assert.is_nil(r.headers["content-type"])
    assert.truthy(tonumber(r.headers["age"]))
    r = front:get("/tagged", { ["If-None-Match"] = '"other"' })
    assert.equal(200, r.status)
    assert.equal("tagged 1", r.body)
    -- If-None-Match decides when present, whatever If-Modified-Since says
    r = front:get("/tagged", { ["If-None-Match"] = '"other"', ["If-Modified-Since"] = "Sun, 06 Dec 2026 02:00:00 GMT" })
    assert.equal(200, r.status)
    r = front:get("/tagged", { ["If-Modified-Since"] = "Sun, 06 Dec 2026 01:00:00 GMT" })
    assert.equal(304, r.status)
    assert.equal("HIT", r.headers["x-cache"])
    r = front:get("/tagged", { ["If-Modified-Since"] = "Sat, 05 Dec 2026 23:59:59 GMT" })
    assert.equal(200, r.status)
    assert.equal("tagged 1", r.body)
    r = front:get("/tagged", { ["If-Modified-Since"] = "not a date" })
    assert.equal(200, r.status)
    assert.equal(1, hits("/tagged"))
  end)

  it("revalidates an expired entry with its validator: a 304 refreshes it, a 200 replaces it", function()
    for _, p in ipairs({ "/reval", "/reval-lm", "/replaced", "/strict", "/flakytag" }) do
      local r = front:get(p)
      assert.equal(200, r.status)
      assert.equal("MISS", r.headers["x-cache"])
    end
    H.sleep(1.2)
    -- ETag: If-None-Match to the upstream, its 304's fields kept, the stored body served
    local r = front:get("/reval")
    assert.equal(200, r.status)
    assert.equal("reval 1", r.body)
    assert.equal("REVALIDATED", r.headers["x-cache"])
    assert.equal("2", r.headers["x-checked"])
    assert.equal("0", r.headers["age"])
    assert.equal(1, hits("/reval#304"))
    r = front:get("/reval") -- fresh again for max-age, with the 304's fields
    assert.equal("reval 1", r.body)
    assert.equal("HIT", r.headers["x-cache"])
    assert.equal("2", r.headers["x-checked"])
    assert.equal(2, hits("/reval"))
    -- Last-Modified: If-Modified-Since; the client's own matching validator gets a 304
    r = front:get("/reval-lm", { ["If-Modified-Since"] = "Sun, 06 Dec 2026 01:00:00 GMT" })
    assert.equal(304, r.status)
    assert.equal("REVALIDATED", r.headers["x-cache"])
    assert.equal(1, hits("/reval-lm#304"))
    r = front:get("/reval-lm")
    assert.equal("reval-lm 1", r.body)
    assert.equal("HIT", r.headers["x-cache"])
    -- a changed resource: the conditional request was sent, and its 200 replaces the entry
    r = front:get("/replaced")
    assert.equal("replaced 2", r.body)
    assert.equal("MISS", r.headers["x-cache"])
    assert.equal(1, hits("/replaced#cond"))
    assert.equal(0, hits("/replaced#304"))
    r = front:get("/replaced")
    assert.equal("replaced 2", r.body)
    assert.equal("HIT", r.headers["x-cache"])
    -- the upstream fails: stale_if_error answers, except for must-revalidate
    up:get("/down?on=1")
    r = front:get("/flakytag")
    assert.equal(200, r.status)
    assert.equal("flakytag 1", r.body)
    assert.equal("STALE", r.headers["x-cache"])
    assert.equal(1, hits("/flakytag#cond"))
    r = front:get("/strict")
    assert.equal(503, r.status)
    assert.equal("down", r.body)
    assert.equal(1, hits("/strict#cond"))
    up:get("/down?on=0")
    r = front:get("/strict")
    assert.equal("strict 1", r.body)
    assert.equal("REVALIDATED", r.headers["x-cache"])
  end)

  -- n requests for path at once, each on its own connection: the responses
  local function concurrent(path, n)
    local conns = {}
    for i = 1, n do
      conns[i] = H.connect(front.port, 10)
      assert(conns[i]:send("GET " .. path .. " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
    end
    local out = {}
    for i = 1, n do
      out[i] = assert(conns[i]:read_response())
      conns[i]:close()
    end
    return out
  end

  it("collapses concurrent misses across the 2 workers: one request reaches the upstream", function()
    local workers, states, n = {}, {}, 0
    for _, r in ipairs(concurrent("/slow", 20)) do
      assert.equal(200, r.status)
      assert.equal("slow 1", r.body)
      workers[r.headers["x-worker"]] = true
      states[r.headers["x-cache"]] = (states[r.headers["x-cache"]] or 0) + 1
    end
    assert.equal(1, hits("/slow"))
    assert.same({ MISS = 1, HIT = 19 }, states)
    for _ in pairs(workers) do n = n + 1 end
    assert.is_true(n >= 2, "every request went to one worker: waiting across workers not shown")
  end)

  it("lets requests for a key found uncacheable skip the lock (hit-for-miss)", function()
    assert.equal("uncacheable 1", front:get("/uncacheable").body)
    -- the upstream takes 1 s: half-way, the lock would have let one request in, the
    -- mark lets them all
    local conns = {}
    for i = 1, 8 do
      conns[i] = H.connect(front.port, 10)
      assert(conns[i]:send("GET /uncacheable HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"))
    end
    H.sleep(0.5)
    local arrived = hits("/uncacheable") - 1
    for i = 1, 8 do
      assert.equal(200, assert(conns[i]:read_response()).status)
      conns[i]:close()
    end
    assert.is_true(arrived >= 5, arrived .. " of 8 requests reached the upstream at once")
    assert.equal(9, hits("/uncacheable"))
  end)

  it("lets a waiter go to the upstream itself after lock_timeout", function()
    local out = concurrent("/t/slower", 3)
    for _, r in ipairs(out) do assert.equal(200, r.status) end
    -- the first holds the lock for 1.2 s; the two others waited 0.5 s and went on
    assert.equal(3, hits("/t/slower"))
  end)

  it("answers an expired entry at once while one background fetch refreshes it (stale_while_revalidate)", function()
    assert.equal("swr 1", front:get("/w/swr").body)
    H.sleep(1.2)
    -- answered before the refresh (a second at the upstream) could end: had they
    -- waited for it, they would say "swr 2"
    for _, r in ipairs(concurrent("/w/swr", 5)) do
      assert.equal(200, r.status)
      assert.equal("swr 1", r.body)
      assert.equal("UPDATING", r.headers["x-cache"])
    end
    H.sleep(1.3) -- the one refresh has stored its answer
    assert.equal(2, hits("/w/swr"))
    local r = front:get("/w/swr")
    assert.equal("swr 2", r.body)
    assert.equal("HIT", r.headers["x-cache"])
  end)
end)
