-- Error responses go through the app: http.use middleware wraps the router's
-- 404 and 405 answers, http.on_error answers a handler's error, and a
-- failing error handler falls back to the plain 500.
local H = require "helper"
local cjson = require "cjson"

local CORS_APP = [[
local http = require "moonhttp"
http.use(function(next)
  return function(req, res)
    res:header("Access-Control-Allow-Origin", "*")
    if req.method == "OPTIONS" then
      res:header("Access-Control-Allow-Methods", "GET, POST")
      res:status(204)
      return
    end
    http.log("info", "mw saw " .. req.method .. " " .. req.path)
    return next(req, res)
  end
end)
http.handle("GET /only-get", function(req, res) res:write("got") end)
]]

describe("middleware around the router's answers", function()
  local srv
  setup(function() srv = H.start(CORS_APP) end)
  teardown(function() srv:stop() end)

  it("answers a CORS preflight to a GET-only route with the middleware's headers", function()
    local res = assert(srv:request("OPTIONS", "/only-get", { Origin = "http://x" }))
    assert.equal(204, res.status)
    assert.equal("*", res.headers["access-control-allow-origin"])
    assert.equal("GET, POST", res.headers["access-control-allow-methods"])
  end)

  it("wraps the default 405, keeping its Allow header and body", function()
    local res = assert(srv:request("POST", "/only-get", {}, "x"))
    assert.equal(405, res.status)
    assert.equal("GET, HEAD", res.headers["allow"])
    assert.equal("*", res.headers["access-control-allow-origin"])
    assert.equal("Method Not Allowed\n", res.body)
  end)

  it("wraps the default 404, and the middleware sees it", function()
    local res = assert(srv:get("/nope"))
    assert.equal(404, res.status)
    assert.equal("404 page not found\n", res.body)
    assert.equal("*", res.headers["access-control-allow-origin"])
    assert.truthy(srv:logtext():find("mw saw GET /nope", 1, true))
  end)
end)

describe("custom 404/405 handlers inside middleware", function()
  it("still get the Allow list, even through middleware that passes (req, res) only", function()
    local srv = H.start([[
local http = require "moonhttp"
http.use(function(next) return function(req, res) res:header("X-Mw", "1"); next(req, res) end end)
http.handle("GET /a", function(req, res) res:write("a") end)
http.not_found(function(req, res) res:write("custom 404 for " .. req.path) end)
http.method_not_allowed(function(req, res, allow) res:write("use " .. tostring(allow)) end)
]])
    local res = assert(srv:get("/zzz"))
    assert.same({ 404, "1", "custom 404 for /zzz" }, { res.status, res.headers["x-mw"], res.body })
    res = assert(srv:request("DELETE", "/a"))
    assert.same({ 405, "1", "use GET, HEAD" }, { res.status, res.headers["x-mw"], res.body })
    srv:stop()
  end)
end)

local ON_ERROR_APP = [[
local http = require "moonhttp"
http.on_error(function(req, res, err)
  http.sleep(0.01) -- it runs in the handler's task: it may wait
  if type(err) == "table" then return res:json({ error = err.message, code = err.code }, err.status) end
  res:json({ error = "internal", detail = tostring(err):match("boom%w*") })
end)
http.handle("GET /boom/{n}", function(req, res) res:header("X-Gone", "1"); error("boom1") end)
http.handle("GET /typed", function(req, res) error({ status = 409, code = 7, message = "taken" }) end)
http.handle("GET /late", function(req, res)
  res:write(string.rep("x", 70000)) -- the response has started: it can only be cut
  http.sleep(0.01)
  error("boomlate")
end)
http.handle("GET /fine", function(req, res) res:write("fine") end)
]]

describe("http.on_error", function()
  local srv
  setup(function() srv = H.start(ON_ERROR_APP) end)
  teardown(function() srv:stop() end)

  it("lets a JSON API answer its own 500; the handler's headers are gone", function()
    local res = assert(srv:get("/boom/7?x=1"))
    assert.equal(500, res.status)
    assert.equal("application/json", res.headers["content-type"])
    assert.same({ error = "internal", detail = "boom1" }, cjson.decode(res.body))
    assert.is_nil(res.headers["x-gone"])
    local log = srv:logtext()
    -- The core's line, as without on_error: the route's pattern, then the request.
    assert.truthy(log:find("handler error (route GET /boom/{n}; GET /boom/7?x=1 from 127.0.0.1:", 1, true), log)
    assert.truthy(log:find("boom1\nstack traceback:", 1, true), log)
  end)

  it("gets the error value as raised (a table here)", function()
    local res = assert(srv:get("/typed"))
    assert.equal(409, res.status)
    assert.same({ error = "taken", code = 7 }, cjson.decode(res.body))
  end)

  it("cannot help once the response started: the connection is cut", function()
    local c = srv:connect()
    assert(c:send("GET /late HTTP/1.1\r\nHost: x\r\n\r\n"))
    local res = c:read_response()
    assert.is_nil(res) -- the chunked body never ends properly
    c:close()
    assert.equal("fine", srv:get("/fine").body)
  end)

  it("covers 404s when set", function()
    local res = assert(srv:get("/nothing"))
    assert.equal(404, res.status)
  end)
end)

