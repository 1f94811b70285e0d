-- Operations: access log formats, metrics (listener and handler), pid file,
-- shutdown_delay with http.stopping().
local H = require "helper"
local O = require "ops_helper"
local cjson = require "cjson"

local APP = [[
local http = require "moonhttp"
http.handle("GET /hello", function(req, res) res:write("hello") end)
http.handle("GET /users/{id}", function(req, res) res:write("user ", req:pathvalue("id")) end)
http.handle("GET /fail", function(req, res) error("x") end)
http.handle("GET /slow", function(req, res) http.sleep(0.3) res:write("slow") end)
http.handle("GET /healthz", function(req, res)
  if http.stopping() then res:status(503) res:write("stopping") return end
  res:write("ok")
end)
]]

local function lines_of(path)
  local t = {}
  for line in (H.read_file(path) or ""):gmatch("[^\n]+") do t[#t + 1] = line end
  return t
end

describe("access log", function()
  it("is off by default", function()
    local srv = H.start(H.script(APP))
    assert.equal(200, srv:get("/hello").status)
    assert.equal(0, srv:stop())
    assert.is_nil(srv:logtext():find("GET /hello", 1, true))
  end)

  it("writes the common format, buffered, flushed within a second", function()
    local log = H.tmpname(".access")
    local srv = H.start(H.script(APP), { flags = { "--access-log", log } })
    assert.equal(200, srv:get("/hello").status)
    assert.equal(404, srv:get("/nope?a=\"b").status)
    local lines = O.wait_for(function()
      local l = lines_of(log)
      return #l == 2 and l
    end, 2)
    assert.truthy(lines, H.read_file(log))
    assert.truthy(lines[1]:match('^127%.0%.0%.1 %- %- %[%d%d/%a%a%a/%d%d%d%d:%d%d:%d%d:%d%d [+-]%d%d%d%d%] "GET /hello HTTP/1%.1" 200 5$'), lines[1])
    assert.truthy(lines[2]:find('"GET /nope?a=\\"b HTTP/1.1" 404 19', 1, true), lines[2])
    assert.equal(0, srv:stop())
    os.remove(log)
  end)

  it("writes the combined format with referer and user agent", function()
    local log = H.tmpname(".access")
    local srv = H.start(H.script(APP), { flags = { "--access-log", log, "--access-log-format", "combined" } })
    srv:get("/hello", { Referer = "http://r.example/", ["User-Agent"] = "spec/1.0" })
    assert.equal(0, srv:stop()) -- the stop flushes
    local l = lines_of(log)[1]
    assert.truthy(l:find('" 200 5 "http://r.example/" "spec/1.0"$'), l)
    os.remove(log)
  end)

  it("writes JSON lines with pattern and duration", function()
    local log = H.tmpname(".access")
    local srv = H.start(H.script(APP), { flags = { "--access-log", log, "--access-log-format", "json" } })
    srv:get("/users/42")
    srv:get("/fail")
    assert.equal(0, srv:stop())
    local l = lines_of(log)
    local a, b = cjson.decode(l[1]), cjson.decode(l[2])
    assert.equal("GET", a.method)
    assert.equal("/users/42", a.target)
    assert.equal(200, a.status)
    assert.equal(7, a.bytes)
    assert.equal("GET /users/{id}", a.pattern)
    assert.equal("HTTP/1.1", a.proto)
    assert.equal("127.0.0.1", a.remote_addr)
    assert.is_number(a.duration_ms)
    assert.equal(500, b.status)
    os.remove(log)
  end)

  it("rejects an unknown format", function()
    local code, out = H.run({ "--check", "--access-log-format", "fancy", "spec/apps/basic.lua" })
    assert.equal(1, code)
    assert.truthy(out:find("access_log_format", 1, true), out)
  end)
end)

local function scrape(port)
  local res = assert(H.request(port, "GET", "/metrics"))
  assert.equal(200, res.status)
  assert.truthy(res.headers["content-type"]:find("text/plain; version=0.0.4", 1, true))
  return res.body
end

local function metric(text, name_and_labels)
  for line in text:gmatch("[^\n]+") do
    local k, v = line:match("^(.-) (%S+)$")
    if k == name_and_labels then return tonumber(v) end
  end
end

describe("metrics", function()
  it("are served on their own listener with requests, latency, connections and reloads", function()
    local path = H.script(APP)
    local srv = H.start(path, { flags = { "--metrics", "127.0.0.1:0" } })
    local mport = tonumber(srv:logtext():match("metrics on [^\n]* %(port (%d+)%)"))
    assert.truthy(mport)
    for _ = 1, 3 do srv:get("/users/1") end
    srv:get("/hello")
    srv:get("/fail")
    srv:get("/nope")
    local idle = srv:connect()
    assert(idle:send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert(idle:read_response())
    local text = scrape(mport)
    assert.equal(3, metric(text, 'moonhttp_requests_total{pattern="GET /users/{id}",status="2xx"}'), text)
    assert.equal(1, metric(text, 'moonhttp_requests_total{pattern="GET /fail",status="5xx"}'))
    assert.equal(1, metric(text, 'moonhttp_requests_total{pattern="(unmatched)",status="4xx"}'))
    assert.equal(3, metric(text, 'moonhttp_request_duration_seconds_count{pattern="GET /users/{id}"}'))
    assert.equal(3, metric(text, 'moonhttp_request_duration_seconds_bucket{pattern="GET /users/{id}",le="+Inf"}'))
    assert.truthy(text:find("# TYPE moonhttp_request_duration_seconds histogram", 1, true))
    -- the idle one, and the scrape's own: the metrics listener is served by the ordinary
    -- connection code now, so its connection counts like any other
    assert.equal(2, metric(text, 'moonhttp_connections{state="open"}'))
    assert.equal(1, metric(text, 'moonhttp_connections{state="idle"}'))
    assert.equal(0, metric(text, "moonhttp_reloads_total"))
    idle:close()
    -- a failed reload, then a good one
    H.write_file(path, "local http = require 'moonhttp'\nhttp.handle('GET /x', function() end\n")
    srv:signal("HUP")
    O.wait_for(function() return srv:logtext():find("reload (SIGHUP) failed", 1, true) end, 2)
    text = scrape(mport)
    assert.equal(1, metric(text, "moonhttp_reload_failures_total"))
    assert.equal(1, metric(text, "moonhttp_reload_last_failed"))
    assert.truthy(text:find('moonhttp_reload_last_error_info{error="' .. path .. ':3:', 1, true), text)
    H.write_file(path, APP)
    srv:signal("HUP")
    O.wait_for(function() return srv:logtext():find("reloaded (SIGHUP)", 1, true) end, 2)
    text = scrape(mport)
    assert.equal(1, metric(text, "moonhttp_reloads_total"))
    assert.equal(0, metric(text, "moonhttp_reload_last_failed"))
    assert.equal(0, srv:stop())
  end)

  it("add up across workers, whichever worker answers the scrape", function()
    local srv = H.start(H.script(APP .. 'http.handle("GET /metrics", http.metrics_handler())\n'),
      { flags = { "--workers", "2" } })
    -- the server listens once its first worker is ready; the second may still be starting
    assert.truthy(O.wait_for(function() return metric(scrape(srv.port), "moonhttp_workers") == 2 end, 5))
    for _ = 1, 20 do srv:get("/hello") end
    local text = scrape(srv.port)
    assert.equal(20, metric(text, 'moonhttp_requests_total{pattern="GET /hello",status="2xx"}'), text)
    assert.equal(2, metric(text, "moonhttp_workers"))
    assert.equal(0, srv:stop())
  end)

  it("can be mounted on a route with http.metrics_handler()", function()
    local srv = H.start(H.script(APP .. 'http.handle("GET /metrics", http.metrics_handler())\n'))
    srv:get("/hello")
    local text = scrape(srv.port)
    assert.equal(1, metric(text, 'moonhttp_requests_total{pattern="GET /hello",status="2xx"}'), text)
    assert.equal(0, srv:stop())
  end)
end)

-- The metrics listener and http.metrics_handler() are C handlers served by the ordinary
-- connection code (there is no second HTTP server): keep-alive, pipelining, HEAD, 405 with
-- Allow, the request limits and the middleware of a route all apply to them.
describe("metrics on the main stack", function()
  local function metrics_port(srv)
    return tonumber(srv:logtext():match("metrics on [^\n]* %(port (%d+)%)"))
  end

  it("keep a scrape connection alive and answer pipelined scrapes in order", function()
    local srv = H.start(H.script(APP), { flags = { "--metrics", "127.0.0.1:0" } })
    srv:get("/hello")
    local c = H.connect(metrics_port(srv))
    assert(c:send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
    for _ = 1, 2 do
      local res = assert(c:read_response())
      assert.equal(200, res.status)
      assert.is_nil(res.headers["connection"])
      assert.equal(1, metric(res.body, 'moonhttp_requests_total{pattern="GET /hello",status="2xx"}'), res.body)
    end
    assert(c:send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")) -- a third, on the same connection
    assert.equal(200, assert(c:read_response()).status)
    c:close()
    assert.equal(0, srv:stop())
  end)

  it("answer HEAD without a body, other methods with 405 and Allow, bad requests with 400", function()
    local srv = H.start(H.script(APP), { flags = { "--metrics", "127.0.0.1:0" } })
    local port = metrics_port(srv)
    local head = assert(H.request(port, "HEAD", "/metrics"))
    assert.equal(200, head.status)
    assert.equal("", head.body)
    assert.truthy(tonumber(head.headers["content-length"]) > 0)
    local post = assert(H.request(port, "POST", "/metrics", { ["Content-Length"] = "0" }))
    assert.equal(405, post.status)
    assert.equal("GET, HEAD", post.headers["allow"])
    local c = H.connect(port)
    assert(c:send("GET /metrics HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"))
    assert.equal(400, assert(c:read_response()).status) -- the ordinary parser's rules
    c:close()
    assert.equal(0, srv:stop())
  end)

  it("run behind a route's middleware: http.metrics_handler() is the `next` of a Lua function", function()
    local srv = H.start(H.script(APP .. [[
local admin = http.group("/admin")
admin:use(function(next)
  return function(req, res)
    if req:header("authorization") ~= "secret" then res:status(401) res:write("no") return end
    return next(req, res)
  end
end)
admin:handle("GET /metrics", http.metrics_handler())
]]))
    assert.equal(401, srv:get("/admin/metrics").status)
    local res = srv:get("/admin/metrics", { Authorization = "secret" })
    assert.equal(200, res.status)
    assert.truthy(res.headers["content-type"]:find("text/plain; version=0.0.4", 1, true))
    assert.truthy(res.body:find("# TYPE moonhttp_requests_total counter", 1, true), res.body)
    assert.equal(0, srv:stop())
  end)

  it("http.handle refuses what is neither a function nor a C handler", function()
    local code, out = H.run({ "--check", H.script('local http = require "moonhttp"\nhttp.handle("/x", {})\n') })
    assert.equal(1, code)
    assert.truthy(out:find("handler must be a function or a C handler", 1, true), out)
  end)
end)

describe("pid file", function()
  it("holds the server's pid while it runs and is removed on stop", function()
    local pidfile = H.tmpname(".pid")
    local srv = H.start(H.script(APP), { flags = { "--pid-file", pidfile } })
    assert.equal(tostring(srv.pid), (H.read_file(pidfile) or ""):match("%d+"))
    assert.equal(0, srv:stop())
    assert.is_nil(H.read_file(pidfile))
  end)
end)

describe("shutdown_delay", function()
  it("keeps serving with http.stopping() true, then drains", function()
    local srv = H.start(H.script(APP), { flags = { "--shutdown-delay", "0.6" } })
    assert.equal("ok", srv:get("/healthz").body)
    srv:signal("TERM")
    H.sleep(0.1)
    local res = assert(srv:get("/healthz"))
    assert.equal(503, res.status)
    assert.equal("hello", srv:get("/hello").body)
    assert.equal(0, srv:wait(5))
    srv.stopped = true
    assert.is_nil((O.status(srv.port, "/hello")))
  end)

  it("lists the new flags in --help", function()
    local code, out = H.run({ "--help" })
    assert.equal(0, code)
    for _, f in ipairs({ "--access-log", "--access-log-format", "--pid-file", "--metrics", "--shutdown-delay", "--dev" }) do
      assert.truthy(out:find(f, 1, true), f)
    end
  end)
end)
