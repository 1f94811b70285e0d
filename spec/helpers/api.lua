-- moonhttp's Lua API as the binary has it, for the specs that hold
-- something to it (docs/reference/ in docs_spec, the editor annotations in
-- annotations_spec): the module functions ("http.fetch", "pg.pool", ...),
-- the methods of req, res and ws ("req:header", ...), and whether a page
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

-- Every method of the objects the modules hand out, by the name the
-- reference calls them: a PostgreSQL pool ("db:query", as docs/reference/pg.md
-- writes it) and an HTTP client ("client:fetch"); names starting with "_"
-- left out. Read from the objects themselves (a Lua __index table, or a C
-- __index over a methods table), made without a server to talk to.
function A.object_methods()
  local script = H.script([[
local http = require "moonhttp"
local pg = require "moonhttp.pg"
local objects = {
  db = pg.pool{ host = "127.0.0.1", port = 1, user = "x", database = "x" },
  client = http.client{},
}
local out = {}
for name, o in pairs(objects) do
  local index = getmetatable(o).__index
  if type(index) == "function" then index = select(2, debug.getupvalue(index, 1)) end
  for k, v in pairs(index) do
    if type(v) == "function" and not k:find("^_") then out[#out + 1] = name .. ":" .. k end
  end
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
  assert(#list > 5, text)
  return list
end

-- The text of docs/reference/ pages that name the functions: http.md and
-- one page per module of A.MODULES.
function A.reference_text()
  local text = assert(H.read_file("docs/reference/http.md")) .. assert(H.read_file("docs/reference/client.md"))
  for _, m in ipairs(A.MODULES) do
    text = text .. assert(H.read_file("docs/reference/" .. m .. ".md"), "docs/reference/" .. m .. ".md")
  end
  return text
end

-- Whether a page's text names `name` as a call: `http.fetch(`, `pg.pool{`,
-- or `name` alone in backticks.
function A.documents(text, name)
  return text:find("`" .. name:gsub("%p", "%%%0") .. "[%(`{]") ~= nil
end

return A
