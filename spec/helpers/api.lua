-- moonhttp's Lua API as the binary has it, for the specs that hold
-- something to it (docs/reference/ in docs_spec, the editor annotations in
-- annotations_spec): the module functions ("http.fetch", "pg.pool", ...),
-- the methods of req, res and ws ("req:header", ...) and of the other
-- objects an app gets ("sock:send", "d:get", ...), and whether a page
-- names a function.
local H = require "helper"
local W = require "helpers.ws"

local A = {}

-- The documented submodules of `require "moonhttp"`, each with its page
-- docs/reference/<name>.md.
A.MODULES = { "pg", "redis", "session", "csrf", "template", "test", "ratelimit", "cache", "presence" }

-- Every function of the http module and of the A.MODULES, sorted: the
-- module's tables walked one level down (http.json.encode), names starting
-- with "_" left out.
function A.functions()
  local script = H.script([[
local http = require "moonhttp"
local out = {}
local function walk(t, prefix, depth)
  for k, v in pairs(t) do
    if type(k) == "string" and not k:find("^_") then
      if type(v) == "function" then out[#out + 1] = prefix .. "." .. k
      elseif type(v) == "table" and depth < 1 and getmetatable(v) == nil then walk(v, prefix .. "." .. k, depth + 1) end
    end
  end
end
walk(http, "http", 0)
for _, m in ipairs { ]] .. '"' .. table.concat(A.MODULES, '", "') .. '"' .. [[ } do
  walk(require("moonhttp." .. m), m, 1)
end
table.sort(out)
print(table.concat(out, " "))
]])
  local p = assert(io.popen(H.shell_quote(H.bin) .. " run " .. H.shell_quote(script) .. " 2>&1"))
  local text = p:read("a")
  p:close()
  os.remove(script)
  local list = {}
  for name in text:gmatch("%S+") do list[#list + 1] = name end
  assert(#list > 40, text)
  return list
end

-- Every method of the objects a handler gets, sorted: "req:body",
-- "res:write", "ws:send", ... (web.lua's additions included), read from the
-- objects' metatables inside a running server.
function A.methods()
  local srv = H.start([[
local http = require "moonhttp"
local function names(o, prefix, out)
  local mt = getmetatable(o)
  local m = mt.__methods -- req and res keep theirs here (web.lua extends it)
  if not m and type(mt.__index) == "table" then m = mt.__index end
  if not m then m = select(2, debug.getupvalue(mt.__index, 1)) end -- a C __index over a methods table
  for k, v in pairs(m) do
    if type(v) == "function" and not k:find("^_") then out[#out + 1] = prefix .. ":" .. k end
  end
  return out
end
http.handle("GET /objects", function(req, res)
  res:write(table.concat(names(res, "res", names(req, "req", {})), " "))
end)
http.handle("GET /ws", function(req, res)
  local ws = assert(req:websocket())
  ws:send(table.concat(names(ws, "ws", {}), " "))
  ws:close()
end)
]])
  local res = assert(srv:get("/objects"))
  assert(res.status == 200, res.body)
  local text = res.body
  local c = H.connect(srv.port)
  assert(c:send("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    .. "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"))
  local head = assert(c:read_response({ head = true }))
  assert(head.status == 101, srv:logtext())
  text = text .. " " .. assert(W.read_frame(c)).payload
  c:close()
  srv:stop()
  local list = {}
  for name in text:gmatch("%S+") do list[#list + 1] = name end
  table.sort(list)
  return list
end

-- Every method of the objects the API hands an app, by the name the
-- reference calls them ("db:query" as docs/reference/pg.md writes it,
-- "sock:send", "d:get", ...), sorted; names starting with "_" left out.
-- Read from the objects themselves (their own function fields, and a Lua
-- __index table or a C __index over a methods table) inside a running
-- server, all made without a network peer: Redis with auto_pipeline holds
-- no connection until a command, the client WebSocket and the fetched
-- response talk to this same server, an SSE stream is a second request.
-- moonhttp.waiter is left out: it is one of the modules the others are
-- built from (docs/reference/README.md).
function A.object_methods()
  local srv = H.start([[
local http = require "moonhttp"
local pg = require "moonhttp.pg"
local redis = require "moonhttp.redis"
local session = require "moonhttp.session"
http.server{ shared = { walk = "1m" } }
local metrics = {
  counter = http.metrics.counter("walk_total", "x"),
  gauge = http.metrics.gauge("walk_now", "x"),
  histogram = http.metrics.histogram("walk_seconds", "x"),
}
local api = http.group("/api")

-- The methods of o: its own function fields and its metatable's __index
-- (a table, or a function whose upvalues hold the methods table).
local function names(o, prefix, out)
  local seen = {}
  local function add(t)
    for k, v in pairs(t) do
      if type(k) == "string" and type(v) == "function" and not k:find("^_") and not seen[k] then
        seen[k] = true
        out[#out + 1] = prefix .. ":" .. k
      end
    end
  end
  if type(o) == "table" then add(o) end
  local mt = getmetatable(o)
  local index = type(mt) == "table" and mt.__index
  if type(index) == "table" then add(index)
  elseif type(index) == "function" then
    for i = 1, math.huge do
      local name, v = debug.getupvalue(index, i)
      if not name then break end
      if type(v) == "table" and name ~= "_ENV" then add(v) end
    end
  end
  return out
end

http.handle("GET /ws", function(req, res)
  local ws = assert(req:websocket())
  ws:send("hello")
  ws:receive()
end)

http.handle("GET /sse", function(req, res)
  local sse = res:sse()
  sse:send(table.concat(names(sse, "sse", {}), " "))
end)

http.handle("GET /objects", session.middleware{ secret = string.rep("k", 32) }(function(req, res)
  local base = "127.0.0.1:" .. req:arg("port")
  local ch = http.channel("walk")
  local sub <close> = ch:subscribe()
  local ws <close> = assert(http.websocket("ws://" .. base .. "/ws"))
  local resp <close> = assert(http.fetch("http://" .. base .. "/api/none"))
  local objects = {
    db = pg.pool{ host = "127.0.0.1", port = 1, user = "x", database = "x" },
    client = http.client{},
    resp = resp,
    ws = ws,
    sock = http.tcp(),
    t = http.spawn(function() end),
    timer = http.timer(3600, function() end),
    ch = ch,
    sub = sub,
    d = http.shared.walk,
    r = redis.connect{ host = "127.0.0.1", port = 1, auto_pipeline = true },
    group = http.upstream{ servers = { "127.0.0.1:1" } },
    limiter = require("moonhttp.ratelimit").new{ limit = 10, window = 1, dict = "walk" },
    c = require("moonhttp.cache").new{ dict = http.shared.walk },
    p = require("moonhttp.presence").new{ dict = "walk" },
    store = session.shared_store(http.shared.walk),
    s = session.of(req),
    api = api,
  }
  for k, v in pairs(metrics) do objects[k] = v end
  local out = {}
  for prefix, o in pairs(objects) do names(o, prefix, out) end
  names(session.cookie_store(), "store", out)
  objects.timer:cancel()
  res:write(table.concat(out, " "))
end))
]])
  local res = srv:get("/objects?port=" .. srv.port)
  local sse = srv:get("/sse")
  local log = srv:logtext()
  srv:stop()
  assert(res and res.status == 200 and sse and sse.status == 200, log)
  local list, seen = {}, {}
  for name in (res.body .. " " .. sse.body):gmatch("[%w_]+:[%w_]+") do
    if not seen[name] then list[#list + 1] = name end
    seen[name] = true
  end
  table.sort(list)
  assert(#list > 60, res.body)
  return list
end

-- The text of docs/reference/ pages that name the functions and methods:
-- http.md, the pages of its objects, and one page per module of A.MODULES.
function A.reference_text()
  local text = ""
  for _, page in ipairs { "http", "client", "sockets", "websocket-client", table.unpack(A.MODULES) } do
    text = text .. assert(H.read_file("docs/reference/" .. page .. ".md"), "docs/reference/" .. page .. ".md")
  end
  return text
end

-- The reference's text and the guide pages that hold the tables of req,
-- res and a server's ws (docs/reference/http.md sends readers there).
function A.method_pages_text()
  local text = A.reference_text()
  for _, page in ipairs { "handlers", "web-apps", "websocket" } do
    text = text .. assert(H.read_file("docs/guide/" .. page .. ".md"), "docs/guide/" .. page .. ".md")
  end
  return text
end

-- Whether a page's text names `name` as a call: `http.fetch(`, `pg.pool{`,
-- or `name` alone in backticks.
function A.documents(text, name)
  return text:find("`" .. name:gsub("%p", "%%%0") .. "[%(`{]") ~= nil
end

return A
