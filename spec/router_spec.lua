-- The router end to end, over HTTP: Go 1.22 ServeMux semantics as a table of
-- request → expected status and body (the matching pattern), Location, Allow.
-- The C unit tests (tests/unit/test_router.c) cover parsing and conflicts in depth.
local H = require "helper"

-- { method, target, status, body-or-location-or-allow, host = optional }
local cases = {
  { "GET", "/", 200, "/" },
  { "GET", "/anything/else", 200, "/" },
  { "GET", "/index.html", 200, "/index.html" },
  { "GET", "/static/", 200, "GET /static/" },
  { "GET", "/static/css/site.css", 200, "GET /static/" },
  { "HEAD", "/static/x", 200, "" },
  { "POST", "/static/x", 200, "/" },
  { "POST", "/exact/", 200, "/" },
  { "GET", "/static", 307, "/static/" },
  { "GET", "/api/users", 200, "/api/users" },
  { "POST", "/api/users", 200, "POST /api/users" },
  { "GET", "/api/users/", 200, "/api/users/" },
  { "GET", "/api/users/42", 200, "GET /api/users/{id} id=42" },
  { "HEAD", "/api/users/42", 200, "" },
  { "DELETE", "/api/users/42", 200, "DELETE /api/users/{id} id=42" },
  { "PUT", "/api/users/42", 200, "/api/users/" },
  { "GET", "/api/users/42/more", 200, "/api/users/" },
  { "GET", "/api/items/7/details", 200, "/api/items/{id}/details id=7" },
  { "GET", "/api/items/7", 200, "/" },
  { "GET", "/files/", 200, "/files/{rest...} rest=" },
  { "GET", "/files/a/b/c.txt", 200, "/files/{rest...} rest=a/b/c.txt" },
  { "GET", "/files", 307, "/files/" },
  { "GET", "/exact/", 200, "GET /exact/{$}" },
  { "GET", "/exact/more", 200, "/" },
  { "GET", "/exact", 307, "/exact/" },
  { "GET", "/a/1/b/2", 200, "/a/{a}/b/{b} a=1 b=2" },
  { "GET", "/a/1/b", 200, "/" },
  { "GET", "/", 200, "GET example.com/", host = "example.com" },
  { "GET", "/", 200, "GET example.com/", host = "example.com:8080" },
  { "GET", "/", 200, "GET example.com/", host = "EXAMPLE.com" },
  { "GET", "/api/users", 200, "GET example.com/api/users", host = "example.com" },
  { "GET", "/api/users/9", 200, "GET example.com/", host = "example.com" },
  { "POST", "/api/users", 200, "POST /api/users", host = "example.com" },
  { "DELETE", "/api/users/9", 200, "DELETE /api/users/{id} id=9", host = "example.com" },
  { "GET", "/api/users", 200, "/api/users", host = "other.com" },
  { "GET", "/dir", 307, "/dir/" },
  { "GET", "/dir/x", 200, "/dir/" },
  { "PUT", "/only-put", 200, "PUT /only-put" },
  { "GET", "/only-put", 200, "/" },
  { "GET", "/only-get", 200, "GET /only-get" },
  { "HEAD", "/only-get", 200, "" },
  { "POST", "/only-get", 200, "/" },
  { "GET", "/encoded/a%20b", 200, "/encoded/{name} name=a b" },
  { "GET", "/encoded/a%2Fb", 200, "/encoded/{name} name=a/b" },
  { "GET", "/encoded/caf%C3%A9", 200, "/encoded/{name} name=café" },
  { "GET", "/%61pi/users", 200, "/api/users" },
  { "GET", "/posts/latest", 200, "GET /posts/latest" },
  { "POST", "/posts/latest", 200, "POST /posts/{id} id=latest" },
  { "GET", "/posts/5", 200, "/" },
  { "GET", "/api//users", 307, "/api/users" },
  { "GET", "/api/./users", 307, "/api/users" },
  { "GET", "/api/items/../users", 307, "/api/users" },
  { "GET", "/api/items/../users?x=1&y=2", 307, "/api/users?x=1&y=2" },
  { "GET", "/../../etc/passwd", 307, "/etc/passwd" },
  { "GET", "/v2/users/5", 200, "GET /v2/users/{id} id=5", group = "v2" },
  { "GET", "/v2/admin/stats", 200, "GET /v2/admin/stats", group = "v2", inner = true },
  { "GET", "/v2/nothing", 200, "/" },
}

