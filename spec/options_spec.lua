-- Every options table of the Lua API is checked against its known names:
-- a typo raises at the call, naming the caller's line, the bad name and
-- the closest known one ("did you mean"), instead of a silent default.
-- Calls made while the script loads fail `moonhttp --check`.
local H = require "helper"

-- Calls made in a handler: { name, the bad call, the expected message, a good call }.
-- In each, `port` is the server's own port; a good call returns something other than an error.
local RUNTIME = {
  { "sock:connect", [[http.tcp():connect("127.0.0.1", port, { pool_sise = 2 })]],
    'sock:connect: unknown option "pool_sise" (did you mean "pool_size"?)',
    [[return assert(http.tcp():connect("127.0.0.1", port, { pool = "p", pool_size = 2 }))]] },
  { "sock:connect tls", [[http.tcp():connect("127.0.0.1", port, { tls = { server_nam = "x" } })]],
    'sock:connect: unknown option "server_nam" (did you mean "server_name"?)' },
  { "sock:tls_handshake", [[local s = http.tcp(); assert(s:connect("127.0.0.1", port)); s:tls_handshake({ veriffy = false })]],
    'sock:tls_handshake: unknown option "veriffy" (did you mean "verify"?)' },
  { "http.fetch", [[http.fetch("http://127.0.0.1:" .. port .. "/ok", { timout = 2 })]],
    'http.fetch: unknown option "timout" (did you mean "timeout"?)',
    [[return assert(http.fetch("http://127.0.0.1:" .. port .. "/ok", { timeout = 2, redirects = 1 })):body()]] },
  { "client:fetch", [[http.client{}:fetch("http://127.0.0.1:" .. port .. "/ok", { methd = "GET" })]],
    'http.fetch: unknown option "methd" (did you mean "method"?)',
    [[return assert(http.client{ max_idle = 2 }:fetch("http://127.0.0.1:" .. port .. "/ok", { method = "GET" })):body()]] },
  { "http.client", [[http.client{ conect_timeout = 1 }]],
    'http.client: unknown option "conect_timeout" (did you mean "connect_timeout"?)' },
  { "req:websocket", [[req:websocket{ max_mesage = "1m" }]],
    'req:websocket: unknown option "max_mesage" (did you mean "max_message"?)' },
  { "res:set_cookie", [[res:set_cookie{ name = "a", value = "b", http_onyl = false }]],
    'res:set_cookie: unknown option "http_onyl" (did you mean "http_only"?)',
    [[res:set_cookie{ name = "a", value = "b", http_only = false }; return "set"]] },
  { "sse:send", [[res:sse():send{ dat = "x" }]],
    'sse:send: unknown option "dat" (did you mean "data"?)' },
  { "req:args", [[req:args{ mutli = true }]],
    'req:args: unknown option "mutli" (did you mean "multi"?)',
    [[return type(req:args{ multi = true })]] },
  { "req:multipart", [[req:multipart{ max_part = 3 }]],
    'req:multipart: unknown option "max_part" (did you mean "max_parts"?)',
    [[return (select(2, req:multipart{ max_parts = 3 }))]] },
  { "redis.connect", [[redis.connect{ port = port, pasword = "x" }]],
    'redis.connect: unknown option "pasword" (did you mean "password"?)',
    [[return (select(2, redis.connect{ port = 1, timeout = 1 }))]] },
  { "db:listen", [[pg.pool{ port = 1 }:listen("jobs", { timout = 1 })]],
    'db:listen: unknown option "timout" (did you mean "timeout"?)' },
  { "a name far from all", [[http.tcp():connect("127.0.0.1", port, { zebra = 1 })]],
    'sock:connect: unknown option "zebra" (known: tls, pool, pool_size)' },
  { "http.websocket", [[http.websocket("ws://127.0.0.1:" .. port .. "/", { timout = 1 })]],
    'http.websocket: unknown option "timout" (did you mean "timeout"?)' },
  -- a value of the wrong kind, worded by the one reader of its kind (src/lua/lua_opts.c)
  { "http.websocket max_frame", [[http.websocket("ws://127.0.0.1:" .. port .. "/", { max_frame = "big" })]],
    'http.websocket: max_frame must be a size in bytes >= 1 (a number, or a string like "64k", "1m")' },
  { "req:websocket ping_interval", [[req:websocket{ ping_interval = -1 }]],
    'req:websocket: ping_interval must be a number of seconds >= 0' },
  { "http.fetch read_timeout", [[http.fetch("http://127.0.0.1:" .. port .. "/ok", { read_timeout = -1 })]],
    'http.fetch: read_timeout must be a number of seconds >= 0',
    [[return assert(http.fetch("http://127.0.0.1:" .. port .. "/ok", { read_timeout = 1.5 })):body()]] },
}

