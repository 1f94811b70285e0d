-- What an error value becomes in the log, on the --dev page and for
-- http.on_error: a value with __tostring goes through it (a PostgreSQL
-- error says its SQL message), a table without one shows its type and
-- first fields, and a __tostring that fails falls back to those fields;
-- never "(error object is not a string)". Without --dev the client gets
-- the plain 500 and nothing of the error.
local H = require "helper"
local P = require "pg_helper"

local APP = [[
local http = require "moonhttp"
local custom = setmetatable({}, { __tostring = function() return "custom boom" end })
local broken = setmetatable({ why = "tostring broke" }, { __tostring = function() error("inner") end })
local looping = setmetatable({ why = "tostring loops" }, { __tostring = function() while true do end end })
local named = setmetatable({ code = "E42" }, { __name = "app.error" })
http.handle("GET /custom", function() error(custom) end)
http.handle("GET /fields", function()
  error({ code = "x", message = "two\nlines", long = string.rep("a", 500) })
end)
http.handle("GET /many", function()
  local t = {}
  for i = 1, 50 do t["f" .. i] = i end
  error(t)
end)
http.handle("GET /broken", function() error(broken) end)
http.handle("GET /looping", function() error(looping) end)
http.handle("GET /named", function() error(named) end)
http.handle("GET /nil", function() error(nil) end)
http.handle("GET /bool", function() error(false) end)
http.handle("GET /timer", function(req, res)
  http.timer(0, function() error(setmetatable({}, { __tostring = function() return "timer boom" end })) end)
  res:write("ok")
end)
http.handle("GET /spawn", function(req, res)
  local t = http.spawn(function() error(setmetatable({}, { __tostring = function() return "thread boom" end })) end)
  local ok, err = t:join()
  res:write(tostring(ok), " ", tostring(err))
end)
]]

-- The error line of the log (the traceback follows it on the next lines).
local function logged(srv, route)
  local deadline = H.now() + 3
  repeat
    local line = srv:logtext():match(route:gsub("%p", "%%%0") .. "[^\n]-%): ([^\n]*)\nstack traceback:")
    if line then return line end
    H.sleep(0.05)
  until H.now() > deadline
  error("no error line for " .. route .. " in:\n" .. srv:logtext())
end

describe("error values in --dev", function()
  local srv
  setup(function() srv = H.start(APP, { flags = { "--dev" } }) end)
  teardown(function() srv:stop() end)

  local rows = {
    { "/custom", "custom boom" },
    { "/broken", 'table: {why = "tostring broke"}' },
    { "/looping", 'table: {why = "tostring loops"}' },
    { "/named", 'app.error: {code = "E42"}' },
    { "/nil", "nil" },
    { "/bool", "boolean: false" },
  }
  for _, row in ipairs(rows) do
    it("GET " .. row[1] .. " is shown as " .. row[2], function()
      local res = assert(srv:get(row[1]))
      assert.equal(500, res.status)
      assert.equal(row[2] .. "\nstack traceback:", res.body:match("^[^\n]*\n[^\n]*"), res.body)
      assert.equal(row[2], logged(srv, "GET " .. row[1] .. " from"))
      assert.falsy(srv:logtext():find("error object is not a string", 1, true))
    end)
  end

  it("shows a table's fields, escaped and cut: strings at 60 bytes", function()
    local res = assert(srv:get("/fields", { Accept = "text/html" }))
    assert.equal(500, res.status)
    local pre = res.body:match("<pre>([^\n]*)")
    assert.truthy(pre:find("^table: {"), pre)
    assert.truthy(pre:find('code = &quot;x&quot;', 1, true), pre)
    assert.truthy(pre:find('message = &quot;two\\nlines&quot;', 1, true), pre)
    assert.truthy(pre:find('long = &quot;' .. string.rep("a", 60) .. '&quot;...', 1, true), pre)
    local line = logged(srv, "GET /fields from")
    assert.truthy(line:find('message = "two\\nlines"', 1, true), line)
  end)

  it("shows at most 10 fields", function()
    local line = logged(srv, (assert(srv:get("/many")) and "GET /many from"))
    local _, n = line:gsub(" = ", "")
    assert.equal(10, n, line)
    assert.truthy(line:find(", ...}$"), line)
  end)

  it("goes through __tostring in a timer and in a light thread too; join gets the value", function()
    assert.equal("ok", assert(srv:get("/timer")).body)
    local res = assert(srv:get("/spawn"))
    assert.equal("false thread boom", res.body)
    local deadline = H.now() + 3
    while not srv:logtext():find("timer error: timer boom\nstack traceback:", 1, true) and H.now() < deadline do
      H.sleep(0.05)
    end
    local log = srv:logtext()
    assert.truthy(log:find("timer error: timer boom\nstack traceback:", 1, true), log)
    assert.truthy(log:find("light thread error: thread boom\nstack traceback:", 1, true), log)
  end)
end)

describe("error values without --dev", function()
  it("log through __tostring; the client gets the plain 500 only", function()
    local srv = H.start(APP)
    local res = assert(srv:get("/custom"))
    assert.same({ 500, "500 Internal Server Error\n" }, { res.status, res.body })
    assert.equal("custom boom", logged(srv, "GET /custom from"))
    srv:stop()
  end)
end)

describe("error values given to http.on_error", function()
  it("are logged through __tostring, and a failing __tostring does not break the handler", function()
    local srv = H.start([[
local http = require "moonhttp"
http.on_error(function(req, res, err) res:write("on_error got ", type(err)) end)
http.handle("GET /custom", function() error(setmetatable({}, { __tostring = function() return "custom boom" end })) end)
http.handle("GET /broken", function() error(setmetatable({ a = 1 }, { __tostring = function() error("inner") end })) end)
]])
    local res = assert(srv:get("/custom"))
    assert.same({ 500, "on_error got table" }, { res.status, res.body })
    res = assert(srv:get("/broken"))
    assert.same({ 500, "on_error got table" }, { res.status, res.body })
    local log = srv:logtext()
    assert.truthy(log:find("GET /custom from [^\n]*: custom boom\nstack traceback:"), log)
    assert.truthy(log:find("GET /broken from [^\n]*: table: {a = 1}\nstack traceback:"), log)
    srv:stop()
  end)
end)

describe("a PostgreSQL error raised with assert", function()
  local cluster
  setup(function() cluster = P.start() end)
  teardown(function() if cluster then cluster:stop() end end)

  it("is logged and shown with its SQL message", function()
    local srv = H.start(string.format([[
local http = require "moonhttp"
local pg = require "moonhttp.pg"
local db = pg.pool%s
http.handle("GET /q", function(req, res) res:write(assert(db:query("select nope"))[1].nope) end)
http.handle("GET /detail", function(req, res) assert(db:query("select '{1'::int[]")) end)
]], cluster:pool_opts("trust")), { flags = { "--dev" } })
    local res = assert(srv:get("/q"))
    assert.equal(500, res.status)
    local want = 'ERROR: column "nope" does not exist (SQLSTATE 42703)'
    assert.truthy(res.body:find(want, 1, true), res.body .. srv:logtext())
    assert.truthy(logged(srv, "GET /q from"):find(want, 1, true))
    res = assert(srv:get("/detail"))
    want = 'ERROR: malformed array literal: "{1" (SQLSTATE 22P02) DETAIL: Unexpected end of input.'
    assert.truthy(res.body:find(want, 1, true), res.body)
    srv:stop()
  end)
end)
