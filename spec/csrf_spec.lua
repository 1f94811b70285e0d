-- moonhttp.csrf through the real binary, with the headers browsers send.
local H = require "helper"

local function app(token)
  return string.format([[
local http = require "moonhttp"
local session = require "moonhttp.session"
local csrf = require "moonhttp.csrf"
http.use(session.middleware{ secret = string.rep("s", 32) })
http.use(csrf.middleware{
  trusted_origins = { "https://admin.example.com" },
  exempt = { "POST /hooks/", "/ping" },
  token = %s,
})
http.handle("GET /form", function(req, res) res:write(assert(csrf.token(req))) end)
http.handle("/submit", function(req, res)
  local form = req:form()
  res:write("ok ", form and form.x or "-")
end)
http.handle("POST /hooks/{name}", function(req, res) res:write("hook ", req:pathvalue("name")) end)
http.handle("/ping", function(req, res) res:write("pong") end)
]], tostring(token))
end

-- One request with its own Host line (helper's request always says localhost).
local function send(srv, method, path, headers, body)
  local c = H.connect(srv.port)
  local lines = { method .. " " .. path .. " HTTP/1.1" }
  local has_host = false
  for k, v in pairs(headers or {}) do
    lines[#lines + 1] = k .. ": " .. v
    if k:lower() == "host" then has_host = true end
  end
  if not has_host then lines[#lines + 1] = "Host: localhost" end
  lines[#lines + 1] = "Content-Length: " .. #(body or "")
  lines[#lines + 1] = "Connection: close"
  assert(c:send(table.concat(lines, "\r\n") .. "\r\n\r\n" .. (body or "")))
  local res = assert(c:read_response({ head = method == "HEAD" }))
  c:close()
  return res
end

local REFUSED = "cross-origin request refused\n"

-- method, path, headers, status, body (nil: not checked)
local ROWS = {
  { "POST", "/submit", { ["Sec-Fetch-Site"] = "same-origin" }, 200, "ok -" },
  { "POST", "/submit", { ["Sec-Fetch-Site"] = "none" }, 200 },
  { "POST", "/submit", { ["Sec-Fetch-Site"] = "cross-site" }, 403, REFUSED },
  { "POST", "/submit", { ["Sec-Fetch-Site"] = "same-site" }, 403, REFUSED },
  -- Sec-Fetch-Site decides when present: a matching Origin does not overrule it
  { "POST", "/submit", { ["Sec-Fetch-Site"] = "cross-site", Origin = "http://localhost" }, 403, REFUSED },
  { "PUT", "/submit", { ["Sec-Fetch-Site"] = "cross-site" }, 403, REFUSED },
  { "DELETE", "/submit", { ["Sec-Fetch-Site"] = "cross-site" }, 403, REFUSED },
  { "PATCH", "/submit", { ["Sec-Fetch-Site"] = "cross-site" }, 403, REFUSED },
  -- older browsers: Origin against Host, scheme not compared, port compared
  { "POST", "/submit", { Origin = "https://evil.example" }, 403, REFUSED },
  { "POST", "/submit", { Origin = "null" }, 403, REFUSED },
  { "POST", "/submit", { Origin = "http://localhost" }, 200, "ok -" },
  { "POST", "/submit", { Origin = "https://LocalHost" }, 200 },
  { "POST", "/submit", { Origin = "http://localhost:8080" }, 403, REFUSED },
  { "POST", "/submit", { Host = "app.example:8080", Origin = "http://app.example:8080" }, 200 },
  { "POST", "/submit", { Host = "app.example:8080", Origin = "http://app.example" }, 403, REFUSED },
  -- trusted origins, with either header
  { "POST", "/submit", { ["Sec-Fetch-Site"] = "cross-site", Origin = "https://admin.example.com" }, 200 },
  { "POST", "/submit", { Origin = "https://admin.example.com" }, 200 },
  { "POST", "/submit", { ["Sec-Fetch-Site"] = "cross-site", Origin = "https://admin.example.com:444" }, 403 },
  -- safe methods always pass
  { "GET", "/submit", { ["Sec-Fetch-Site"] = "cross-site", Origin = "https://evil.example" }, 200, "ok -" },
  { "HEAD", "/submit", { ["Sec-Fetch-Site"] = "cross-site" }, 200 },
  { "OPTIONS", "/submit", { ["Sec-Fetch-Site"] = "cross-site" }, 200 },
  -- exempt: "POST /hooks/" is a POST-only subtree, "/ping" one path for every method
  { "POST", "/hooks/github", { ["Sec-Fetch-Site"] = "cross-site" }, 200, "hook github" },
  { "POST", "/ping", { ["Sec-Fetch-Site"] = "cross-site" }, 200, "pong" },
  { "PUT", "/ping", { Origin = "https://evil.example" }, 200, "pong" },
  { "PUT", "/ping/x", { ["Sec-Fetch-Site"] = "cross-site" }, 403, REFUSED },
  { "POST", "/hooksx", { ["Sec-Fetch-Site"] = "cross-site" }, 403, REFUSED },
}

describe("moonhttp.csrf: the cross-origin check", function()
  local srv
  setup(function() srv = H.start(app(false)) end)
  teardown(function() srv:stop() end)

  for i, row in ipairs(ROWS) do
    local method, path, headers, status, body = table.unpack(row)
    local label = {}
    for k, v in pairs(headers) do label[#label + 1] = k .. ": " .. v end
    table.sort(label)
    it(string.format("#%d %s %s [%s] -> %d", i, method, path, table.concat(label, ", "), status), function()
      local r = send(srv, method, path, headers, method == "POST" and "x" or nil)
      assert.equal(status, r.status)
      if body then assert.equal(body, r.body) end
    end)
  end

  it("a request with neither header passes (curl, another server)", function()
    local r = send(srv, "POST", "/submit", { ["Content-Type"] = "application/x-www-form-urlencoded" }, "x=1")
    assert.equal(200, r.status)
    assert.equal("ok 1", r.body)
  end)
end)

local function cookie_of(r) return r.headers["set-cookie"]:match("^(session=[^;]*)") end
local FORM = "application/x-www-form-urlencoded"

describe("moonhttp.csrf: token mode", function()
  local srv
  setup(function() srv = H.start(app(true)) end)
  teardown(function() srv:stop() end)

  local function new_token()
    local r = send(srv, "GET", "/form")
    assert.equal(200, r.status)
    assert.matches("^[%w_%-]+$", r.body)
    assert.equal(43, #r.body) -- base64url of 32 bytes
    return r.body, cookie_of(r)
  end

  it("refuses a request with neither header and no token", function()
    local r = send(srv, "POST", "/submit", { ["Content-Type"] = FORM }, "x=1")
    assert.equal(403, r.status)
    assert.equal("missing or invalid CSRF token\n", r.body)
  end)

  it("takes the session's token from the _csrf field; the handler still reads the form", function()
    local token, cookie = new_token()
    local r = send(srv, "POST", "/submit", { Cookie = cookie, ["Content-Type"] = FORM }, "_csrf=" .. token .. "&x=1")
    assert.equal(200, r.status)
    assert.equal("ok 1", r.body)
  end)

  it("takes the token from X-CSRF-Token", function()
    local token, cookie = new_token()
    local r = send(srv, "POST", "/submit", { Cookie = cookie, ["X-CSRF-Token"] = token })
    assert.equal(200, r.status)
    -- the same session keeps its token
    assert.equal(token, send(srv, "GET", "/form", { Cookie = cookie }).body)
  end)

  it("refuses a wrong token, another session's token and a token without its session", function()
    local token, cookie = new_token()
    local other = new_token()
    assert.not_equal(token, other)
    local flipped = (token:sub(1, 1) == "A" and "B" or "A") .. token:sub(2)
    for _, case in ipairs({
      { { Cookie = cookie, ["X-CSRF-Token"] = flipped } },
      { { Cookie = cookie, ["X-CSRF-Token"] = token .. "x" } },
      { { Cookie = cookie, ["X-CSRF-Token"] = "" } },
      { { Cookie = cookie, ["X-CSRF-Token"] = other } },
      { { Cookie = cookie, ["Content-Type"] = FORM }, "_csrf=" .. other },
      { { Cookie = cookie, ["Content-Type"] = FORM }, "_csrf=%zz" },
      { { ["X-CSRF-Token"] = token } },
    }) do
      local r = send(srv, "POST", "/submit", case[1], case[2])
      assert.equal(403, r.status)
      assert.equal("missing or invalid CSRF token\n", r.body)
    end
  end)

  it("a browser's headers still decide: same-origin passes, cross-site is refused even with the token", function()
    assert.equal(200, send(srv, "POST", "/submit", { ["Sec-Fetch-Site"] = "same-origin" }).status)
    local token, cookie = new_token()
    local r = send(srv, "POST", "/submit", { Cookie = cookie, ["X-CSRF-Token"] = token, ["Sec-Fetch-Site"] = "cross-site" })
    assert.equal(403, r.status)
    assert.equal(REFUSED, r.body)
  end)

  it("an exempt route needs no token", function()
    assert.equal("hook x", send(srv, "POST", "/hooks/x").body)
  end)
end)

describe("moonhttp.csrf: misuse is an error", function()
  for _, case in ipairs({
    { "csrf.middleware{ tokne = true }", 'unknown option "tokne" %(did you mean "token"%?%)' },
    { "csrf.middleware{ trusted_origins = { \"https://a.example/path\" } }", 'trusted origin "https://a.example/path" is not scheme://host%[:port%]' },
    { "csrf.middleware{ trusted_origins = \"https://a.example\" }", "trusted_origins must be a list" },
    { "csrf.middleware{ exempt = { \"hooks\" } }", 'exempt entry "hooks" is not' },
    { "csrf.middleware{ token = 1 }", "token must be true or false" },
  }) do
    it(case[1], function()
      local code, out = H.run({ "--check", H.script(
        'local http = require "moonhttp"\nlocal csrf = require "moonhttp.csrf"\nhttp.use(' .. case[1] .. ")\n") })
      assert.not_equal(0, code)
      assert.matches(case[2], out)
    end)
  end

  it("token mode without the session middleware says so at the first request", function()
    local srv = H.start([[
local http = require "moonhttp"
local csrf = require "moonhttp.csrf"
http.use(csrf.middleware{ token = true })
http.handle("GET /", function(req, res) res:write("never") end)
]])
    finally(function() srv:stop() end)
    local r = send(srv, "GET", "/")
    assert.equal(500, r.status)
    assert.matches("put http.use%(session.middleware", srv:logtext())
  end)
end)