describe("a failing error handler", function()
  it("falls back to the plain 500", function()
    local srv = H.start([[
local http = require "moonhttp"
http.on_error(function(req, res, err) res:write("partial"); error("handler broke too") end)
http.handle("GET /boom", function() error("boom") end)
]])
    local res = assert(srv:get("/boom"))
    assert.equal(500, res.status)
    assert.equal("500 Internal Server Error\n", res.body)
    assert.truthy(srv:logtext():find("handler broke too", 1, true))
    srv:stop()
  end)

  it("without on_error, a 500 is unchanged", function()
    local srv = H.start('local http = require "moonhttp"\nhttp.handle("GET /boom", function() error("x") end)\n')
    local res = assert(srv:get("/boom"))
    assert.same({ 500, "500 Internal Server Error\n" }, { res.status, res.body })
    srv:stop()
  end)
end)

describe("--dev error pages", function()
  local srv
  setup(function()
    srv = H.start([[
local http = require "moonhttp"
http.handle("GET /xss", function(req, res) error("<script>alert('x')</script> & more") end)
]], { flags = { "--dev" } })
  end)
  teardown(function() srv:stop() end)

  it("shows a browser an HTML page with the traceback, escaped", function()
    local res = assert(srv:get("/xss", { Accept = "text/html,application/xhtml+xml,*/*;q=0.8" }))
    assert.equal(500, res.status)
    assert.equal("text/html; charset=utf-8", res.headers["content-type"])
    assert.truthy(res.body:find("<pre>", 1, true), res.body)
    assert.truthy(res.body:find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more", 1, true), res.body)
    assert.truthy(res.body:find("stack traceback:", 1, true), res.body)
    assert.falsy(res.body:find("<script>", 1, true))
  end)

  it("gives other clients the traceback as text", function()
    local res = assert(srv:get("/xss"))
    assert.equal("text/plain; charset=utf-8", res.headers["content-type"])
    assert.truthy(res.body:find("<script>alert('x')</script> & more", 1, true), res.body)
  end)
end)

describe("--dev with a failed reload", function()
  it("serves the old code, every response carrying X-Moonhttp-Reload-Error, until a good save", function()
    local dir = H.tmpname("-dev")
    os.execute("mkdir -p " .. H.shell_quote(dir))
    local path = dir .. "/app.lua"
    local v1 = 'local http = require "moonhttp"\nhttp.handle("GET /", function(req, res) res:write("v1") end)\n'
    H.write_file(path, v1)
    local srv = H.start(path, { flags = { "--dev" } })
    assert.is_nil(srv:get("/").headers["x-moonhttp-reload-error"])
    H.write_file(path, v1 .. "http.handle('GET /x', function() end\n")
    local res
    local deadline = H.now() + 3
    repeat
      H.sleep(0.05)
      res = assert(srv:get("/"))
    until res.headers["x-moonhttp-reload-error"] or H.now() > deadline
    assert.equal("v1", res.body)
    local hdr = res.headers["x-moonhttp-reload-error"]
    assert.truthy(hdr and hdr:find(path .. ":4: ')' expected", 1, true), hdr)
    res = assert(srv:get("/missing"))      -- the core's own 404 carries it too
    assert.truthy(res.headers["x-moonhttp-reload-error"])
    H.write_file(path, (v1:gsub("v1", "v2")))
    deadline = H.now() + 3
    repeat
      H.sleep(0.05)
      res = assert(srv:get("/"))
    until res.body == "v2" or H.now() > deadline
    assert.equal("v2", res.body)
    assert.is_nil(res.headers["x-moonhttp-reload-error"])
    srv:stop()
    os.execute("rm -rf " .. H.shell_quote(dir))
  end)
end)

describe("load errors", function()
  local function check(source)
    local path = H.script(source)
    local code, out = H.run({ "--check", path })
    return code, out, path
  end

  it("an unknown setting names the script's line and the closest known name", function()
    local code, out, path = check('local http = require "moonhttp"\nhttp.server{ idle_timout = 3 }\n')
    assert.equal(1, code)
    assert.truthy(out:find(path .. ':2: http.server: unknown setting "idle_timout" (did you mean "idle_timeout"?)', 1, true), out)
    code, out = check('local http = require "moonhttp"\nhttp.server{ zebra = 3 }\n')
    assert.truthy(out:find('unknown setting "zebra" (moonhttp --help lists them)', 1, true), out)
  end)

  it("a bad setting value names the http.server line", function()
    local code, out, path = check('local http = require "moonhttp"\n\nhttp.server{ idle_timeout = -3 }\n')
    assert.equal(1, code)
    assert.truthy(out:find(path .. ":3: idle_timeout: -3 is out of range", 1, true), out)
  end)

  it("an invalid pattern reports the user's line without moonhttp's traceback", function()
    local code, out, path = check('local http = require "moonhttp"\n\nhttp.handle("GET /x/{bad", function() end)\n')
    assert.equal(1, code)
    assert.equal("moonhttp: " .. path .. ':3: invalid pattern "GET /x/{bad": bad wildcard segment "{bad" (must end with \'}\')\n', out)
  end)

  it("a middleware that returns no function says where it was registered", function()
    local code, out, path = check('local http = require "moonhttp"\nlocal api = http.group("/api")\n'
      .. 'api:use(function(next) end)\napi:handle("GET /x", function() end)\n')
    assert.equal(1, code)
    assert.truthy(out:find(path .. ":3: middleware registered here returned nil instead of a handler function (composing GET /api/x)", 1, true), out)
    assert.falsy(out:find("moonhttp.init", 1, true), out)
  end)
end)

describe("a reload that changes http.server{} settings", function()
  it("logs that they need a restart", function()
    local path = H.script('local http = require "moonhttp"\nhttp.server{ idle_timeout = 5, max_body_bytes = 1000 }\n'
      .. 'http.handle("GET /", function(req, res) res:write("v1") end)\n')
    local srv = H.start(path)
    H.write_file(path, 'local http = require "moonhttp"\nhttp.server{ idle_timeout = 7, max_body_bytes = 1000 }\n'
      .. 'http.handle("GET /", function(req, res) res:write("v2") end)\n')
    srv:signal("HUP")
    local deadline = H.now() + 3
    while srv:get("/").body ~= "v2" and H.now() < deadline do H.sleep(0.05) end
    local log = srv:logtext()
    assert.truthy(log:find("reload: http.server{} setting idle_timeout changed (" .. path .. ":2)", 1, true), log)
    assert.truthy(log:find("take effect on a restart", 1, true), log)
    assert.falsy(log:find("max_body_bytes changed", 1, true), log)
    srv:stop()
  end)

  -- Issue 36: the warning comes once per changed value, not again on every
  -- later SIGHUP while the script still asks for the same thing; a value
  -- changed again is a new warning. One worker and two, as the reload runs in
  -- the worker or in the master.
  for _, workers in ipairs({ "1", "2" }) do
    it("logs each changed value once, not on every later SIGHUP (" .. workers .. " worker(s))", function()
      local function app(version, idle, size)
        return ('local http = require "moonhttp"\n'
          .. 'http.server{ idle_timeout = %d, shared = { cache = "%s" } }\n'
          .. 'http.handle("GET /", function(req, res) res:write("%s") end)\n'):format(idle, size, version)
      end
      local path = H.script(app("v1", 5, "1m"))
      local srv = H.start(path, { flags = { "--workers", workers } })
      local function reload(version, idle, size)
        H.write_file(path, app(version, idle, size))
        srv:signal("HUP")
        -- polled until the new code answers once: an old worker still serves
        -- until all new ones do (so a second GET may see the old version), and
        -- starting them takes seconds under ASan on a busy machine
        local deadline, body = H.now() + 20, nil
        repeat
          body = srv:get("/").body
          if body ~= version then H.sleep(0.05) end
        until body == version or H.now() > deadline
        assert.equal(version, body)
      end
      local function count(text)
        local log, n = srv:logtext(), 0
        for _ in log:gmatch(text:gsub("%p", "%%%0")) do n = n + 1 end
        return n
      end
      local setting = "setting idle_timeout changed"
      local dict = "shared dict cache keeps its size"
      reload("v2", 7, "2m")
      reload("v3", 7, "2m")
      reload("v4", 7, "2m")
      assert.equal(1, count(setting), srv:logtext())
      assert.equal(1, count(dict), srv:logtext())
      reload("v5", 9, "3m") -- changed again: said again
      reload("v6", 9, "3m")
      assert.equal(2, count(setting), srv:logtext())
      assert.equal(2, count(dict), srv:logtext())
      reload("v7", 5, "1m") -- back to what runs: nothing to say
      reload("v8", 7, "2m") -- away again, to a value said before: said again
      assert.equal(3, count(setting), srv:logtext())
      assert.equal(3, count(dict), srv:logtext())
      srv:stop()
    end)
  end
end)