describe("router over HTTP", function()
  local srv
  setup(function() srv = H.start("spec/apps/routes.lua") end)
  teardown(function() srv:stop() end)

  for _, case in ipairs(cases) do
    local method, target, status, want = case[1], case[2], case[3], case[4]
    local name = string.format("%s %s%s -> %d %s", method, case.host and ("//" .. case.host) or "",
      target, status, want)
    it(name, function()
      local c = srv:connect()
      assert(c:send(string.format("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
        method, target, case.host or "localhost")))
      local res = assert(c:read_response({ head = method == "HEAD" }))
      c:close()
      assert.equal(status, res.status)
      if status == 200 then
        assert.equal(want, res.body)
        assert.equal("1", res.headers["x-root"], "root middleware applies to every route")
        assert.equal(case.group, res.headers["x-group"])
        assert.equal(case.inner and "yes" or nil, res.headers["x-inner"])
      elseif status == 307 then
        assert.equal(want, res.headers["location"])
      elseif status == 405 then
        assert.equal(want, res.headers["allow"])
      end
    end)
  end
end)

describe("router options", function()
  it("routes the cleaned path directly with clean_path = rewrite", function()
    local srv = H.start("spec/apps/routes.lua", { flags = { "--clean-path", "rewrite" } })
    local res = assert(srv:get("/api/items/../users/7"))
    assert.equal(200, res.status)
    assert.equal("GET /api/users/{id} id=7", res.body)
    srv:stop()
  end)

  it("uses custom 404 and 405 handlers and 301 redirects when set", function()
    local srv = H.start("spec/apps/routes_custom.lua")
    local res = assert(srv:get("/missing"))
    assert.equal(404, res.status)
    assert.equal("application/json", res.headers["content-type"])
    assert.truthy(res.body:find('"path":"\\/missing"', 1, true) or res.body:find('"path":"/missing"', 1, true))
    res = assert(srv:request("DELETE", "/thing"))
    assert.equal(405, res.status)
    assert.equal("GET, HEAD, POST", res.headers["allow"])
    assert.equal("use one of: GET, HEAD, POST", res.body)
    res = assert(srv:get("/sub"))
    assert.equal(301, res.status)
    assert.equal("/sub/", res.headers["location"])
    srv:stop()
  end)

  it("reports conflicting patterns with both registration sites and an example path", function()
    local path = H.script([[
local http = require "moonhttp"
http.handle("GET /users/{id}", function() end)
http.handle("GET /{kind}/7", function() end)
]])
    local code, out = H.run({ "--check", path })
    assert.equal(1, code)
    assert.truthy(out:find("/users/{id}", 1, true), out)
    assert.truthy(out:find("/{kind}/7", 1, true), out)
    assert.truthy(out:find(":2", 1, true) and out:find(":3", 1, true), out)
    assert.truthy(out:find("/users/7", 1, true), out)
  end)

  it("rejects registration after startup", function()
    local srv = H.start([[
local http = require "moonhttp"
http.handle("GET /late", function(req, res)
  local ok, err = pcall(http.handle, "GET /later", function() end)
  res:write(tostring(err))
end)
]])
    local res = assert(srv:get("/late"))
    assert.truthy(res.body:find("fixed once the server has started", 1, true), res.body)
    srv:stop()
  end)
end)

describe("405 and Allow", function()
  local srv
  setup(function() srv = H.start("spec/apps/routes405.lua") end)
  teardown(function() srv:stop() end)
  local cases405 = {
    { "DELETE", "/r/1", 405, "GET, HEAD, POST" },
    { "PATCH", "/r/special", 405, "GET, HEAD, POST, PUT" },
    { "PUT", "/r/special", 200, "PUT /r/special" },
    { "POST", "/tree/a/b", 405, "GET, HEAD" },
    { "GET", "/tree/x", 200, "GET /tree/" },
    { "PUT", "/tree/x", 405, "DELETE, GET, HEAD" },
    { "GET", "/nothing", 404, "404 page not found\n" },
    { "OPTIONS", "/r/1", 405, "GET, HEAD, POST" },
  }
  for _, case in ipairs(cases405) do
    it(table.concat(case, " ", 1, 3), function()
      local res = assert(srv:request(case[1], case[2]))
      assert.equal(case[3], res.status)
      if case[3] == 405 then
        assert.equal(case[4], res.headers["allow"])
      else
        assert.equal(case[4], res.body)
      end
    end)
  end
end)