local function app_source()
  local out = { [[
local http = require "moonhttp"
local redis = require "moonhttp.redis"
local pg = require "moonhttp.pg"
http.handle("GET /ok", function(req, res) res:write("fine") end)
local rows = {}
]] }
  for i, row in ipairs(RUNTIME) do
    out[#out + 1] = string.format("rows[%d] = { function(req, res, port)\n%s\nend, function(req, res, port)\n%s\nend }\n",
      i, row[2], row[4] or "return 'none'")
  end
  out[#out + 1] = [[
http.handle("GET /row/{n}/{which}/{port}", function(req, res)
  local port = tonumber(req:pathvalue("port"))
  local row = rows[tonumber(req:pathvalue("n"))]
  local ok, v = pcall(row[req:pathvalue("which") == "bad" and 1 or 2], req, res, port)
  res:write(ok and ("ok " .. tostring(v)) or ("error " .. tostring(v)))
end)
]]
  return table.concat(out)
end

describe("options tables used in a handler", function()
  local srv, path
  setup(function()
    path = H.script(app_source())
    srv = H.start(path)
  end)
  teardown(function() srv:stop() end)

  for i, row in ipairs(RUNTIME) do
    it(row[1] .. ": a typo raises at the caller's line, with the suggestion", function()
      local res = assert(srv:get("/row/" .. i .. "/bad/" .. srv.port))
      local where, msg = res.body:match("^error (.-):%d+: (.*)$")
      assert.equal(path, where, res.body)
      assert.equal(row[3], msg)
    end)
    if row[4] then
      it(row[1] .. ": a correct call still works", function()
        local res = assert(srv:get("/row/" .. i .. "/good/" .. srv.port))
        assert.truthy(res.body:find("^ok "), res.body)
      end)
    end
  end
end)

-- Calls made while the script loads: { the bad call, the expected message, the good call }.
local LOAD = {
  { [[pg.pool{ databse = "app" }]], 'pg.pool: unknown option "databse" (did you mean "database"?)',
    [[pg.pool{ database = "app", port = 1 }]] },
  { [[pg.pool{ tls = { verfy = false } }]], 'pg.pool: tls: unknown option "verfy" (did you mean "verify"?)',
    [[pg.pool{ tls = { verify = false } }]] },
  { [[session.middleware{ secret = string.rep("s", 32), max_agee = 60 }]],
    'session.middleware: unknown option "max_agee" (did you mean "max_age"?)',
    [[session.middleware{ secret = string.rep("s", 32), max_age = 60 }]] },
  { [[session.middleware{ secret = string.rep("s", 32), cookie = { secur = true } }]],
    'session.middleware: cookie: unknown option "secur" (did you mean "secure"?)',
    [[session.middleware{ secret = string.rep("s", 32), cookie = { secure = true } }]] },
  { [[http.client{ max_idel = 3 }]], 'http.client: unknown option "max_idel" (did you mean "max_idle"?)',
    [[http.client{ max_idle = 3 }]] },
  { [[http.client{ tls = { verfy = false } }]], 'http.client: tls: unknown option "verfy" (did you mean "verify"?)',
    [[http.client{ tls = { verify = false } }]] },
  { [[http.handle("GET /", function() end, { max_bdy = 1 })]],
    'http.handle: unknown option "max_bdy" (did you mean "max_body"?)',
    [[http.handle("GET /", function() end, { max_body = 1 })]] },
  { [[http.files(".", { max_ag = 1 })]], 'http.files: unknown option "max_ag" (did you mean "max_age"?)',
    [[http.files(".", { max_age = 1 })]] },
  { [[http.server{ compress = { levl = 3 } }]], 'compress: unknown key "levl" (did you mean "level"?)',
    [[http.server{ compress = { level = 3 } }]] },
  { [[http.server{ listen = { { addr = "127.0.0.1:0", tsl = true } } }]],
    'listen[1]: unknown key "tsl" (did you mean "tls"?)',
    [[http.server{ listen = { { addr = "127.0.0.1:0", tls = false } } }]] },
  { [[http.server{ listen = { { addr = "127.0.0.1:0", tls = { cert = "a", kye = "b" } } } }]],
    'listen[1].tls: unknown key "kye" (did you mean "key"?)',
    [[http.server{ listen = { "127.0.0.1:0" } }]] },
  { [[http.client{ [1] = true }]], "http.client: option names must be strings, got a number key",
    [[http.client()]] },
  -- values of the wrong kind; a size is read as the settings read one ("1.5m" too)
  { [[http.handle("GET /", function() end, { max_body = "lots" })]],
    'http.handle: max_body must be a size in bytes (a number, or a string like "64k", "1m")',
    [[http.handle("GET /", function() end, { max_body = "1.5m" })]] },
  { [[http.client{ idle_timeout = -1 }]], "http.client: idle_timeout must be a number of seconds >= 0",
    [[http.client{ idle_timeout = 1.5, drain_bytes = "64k" }]] },
  { [[http.client{ max_idle = "2" }]], "http.client: max_idle must be a number >= 0",
    [[http.client{ max_idle = 2 }]] },
  { [[pg.pool{ size = 0 }]], "pg.pool: size must be a number >= 1", [[pg.pool{ size = 2, port = 1 }]] },
  { [[require("moonhttp.cache").new{ dict = {}, max_entry = 0 }]],
    'moonhttp.cache: max_entry must be a size in bytes >= 1 (a number, or a string like "64k", "1m")',
    [[require("moonhttp.cache").new{ dict = {}, max_entry = "1.5m", lock_timeout = 0.5 }]] },
  { [[require("moonhttp.cache").new{ dict = {}, lock_timeout = "5" }]],
    "moonhttp.cache: lock_timeout must be a number of seconds >= 0",
    [[require("moonhttp.cache").new{ dict = {}, lock_timeout = 5 }]] },
}

