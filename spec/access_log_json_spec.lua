-- access_log_format = "json": every line is one JSON object whose fields are
-- exactly the ones docs/guide/logging.md documents, with the values it promises,
-- over HTTP/1.0, HTTP/1.1 and HTTP/2, and valid JSON whatever the client sent.
local H = require "helper"
local cjson = require "cjson"

local APP = [[
local http = require "moonhttp"
http.handle("GET /users/{id}", function(req, res) res:write("user " .. req:pathvalue("id")) end)
http.handle("POST /echo", function(req, res) res:write(req:body()) end)
]]

-- The access-log field table of docs/guide/logging.md: names in order, and types.
local function documented_fields()
  local text = assert(H.read_file("docs/guide/logging.md"))
  local section = assert(text:match("## The access log\n(.*)$"), "docs/guide/logging.md: no access log section")
  local fields = {}
  for name, ty in section:gmatch("\n| `([%w_]+)` | ([%w ]+) |") do
    fields[#fields + 1] = { name = name, type = ty }
  end
  assert(#fields >= 10, "docs/guide/logging.md: the access log's field table")
  return fields
end

local function lines_of(path)
  local list = {}
  for line in (H.read_file(path) or ""):gmatch("[^\n]+") do list[#list + 1] = line end
  return list
end

-- Field names in the order the line has them.
local function keys_in_order(line)
  local keys = {}
  for k in line:gmatch('[{,]"([%w_]+)":') do keys[#keys + 1] = k end
  return keys
end

describe("the json access log", function()
  local log, srv, lines
  setup(function()
    log = H.tmpname(".access")
    srv = H.start(APP, { flags = { "--access-log", log, "--access-log-format", "json",
      "--request-id-header", "X-Request-Id" } })
    local c = srv:connect()
    c:send("GET /users/42?tab=posts&x=%22 HTTP/1.1\r\nHost: api.example\r\nUser-Agent: spec/1.0\r\n"
      .. "Referer: http://r.example/\r\nX-Request-Id: abc-123\r\n\r\n")
    assert.equal(200, c:read_response().status)
    c:send("GET /nowhere HTTP/1.0\r\n\r\n")
    assert.equal(404, c:read_response().status)
    c:close()
    -- bytes a client controls, in every field that carries them
    c = srv:connect()
    c:send("GET /users/q%22%5C?a=%27 HTTP/1.1\r\nHost: h\r\nUser-Agent: a\"b\\c\255\r\n"
      .. "Referer: \"\\\r\n\r\n")
    c:read_response()
    c:close()
    -- a line over the 8 KiB limit: its fields are cut, the line is still JSON
    c = srv:connect()
    c:send("GET /users/" .. string.rep("x", 6000) .. "?" .. string.rep("y", 3000)
      .. " HTTP/1.1\r\nHost: h\r\nUser-Agent: " .. string.rep("u", 4000) .. "\r\n\r\n")
    c:read_response()
    c:close()
    assert(os.execute(("curl -s --http2-prior-knowledge -o /dev/null -A h2/ua -d hello http://127.0.0.1:%d/echo")
      :format(srv.port)))
    assert.equal(0, srv:stop())
    lines = lines_of(log)
  end)
  teardown(function() if srv then srv:stop() end os.remove(log) end)

  it("writes one valid JSON object per request", function()
    assert.equal(5, #lines)
    for _, l in ipairs(lines) do
      local ok, obj = pcall(cjson.decode, l)
      assert(ok and type(obj) == "table", l:sub(1, 300))
    end
  end)

  it("has exactly the documented fields, in the documented order, of the documented types", function()
    local fields = documented_fields()
    for _, l in ipairs(lines) do
      local obj = cjson.decode(l)
      local names = {}
      for i, f in ipairs(fields) do
        names[i] = f.name
        local v = obj[f.name]
        local want = f.type == "string or null" and (v == cjson.null and "userdata" or "string") or f.type
        assert.equal(want, type(v), f.name .. " in " .. l:sub(1, 200))
      end
      assert.same(names, keys_in_order(l))
    end
  end)

  it("says what the request was and what it got", function()
    local a, b = cjson.decode(lines[1]), cjson.decode(lines[2])
    assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$", a.time)
    assert.is_true(a.pid > 1)
    assert.equal(srv.pid, a.pid) -- one worker: the server's own process
    assert.equal("127.0.0.1", a.remote_addr)
    assert.equal("GET", a.method)
    assert.equal("/users/42?tab=posts&x=%22", a.target)
    assert.equal("/users/42", a.path)
    assert.equal("tab=posts&x=%22", a.query)
    assert.equal("api.example", a.host)
    assert.equal("HTTP/1.1", a.proto)
    assert.equal(200, a.status)
    assert.equal(#"user 42", a.bytes)
    assert.is_true(a.duration_ms >= 0 and a.duration_ms < 5000)
    assert.equal("GET /users/{id}", a.pattern)
    assert.equal("http://r.example/", a.referer)
    assert.equal("spec/1.0", a.user_agent)
    assert.equal("abc-123", a.request_id)

    assert.equal("HTTP/1.0", b.proto)
    assert.equal(404, b.status)
    assert.equal(cjson.null, b.pattern)
    assert.equal("", b.query)
    assert.equal("", b.host)
    assert.equal("", b.user_agent)
    assert.equal("", b.referer)
    assert.matches("^%x+$", b.request_id)
    assert.equal(32, #b.request_id)
  end)

  it("keeps the bytes a client sent, escaped", function()
    local c = cjson.decode(lines[3])
    assert.equal("/users/q%22%5C", c.path)
    assert.equal("a=%27", c.query)
    assert.equal('a"b\\c\195\191', c.user_agent) -- byte 255 written as \u00ff
    assert.equal('"\\', c.referer)
    assert.truthy(lines[3]:find('"user_agent":"a\\"b\\\\c\\u00ff"', 1, true), lines[3])
  end)

  it("cuts a line's long fields and still ends it", function()
    local d = cjson.decode(lines[4])
    assert.equal(200, d.status)
    assert.is_true(#lines[4] <= 8192)
    assert.truthy(d.target:find("^/users/xxxx"))
    assert.equal(32, #d.request_id)
  end)

  it("writes HTTP/2 requests with the same fields", function()
    local e = cjson.decode(lines[5])
    assert.equal("HTTP/2.0", e.proto)
    assert.equal("POST", e.method)
    assert.equal("/echo", e.path)
    assert.equal("POST /echo", e.pattern)
    assert.equal(5, e.bytes)
    assert.equal("h2/ua", e.user_agent)
    assert.equal("127.0.0.1:" .. srv.port, e.host)
  end)
end)
