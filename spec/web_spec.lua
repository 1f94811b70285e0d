-- JSON bodies, cookies, forms, query lists and multipart through the real
-- binary. Hostile inputs are raw bytes in data rows: none may give a 500.
local H = require "helper"
local cjson = require "cjson"

local app = [[
local http = require "moonhttp"
local json = http.json
http.server{ max_body_bytes = 64 * 1024 }
http.handle("POST /json", function(req, res)
  local v, err = req:json()
  if v == nil then return res:json({ error = err }, 400) end
  res:json({ got = v })
end)
http.handle("GET /decode_raises", function(req, res)
  res:write(tostring(pcall(http.json.decode, 42)))
end)
http.handle("GET /cookies", function(req, res)
  res:json({ one = req:cookie("a") or json.null, all = req:cookies() })
end)
http.handle("GET /setcookie", function(req, res)
  local spec = assert(load("return " .. req:arg("c")))()
  local ok, err = pcall(res.set_cookie, res, spec)
  if not ok then return res:write("raised: ", tostring(err)) end
  res:write("ok")
end)
http.handle("GET /twocookies", function(req, res)
  res:set_cookie{ name = "a", value = "1" }:set_cookie{ name = "b", value = "2", http_only = false }
end)
http.handle("POST /form", function(req, res)
  local f, lists = req:form()
  if not f then return res:json({ error = lists }, 400) end
  res:json({ first = f, lists = lists })
end)
http.handle("POST /form_twice", function(req, res)
  local f = req:form()
  res:json({ first = f, again = (req:form()), body = req:body() })
end)
http.handle("GET /args", function(req, res)
  local lists, err = req:args{ multi = true }
  res:json({ first = req:args(), a = req:arg("a") or json.null, lists = lists or json.null,
             err = err or json.null })
end)
http.handle("POST /upload", function(req, res)
  local mp, err = req:multipart{ max_parts = 5, max_header_bytes = 1024 }
  if not mp then return res:json({ error = err }, 400) end
  local out = {}
  for part in mp do
    local body, berr = part:body()
    if not body then break end
    out[#out + 1] = { name = part.name or json.null, filename = part.filename or json.null,
      type = part.content_type or json.null, body = body, x = part:headers()["x-extra"] or json.null }
  end
  if mp.err then return res:json({ error = mp.err }, 400) end
  res:json(out)
end)
http.handle("POST /upload_skip", function(req, res)
  local mp = assert(req:multipart())
  local names = {}
  for part in mp do names[#names + 1] = part.name .. ":" .. (part:read(2) or "") end
  res:write(mp.err or table.concat(names, ","))
end)
]]

local srv
setup(function() srv = H.start(app) end)
teardown(function() srv:stop() end)

local function raw(bytes)
  local c = srv:connect()
  assert(c:send(bytes))
  local r = assert(c:read_response())
  c:close()
  return r
end

local function post(path, ctype, body)
  return raw("POST " .. path .. " HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Type: " .. ctype
    .. "\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body)
end

describe("JSON from clients", function()
  it("req:json decodes the body", function()
    local r = post("/json", "application/json", '{"a":[1,2],"b":"x"}')
    assert.equal(200, r.status)
    assert.same({ got = { a = { 1, 2 }, b = "x" } }, cjson.decode(r.body))
  end)
  for _, row in ipairs({ { "truncated", '{"a":' }, { "garbage", "\1\2\3" }, { "empty", "" },
                         { "trailing junk", "[1] x" } }) do
    it("malformed JSON (" .. row[1] .. ") is nil, err and a 400, not a 500", function()
      local r = post("/json", "application/json", row[2])
      assert.equal(400, r.status)
      assert.matches("^malformed JSON", cjson.decode(r.body).error)
    end)
  end
  it("http.json.decode raises on a non-string (misuse)", function()
    assert.equal("false", srv:get("/decode_raises").body)
  end)
end)

describe("req:cookie and req:cookies", function()
  -- { name, Cookie header bytes, expected req:cookie("a"), expected req:cookies() }
  local rows = {
    { "simple", "a=1; b=2", "1", { a = "1", b = "2" } },
    { "first of a repeated name wins", "a=1; a=2", "1", { a = "1" } },
    { "quotes are dropped", 'a="q v"', "q v", { a = "q v" } },
    { "spaces around = and ;", "  a = 1 ;b=2  ", "1", { a = "1", b = "2" } },
    { "pieces without = are skipped", "junk; a=1; ;;", "1", { a = "1" } },
    { "empty name is skipped", "=x; a=1", "1", { a = "1" } },
    { "empty value", "a=", "", { a = "" } },
    { "value with =", "a=x=y", "x=y", { a = "x=y" } },
    { "bytes are kept as they are", "a=%41\xff\xfe", "%41\xff\xfe", { a = "%41\xff\xfe" } },
    { "only semicolons", ";;;;", nil, {} },
    { "a huge header", "a=" .. string.rep("x", 20000), string.rep("x", 20000), { a = string.rep("x", 20000) } },
    { "many pairs", string.rep("z=1; ", 2000) .. "a=9", "9", { z = "1", a = "9" } },
  }
  for _, row in ipairs(rows) do
    it(row[1], function()
      local r = raw("GET /cookies HTTP/1.1\r\nHost: a\r\nConnection: close\r\nCookie: " .. row[2] .. "\r\n\r\n")
      assert.equal(200, r.status)
      local v = cjson.decode(r.body)
      assert.equal(row[3], v.one ~= cjson.null and v.one or nil)
      assert.same(row[4], v.all)
    end)
  end
  it("reads every Cookie header line", function()
    local r = raw("GET /cookies HTTP/1.1\r\nHost: a\r\nConnection: close\r\nCookie: b=2\r\nCookie: a=1\r\n\r\n")
    assert.same({ a = "1", b = "2" }, cjson.decode(r.body).all)
  end)
  it("no Cookie header: nil and an empty table", function()
    local v = cjson.decode(srv:get("/cookies").body)
    assert.equal(cjson.null, v.one)
    assert.same({}, v.all)
  end)
end)

describe("res:set_cookie", function()
  local function set(spec)
    local r = srv:get("/setcookie?c=" .. spec:gsub("[^%w]", function(ch) return string.format("%%%02X", ch:byte()) end))
    assert.equal(200, r.status)
    return r.headers["set-cookie"], r.body
  end
  -- { Lua table, expected Set-Cookie (or nil), expected error fragment (or nil) }
  local rows = {
    { '{ name = "id", value = "abc" }', "id=abc; Path=/; HttpOnly; SameSite=Lax" },
    { '{ name = "id", value = "v", path = "/app", domain = "example.com", max_age = 60, secure = true, http_only = false, same_site = "Strict" }',
      "id=v; Path=/app; Domain=example.com; Max-Age=60; Secure; SameSite=Strict" },
    { '{ name = "id", value = "", expires = 0 }', "id=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Lax" },
    { '{ name = "id", value = "\\"quoted\\"", same_site = false, path = false }', 'id="quoted"; HttpOnly' },
    { '{ name = "__Host-s", value = "1", secure = true }', "__Host-s=1; Path=/; Secure; HttpOnly; SameSite=Lax" },
    { '{ name = "__Secure-s", value = "1", secure = true, domain = "a.b" }', "__Secure-s=1; Path=/; Domain=a.b; Secure; HttpOnly; SameSite=Lax" },
    { '{ name = "n", value = "1", same_site = "None", secure = true }', "n=1; Path=/; Secure; HttpOnly; SameSite=None" },
    { '{ name = "bad name", value = "1" }', nil, "name must be a token" },
    { '{ name = "a;b", value = "1" }', nil, "name must be a token" },
    { '{ name = "", value = "1" }', nil, "name must be a token" },
    { '{ name = "n", value = "a;b" }', nil, "value has characters" },
    { '{ name = "n", value = "a b" }', nil, "value has characters" },
    { '{ name = "n", value = "a\\r\\nX: y" }', nil, "value has characters" },
    { '{ name = "n", value = "a,b" }', nil, "value has characters" },
    { '{ name = "n", value = "1", path = "/a;b" }', nil, "path must" },
    { '{ name = "n", value = "1", path = "relative" }', nil, "path must" },
    { '{ name = "n", value = "1", domain = "a.com;x" }', nil, "domain must" },
    { '{ name = "n", value = "1", max_age = 1.5 }', nil, "max_age must" },
    { '{ name = "n", value = "1", same_site = "Sometimes" }', nil, "same_site must" },
    { '{ name = "n", value = "1", same_site = "None" }', nil, "requires secure" },
    { '{ name = "__Secure-x", value = "1" }', nil, "__Secure- cookie requires secure" },
    { '{ name = "__Host-x", value = "1" }', nil, "__Host- cookie requires" },
    { '{ name = "__Host-x", value = "1", secure = true, path = "/app" }', nil, "__Host- cookie requires" },
    { '{ name = "__host-x", value = "1", secure = true, domain = "a.com" }', nil, "__Host- cookie requires" },
    { '{ name = "n", value = ("x"):rep(5000) }', nil, "exceed 4096" },
  }
  for _, row in ipairs(rows) do
    it(row[3] and ("raises: " .. row[1]) or row[1], function()
      local header, body = set(row[1])
      if row[3] then
        assert.is_nil(header)
        assert.matches("raised: ", body, 1, true)
        assert.matches(row[3], body, 1, true)
      else
        assert.equal("ok", body)
        assert.equal(row[2], header)
      end
    end)
  end
  it("several cookies go out as several Set-Cookie lines", function()
    local c = srv:connect()
    c:send("GET /twocookies HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
    local r = c:read_response()
    c:close()
    local lines = {}
    for _, h in ipairs(r.raw_headers) do
      if h:lower():find("^set%-cookie:") then lines[#lines + 1] = h end
    end
    assert.same({ "Set-Cookie: a=1; Path=/; HttpOnly; SameSite=Lax", "Set-Cookie: b=2; Path=/; SameSite=Lax" }, lines)
  end)
end)

describe("req:form and req:args", function()
  it("decodes a urlencoded body with first values and lists", function()
    local r = post("/form", "application/x-www-form-urlencoded", "a=1&b=x+y%21&a=2&c&=e")
    assert.equal(200, r.status)
    local v = cjson.decode(r.body)
    assert.same({ a = "1", b = "x y!", c = "", [""] = "e" }, v.first)
    assert.same({ a = { "1", "2" }, b = { "x y!" }, c = { "" }, [""] = { "e" } }, v.lists)
  end)
  for _, row in ipairs({ { "bad escape", "a=%zz" }, { "short escape", "a=%4" }, { "escape at the end", "a=1&b=%" },
                         { "bad escape in a name", "%g1=2" } }) do
    it("malformed form (" .. row[1] .. ") is nil, err: a 400", function()
      local r = post("/form", "application/x-www-form-urlencoded", row[2])
      assert.equal(400, r.status)
      assert.equal("malformed form", cjson.decode(r.body).error)
    end)
  end
  for _, ctype in ipairs({ "text/plain", ";", "", " ; x" }) do
    it("a body that is not a form is nil, err (Content-Type: " .. ctype .. ")", function()
      local r = post("/form", ctype, "a=1")
      assert.equal(400, r.status)
      assert.equal("not a form", cjson.decode(r.body).error)
    end)
  end
  it("reads the same form and body again (middleware may read it before the handler)", function()
    local r = post("/form_twice", "application/x-www-form-urlencoded", "a=1&b=2")
    assert.equal(200, r.status)
    local v = cjson.decode(r.body)
    assert.same({ a = "1", b = "2" }, v.first)
    assert.same({ a = "1", b = "2" }, v.again)
    assert.equal("a=1&b=2", v.body)
  end)
  it("the form is bounded by max_body_bytes", function()
    local r = post("/form", "application/x-www-form-urlencoded", "a=" .. string.rep("x", 70000))
    assert.is_true(r.status == 413 or r.status == 400)
  end)
  it("req:args{ multi = true } gives every value of a repeated key", function()
    local v = cjson.decode(srv:get("/args?a=1&a=2&b=%41&a=3").body)
    assert.same({ a = "1", b = "A" }, v.first)
    assert.equal("1", v.a)
    assert.same({ a = { "1", "2", "3" }, b = { "A" } }, v.lists)
  end)
  it("req:args{ multi = true } is nil, err on a bad escape (req:args stays lenient)", function()
    local v = cjson.decode(srv:get("/args?a=%4").body)
    assert.equal("malformed query", v.err)
    assert.equal("%4", v.a)
  end)
end)

describe("req:multipart", function()
  local B = "XyZ"
  local function mp(body, boundary)
    return post("/upload", 'multipart/form-data; boundary="' .. (boundary or B) .. '"', body)
  end
  local ok_body = "preamble\r\n--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n"
    .. "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a \\\"q\\\".txt\"\r\n"
    .. "Content-Type: text/plain\r\nX-Extra:  v \r\n\r\nline1\r\n-XyZ --XyZ\r\n\r\r\n--XyZ--\r\nepilogue"
  it("streams parts with names, filenames, types and headers", function()
    local r = mp(ok_body)
    assert.equal(200, r.status)
    assert.same({
      { name = "title", filename = cjson.null, type = cjson.null, body = "hello", x = cjson.null },
      { name = "file", filename = 'a "q".txt', type = "text/plain", body = "line1\r\n-XyZ --XyZ\r\n\r", x = "v" },
    }, cjson.decode(r.body))
  end)
  it("the first delimiter may open the body; transport padding after a delimiter", function()
    local r = mp("--XyZ \t\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--XyZ--")
    assert.equal(200, r.status)
    assert.equal("a", cjson.decode(r.body)[1].name)
    assert.equal("1", cjson.decode(r.body)[1].body)
  end)
  it("a part left unread is skipped by the next iteration", function()
    local r = post("/upload_skip", "multipart/form-data; boundary=XyZ", ok_body)
    assert.equal("title:he,file:li", r.body)
  end)
  local many = {}
  for i = 1, 6 do many[#many + 1] = "--XyZ\r\nContent-Disposition: form-data; name=p" .. i .. "\r\n\r\nx\r\n" end
  -- { name, body, expected error }
  local bad = {
    { "no close delimiter", "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nabc", "truncated multipart body" },
    { "no delimiter at all", "just some bytes", "truncated multipart body" },
    { "ends inside part headers", "--XyZ\r\nContent-Disp", "truncated multipart body" },
    { "ends after a delimiter", "--XyZ", "truncated multipart body" },
    { "a delimiter inside data (RFC 2046 forbids it)", "--XyZ\r\nA: b\r\n\r\nx\r\n--XyZnot\r\n--XyZ--", "malformed multipart body" },
    { "garbage after a delimiter", "--XyZjunk\r\n\r\n\r\n--XyZ--", "malformed multipart body" },
    { "header without a colon", "--XyZ\r\nnonsense\r\n\r\nx\r\n--XyZ--", "malformed multipart body" },
    { "folded header line", "--XyZ\r\nA: b\r\n  c\r\n\r\nx\r\n--XyZ--", "malformed multipart body" },
    { "bare LF in headers", "--XyZ\nA: b\n\nx\r\n--XyZ--", "malformed multipart body" },
    { "space before the colon", "--XyZ\r\nA : b\r\n\r\nx\r\n--XyZ--", "malformed multipart body" },
    { "huge part header", "--XyZ\r\nX: " .. string.rep("h", 5000) .. "\r\n\r\nx\r\n--XyZ--", "part headers too large" },
    { "many small part headers", "--XyZ\r\n" .. string.rep("X: y\r\n", 300) .. "\r\nx\r\n--XyZ--", "part headers too large" },
    { "too many parts", table.concat(many) .. "--XyZ--", "too many parts" },
  }
  for _, row in ipairs(bad) do
    it("malformed: " .. row[1] .. " -> 400 " .. row[3], function()
      local r = mp(row[2])
      assert.equal(400, r.status)
      assert.equal(row[3], cjson.decode(r.body).error)
    end)
  end
  for _, row in ipairs({
    { "not multipart", "text/plain", "not multipart/form-data" },
    { "only a semicolon", ";", "not multipart/form-data" },
    { "empty", "", "not multipart/form-data" },
    { "no boundary", "multipart/form-data", "no multipart boundary" },
    { "empty boundary", "multipart/form-data; boundary=\"\"", "bad multipart boundary" },
    { "boundary over 70 bytes", "multipart/form-data; boundary=" .. string.rep("b", 71), "bad multipart boundary" },
  }) do
    it("bad Content-Type: " .. row[1], function()
      local r = post("/upload", row[2], "--x--")
      assert.equal(400, r.status)
      assert.equal(row[3], cjson.decode(r.body).error)
    end)
  end
  it("the server keeps serving after hostile bodies", function()
    assert.equal(200, mp(ok_body).status)
  end)
end)
