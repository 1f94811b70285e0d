-- Response compression through the real binary: gzip for Lua responses and
-- static files, decompressed here and compared; every case that must stay
-- uncompressed, as rows.
local H = require "helper"

-- Decompresses with gzip(1), so the check does not trust our own zlib use.
local function gunzip(data)
  local f = H.tmpname(".gz")
  H.write_file(f, data)
  local p = io.popen("gzip -dc < " .. f .. " 2>/dev/null; echo \"rc=$?\"")
  local out = p:read("a")
  p:close()
  os.remove(f)
  local body, rc = out:match("^(.*)rc=(%d+)\n$")
  assert.are.equal("0", rc, "gzip -d failed")
  return body
end

local function json_blob(n)
  local parts = {}
  for i = 1, n do
    parts[i] = string.format('{"id":%d,"name":"user %d","email":"user%d@example.com","active":true}', i, i, i)
  end
  return "[" .. table.concat(parts, ",") .. "]"
end

local JSON = json_blob(260) -- about 20 KiB

local APP = [[
local http = require "moonhttp"
http.server{ compress = { types = { "text/*", "application/json", "application/javascript",
  "image/svg+xml" }, min_bytes = 1024, level = 1 } }
local big = ]] .. string.format("%q", JSON) .. [[

local text = string.rep("moonhttp compresses this line.\n", 100)
http.handle("GET /json", function(req, res)
  res:header("Content-Type", "application/json")
  res:write(big)
end)
http.handle("GET /stream", function(req, res)
  res:header("Content-Type", "text/plain")
  for i = 1, 5 do
    res:write(text)
    http.sleep(0.01)
  end
end)
http.handle("GET /small", function(req, res)
  res:header("Content-Type", "text/plain")
  res:write("short")
end)
http.handle("GET /png", function(req, res)
  res:header("Content-Type", "image/png")
  res:write(text)
end)
http.handle("GET /svg", function(req, res)
  res:header("Content-Type", "image/svg+xml")
  res:write(text)
end)
http.handle("GET /encoded", function(req, res)
  res:header("Content-Type", "text/plain")
  res:header("Content-Encoding", "br")
  res:write(text)
end)
http.handle("GET /notransform", function(req, res)
  res:header("Content-Type", "text/plain")
  res:header("Cache-Control", "no-transform")
  res:write(text)
end)
http.handle("GET /status/{code}", function(req, res)
  local code = tonumber(req:pathvalue("code"))
  res:header("Content-Type", "text/plain")
  res:status(code)
  if code == 206 then res:header("Content-Range", "bytes 0-3099/3100") end
  if code ~= 204 and code ~= 304 then res:write(text) end
end)
http.handle("GET /static/", http.files("public"))
]]

