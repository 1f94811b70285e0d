-- --dev reload on save, and SIGHUP reload in a single process: new code for
-- new requests, old code for requests in flight, broken saves change nothing.
local H = require "helper"
local O = require "ops_helper"

local function app_dir()
  local dir = H.tmpname("-app")
  assert(os.execute("mkdir -p " .. H.shell_quote(dir)))
  return dir
end

local APP = [[
local http = require "moonhttp"
local greeting = require "greeting"
http.handle("GET /hello", function(req, res) res:write(greeting.text) end)
http.handle("GET /slow", function(req, res)
  http.sleep(tonumber(req:arg("s") or "0.5"))
  res:write("slow:", greeting.text)
end)
http.handle("GET /error", function(req, res) error("boom in dev") end)
]]

local function body(srv, path) return srv:try_get(path) end

describe("--dev", function()
  local srv, dir
  before_each(function()
    dir = app_dir()
    H.write_file(dir .. "/greeting.lua", 'return { text = "v1" }\n')
    H.write_file(dir .. "/app.lua", APP)
    srv = H.start(dir .. "/app.lua", { flags = { "--dev" } })
  end)
  after_each(function()
    assert.equal(0, srv:stop())
    os.execute("rm -rf " .. H.shell_quote(dir))
  end)

  it("serves a new route soon after the script is saved", function()
    assert.equal(404, select(2, body(srv, "/new")))
    H.write_file(dir .. "/app.lua", APP .. 'http.handle("GET /new", function(req, res) res:write("new route") end)\n')
    assert.equal("new route", O.wait_for(function()
      local b, st = body(srv, "/new")
      return st == 200 and b
    end, 2))
    assert.equal("v1", body(srv, "/hello"))
  end)

  it("reloads when a required module in the app directory is saved", function()
    H.write_file(dir .. "/greeting.lua", 'return { text = "v2" }\n')
    assert.truthy(O.wait_for(function() return body(srv, "/hello") == "v2" end, 2))
  end)

  it("keeps the old routes on a broken save, logs file:line, and recovers on the next good save", function()
    H.write_file(dir .. "/app.lua", APP .. "http.handle('GET /x', function() end\n")
    assert.truthy(O.wait_for(function() return srv:logtext():find("reload (file change) failed", 1, true) end, 2))
    local log = srv:logtext()
    local at = log:find(dir .. "/app.lua:", 1, true)
    assert.truthy(at and log:find("^:%d+:", at + #dir + #"/app.lua"), log)
    assert.equal("v1", body(srv, "/hello"))
    -- a runtime error at load and a route conflict are refused the same way
    H.write_file(dir .. "/greeting.lua", 'error("bad module")\n')
    H.write_file(dir .. "/app.lua", APP)
    assert.truthy(O.wait_for(function() return srv:logtext():find("greeting.lua:1: bad module", 1, true) end, 2))
    H.write_file(dir .. "/greeting.lua", 'return { text = "v3" }\n')
    H.write_file(dir .. "/app.lua", APP .. 'http.handle("GET /hello", function() end)\n')
    assert.truthy(O.wait_for(function() return srv:logtext():find("conflict", 1, true) end, 2), srv:logtext())
    assert.equal("v1", body(srv, "/hello"))
    H.write_file(dir .. "/app.lua", APP .. 'http.handle("GET /a/{x", function() end)\n')
    assert.truthy(O.wait_for(function() return srv:logtext():find("invalid pattern", 1, true) end, 2), srv:logtext())
    assert.equal("v1", body(srv, "/hello"))
    H.write_file(dir .. "/app.lua", APP .. 'http.handle("GET /fixed", function(req, res) res:write("fixed") end)\n')
    assert.truthy(O.wait_for(function() return body(srv, "/fixed") == "fixed" end, 2))
    assert.equal("v3", body(srv, "/hello"))
  end)

  it("finishes a request in flight on the old code", function()
    local c = srv:connect()
    assert(c:send("GET /slow?s=0.6 HTTP/1.1\r\nHost: x\r\n\r\n"))
    H.sleep(0.1)
    H.write_file(dir .. "/greeting.lua", 'return { text = "v2" }\n')
    assert.truthy(O.wait_for(function() return body(srv, "/hello") == "v2" end, 2))
    local res = assert(c:read_response())
    assert.equal("slow:v1", res.body)
    c:close()
    assert.equal("slow:v2", body(srv, "/slow?s=0"))
  end)

  it("reloads within 200 ms of a save", function()
    local t0 = H.now()
    H.write_file(dir .. "/greeting.lua", 'return { text = "fast" }\n')
    assert.truthy(O.wait_for(function() return body(srv, "/hello") == "fast" end, 2, 0.005))
    local dt = H.now() - t0
    assert.is_true(dt < 0.2, string.format("save to new response took %.0f ms", dt * 1000))
  end)

  it("logs each request and shows tracebacks in 500s", function()
    local b, st = body(srv, "/error")
    assert.equal(500, st)
    assert.truthy(b:find("boom in dev", 1, true))
    assert.truthy(b:find("stack traceback", 1, true))
    assert.truthy(O.wait_for(function() return srv:logtext():find("GET /error -> 500", 1, true) end, 1))
  end)
end)

describe("production mode", function()
  it("does not log requests or show tracebacks", function()
    local srv = H.start("spec/apps/basic.lua")
    local res = assert(srv:get("/error"))
    assert.equal(500, res.status)
    assert.equal("500 Internal Server Error\n", res.body)
    assert.is_nil(srv:logtext():find("GET /error ->", 1, true))
    assert.equal(0, srv:stop())
  end)
end)

describe("SIGHUP with one worker", function()
  local srv, dir
  before_each(function()
    dir = app_dir()
    H.write_file(dir .. "/greeting.lua", 'return { text = "v1" }\n')
    H.write_file(dir .. "/app.lua", APP)
    srv = H.start(dir .. "/app.lua")
  end)
  after_each(function()
    assert.equal(0, srv:stop())
    os.execute("rm -rf " .. H.shell_quote(dir))
  end)

  it("swaps the code in place; requests in flight finish on the old code", function()
    local c = srv:connect()
    assert(c:send("GET /slow?s=0.5 HTTP/1.1\r\nHost: x\r\n\r\n"))
    H.sleep(0.1)
    H.write_file(dir .. "/greeting.lua", 'return { text = "v2" }\n')
    H.sleep(0.3) -- no watching without --dev
    assert.equal("v1", body(srv, "/hello"))
    srv:signal("HUP")
    assert.truthy(O.wait_for(function() return body(srv, "/hello") == "v2" end, 2))
    assert.equal("slow:v1", assert(c:read_response()).body)
    c:close()
  end)

  it("keeps serving the old code when the new one fails to load", function()
    H.write_file(dir .. "/greeting.lua", 'return {\n')
    srv:signal("HUP")
    assert.truthy(O.wait_for(function() return srv:logtext():find("reload (SIGHUP) failed", 1, true) end, 2))
    assert.truthy(srv:logtext():find("greeting.lua:2:", 1, true), srv:logtext())
    assert.equal("v1", body(srv, "/hello"))
  end)

  it("answers every request while reloading under load", function()
    local load = O.start_wrk("http://127.0.0.1:" .. srv.port .. "/hello", 2, 16)
    if load then
      for i = 1, 8 do
        H.sleep(0.2)
        H.write_file(dir .. "/greeting.lua", 'return { text = "v' .. i .. '" }\n')
        srv:signal("HUP")
      end
      local r = load:finish()
      assert.is_true(r.requests > 1000, r.text)
      assert.equal(0, r.non2xx, r.text)
      assert.equal(0, r.socket_errors, r.text)
    else
      local r = O.lua_load(srv.port, "/hello", 1.5, function() srv:signal("HUP") end)
      assert.equal(0, r.failures, table.concat(r.statuses, ","))
    end
    assert.truthy(O.wait_for(function() return srv:logtext():find("reloaded (SIGHUP)", 1, true) end, 2))
  end)
end)