local HEAD = 'local http = require "moonhttp"\nlocal pg = require "moonhttp.pg"\n'
  .. 'local session = require "moonhttp.session"\n'

describe("options tables used while the script loads", function()
  for _, row in ipairs(LOAD) do
    it("moonhttp --check fails on " .. row[1], function()
      local path = H.script(HEAD .. row[1] .. "\n")
      local code, out = H.run({ "--check", path })
      assert.equal(1, code, out)
      assert.truthy(out:find("moonhttp: " .. path .. ":4: " .. row[2], 1, true), out)
      path = H.script(HEAD .. row[3] .. "\n")
      code, out = H.run({ "--check", path })
      assert.equal(0, code, out)
    end)
  end
end)

describe("moonhttp.test's options (outside the server: the known names, no suggestion)", function()
  local test = require "moonhttp.test"
  it("test.start raises at the caller's line before it starts anything", function()
    local ok, err = pcall(test.start, "x.lua", nil, { bni = "moonhttp" })
    assert.is_false(ok)
    assert.equal('test.start: unknown option "bni" (known: bin, tls)', err)
    local line = debug.getinfo(1, "l").currentline + 1
    ok, err = pcall(function() test.start("x.lua", {}, { bni = "x" }) end)
    assert.equal("spec/options_spec.lua:" .. line .. ': test.start: unknown option "bni" (known: bin, tls)', err)
  end)

  it("app:get and app:websocket raise; correct calls work", function()
    local app = test.start(H.script('local http = require "moonhttp"\n'
      .. 'http.handle("GET /", function(req, res) res:write("hi") end)\n'), nil, { bin = H.bin })
    local ok, err = pcall(function() app:get("/", { header = {} }) end)
    assert.is_false(ok)
    assert.truthy(err:find('app:request: unknown option "header" (known: headers, timeout, listener, tls)', 1, true), err)
    ok, err = pcall(function() app:websocket("/", { protocol = { "x" } }) end)
    assert.truthy(err:find('app:websocket: unknown option "protocol" (known: headers, protocols, timeout, listener, tls)', 1, true), err)
    local status, _, body = app:get("/", { headers = { Accept = "*/*" }, timeout = 5 })
    assert.same({ 200, "hi" }, { status, body })
    app:stop()
  end)
end)