describe("response compression", function()
  local dir, srv
  setup(function()
    dir = H.tmpname("-gz")
    os.execute("mkdir -p " .. dir .. "/public")
    H.write_file(dir .. "/public/style.css", string.rep("body { color: #333; margin: 0 }\n", 100))
    H.write_file(dir .. "/public/tiny.css", "a{}\n")
    H.write_file(dir .. "/app.lua", APP)
    srv = H.start(dir .. "/app.lua")
  end)
  teardown(function()
    if srv then srv:stop() end
    os.execute("rm -rf " .. dir)
  end)

  it("gzips a Lua JSON response and it decompresses to the original", function()
    local r = srv:get("/json", { ["Accept-Encoding"] = "gzip, deflate, br" })
    assert.are.equal(200, r.status)
    assert.are.equal("gzip", r.headers["content-encoding"])
    assert.are.equal("Accept-Encoding", r.headers["vary"])
    assert.truthy(#r.body < #JSON / 3)
    assert.are.equal("\31\139", r.body:sub(1, 2))
    assert.is_true(gunzip(r.body) == JSON)
  end)

  it("streams: a handler writing over time gets one gzip stream", function()
    local r = srv:get("/stream", { ["Accept-Encoding"] = "gzip" })
    assert.are.equal("gzip", r.headers["content-encoding"])
    assert.is_nil(r.headers["content-length"])
    assert.are.equal(string.rep(string.rep("moonhttp compresses this line.\n", 100), 5), gunzip(r.body))
  end)

  it("gzips a static file that has no precompressed sibling", function()
    local want = H.read_file(dir .. "/public/style.css")
    local r = srv:get("/static/style.css", { ["Accept-Encoding"] = "gzip" })
    assert.are.equal("gzip", r.headers["content-encoding"])
    assert.are.equal("Accept-Encoding", r.headers["vary"])
    assert.is_true(gunzip(r.body) == want)
    -- a range of it is sent as it is
    r = srv:get("/static/style.css", { ["Accept-Encoding"] = "gzip", Range = "bytes=0-9" })
    assert.are.equal(206, r.status)
    assert.is_nil(r.headers["content-encoding"])
    assert.are.equal(want:sub(1, 10), r.body)
  end)

  -- { name, path, request headers, Vary expected }: the body must come back as it was sent
  local untouched = {
    { "no Accept-Encoding", "/json", {}, true },
    { "gzip;q=0", "/json", { ["Accept-Encoding"] = "gzip;q=0" }, true },
    { "identity only", "/json", { ["Accept-Encoding"] = "identity" }, true },
    { "*;q=0", "/json", { ["Accept-Encoding"] = "*;q=0" }, true },
    { "deflate only", "/json", { ["Accept-Encoding"] = "deflate" }, true },
    { "below min_bytes", "/small", { ["Accept-Encoding"] = "gzip" }, false },
    { "static below min_bytes", "/static/tiny.css", { ["Accept-Encoding"] = "gzip" }, false },
    { "type not listed", "/png", { ["Accept-Encoding"] = "gzip" }, false },
    { "already encoded", "/encoded", { ["Accept-Encoding"] = "gzip" }, false },
    { "Cache-Control: no-transform", "/notransform", { ["Accept-Encoding"] = "gzip" }, false },
    { "206 from Lua", "/status/206", { ["Accept-Encoding"] = "gzip" }, false },
  }
  for _, row in ipairs(untouched) do
    it("leaves the body alone: " .. row[1], function()
      local r = srv:get(row[2], row[3])
      local ce = r.headers["content-encoding"]
      if row[2] == "/encoded" then assert.are.equal("br", ce) else assert.is_nil(ce) end
      assert.are.equal(row[4] and "Accept-Encoding" or nil, r.headers["vary"])
      if row[2] == "/json" then assert.is_true(r.body == JSON) end
    end)
  end

  it("honours q-values: gzip wins when it is acceptable at all", function()
    local r = srv:get("/json", { ["Accept-Encoding"] = "br;q=1, gzip;q=0.1" })
    assert.are.equal("gzip", r.headers["content-encoding"])
    r = srv:get("/svg", { ["Accept-Encoding"] = "*" })
    assert.are.equal("gzip", r.headers["content-encoding"])
  end)

  it("never compresses HEAD, 204 or 304", function()
    local r = srv:request("HEAD", "/json", { ["Accept-Encoding"] = "gzip" })
    assert.are.equal(200, r.status)
    assert.is_nil(r.headers["content-encoding"])
    for _, code in ipairs({ 204, 304 }) do
      r = srv:get("/status/" .. code, { ["Accept-Encoding"] = "gzip" })
      assert.are.equal(code, r.status)
      assert.is_nil(r.headers["content-encoding"])
      assert.are.equal("", r.body)
    end
    r = srv:get("/status/404", { ["Accept-Encoding"] = "gzip" })
    assert.are.equal("gzip", r.headers["content-encoding"])
  end)

  it("keeps a keep-alive connection in step across compressed responses", function()
    local c = srv:connect()
    for _ = 1, 3 do
      assert(c:send("GET /json HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n\r\n"
        .. "GET /small HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip\r\n\r\n"))
      local r = c:read_response()
      assert.is_true(gunzip(r.body) == JSON)
      assert.are.equal("short", c:read_response().body)
    end
    c:close()
  end)
end)

describe("response compression settings", function()
  local PLAIN_APP = [[
local http = require "moonhttp"
http.handle("GET /t", function(req, res)
  res:header("Content-Type", "text/plain")
  res:write(string.rep("x", 5000))
end)
]]

  it("is off unless asked for", function()
    local srv = H.start(PLAIN_APP)
    local r = srv:get("/t", { ["Accept-Encoding"] = "gzip" })
    local r2 = H.request(srv.port, "GET", "/t", { ["Accept-Encoding"] = "gzip" })
    srv:stop()
    assert.is_nil(r.headers["content-encoding"])
    assert.is_nil(r2.headers["vary"])
  end)

  it("is turned on from the command line", function()
    local srv = H.start(PLAIN_APP, { flags = { "--compress", "6" } })
    local r = srv:get("/t", { ["Accept-Encoding"] = "gzip" })
    srv:stop()
    assert.are.equal("gzip", r.headers["content-encoding"])
    assert.are.equal(string.rep("x", 5000), gunzip(r.body))
  end)

  it("rejects bad settings when the script loads", function()
    local cases = {
      { "compress = { level = 0 }", "level" },
      { "compress = { level = 10 }", "level" },
      { "compress = { min_bytes = -1 }", "min_bytes" },
      { 'compress = { types = { "json" } }', "types[1]" },
      { 'compress = { types = "text/*" }', "types" },
      { "compress = { speed = 1 }", "speed" },
      { 'compress = "yes"', "compress" },
    }
    for _, c in ipairs(cases) do
      local script = H.script('local http = require "moonhttp"\nhttp.server{ ' .. c[1] .. ' }\n')
      local code, out = H.run({ "--check", script })
      assert.are_not.equal(0, code)
      assert.truthy(out:find(c[2], 1, true), out)
    end
    local code, out = H.run({ "--compress", "fast", "--check", H.script("") })
    assert.are_not.equal(0, code)
    assert.truthy(out:find("compress", 1, true), out)
  end)
end)

-- A route's own compress option replaces the server's setting for that route.
describe("per-route compression", function()
  local function app(server_setting)
    return [[
local http = require "moonhttp"
]] .. server_setting .. [[

local function text(req, res)
  res:header("Content-Type", "text/plain")
  res:write(string.rep("x", 5000))
end
local function bin(req, res)
  res:header("Content-Type", "application/octet-stream")
  res:write(string.rep("y", 5000))
end
http.handle("GET /server", text)
http.handle("GET /off", text, { compress = false })
http.handle("GET /on", text, { compress = true })
http.handle("GET /big-only", text, { compress = { min_bytes = 10000 } })
http.handle("GET /bin", bin, { compress = { types = { "application/octet-stream" }, level = 9 } })
]]
  end

  -- { server setting, path, gzipped? }
  local rows = {
    { "http.server{ compress = true }", "/server", true },
    { "http.server{ compress = true }", "/off", false },
    { "http.server{ compress = true }", "/big-only", false },
    { "", "/server", false },
    { "", "/on", true },
    { "", "/bin", true },
  }
  for _, row in ipairs(rows) do
    it(string.format("%s with %q: %s", row[2], row[1], row[3] and "gzip" or "as sent"), function()
      local srv = H.start(app(row[1]))
      local r = srv:get(row[2], { ["Accept-Encoding"] = "gzip" })
      srv:stop()
      assert.are.equal(200, r.status)
      local want = string.rep(row[2] == "/bin" and "y" or "x", 5000)
      if row[3] then
        assert.are.equal("gzip", r.headers["content-encoding"])
        assert.are.equal(want, gunzip(r.body))
      else
        assert.is_nil(r.headers["content-encoding"])
        assert.are.equal(want, r.body)
      end
    end)
  end

  it("rejects a bad route option at the user's line", function()
    local script = H.script('local http = require "moonhttp"\n'
      .. 'http.handle("GET /", function() end, { compress = { level = 12 } })\n')
    local code, out = H.run({ "--check", script })
    assert.are_not.equal(0, code)
    assert.truthy(out:find(":2: http.handle: compress.level", 1, true), out)
  end)
end)
