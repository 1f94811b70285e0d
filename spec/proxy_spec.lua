-- http.proxy (issue 37, docs/guide/proxy.md) through the real binary: a front
-- moonhttp proxies to an echo moonhttp (which answers with what it received)
-- and to spec/servers/upstream.lua (interim responses, hop-by-hop response
-- headers, a stall, resets, a slow drip). Clients are raw sockets, so the
-- exact bytes (header case, interim lines) can be checked, and curl for HTTP/2.
local H = require "helper"
local socket = require "socket"
local cjson = require "cjson"

local ECHO = [[
local http = require "moonhttp"
http.handle("/", function(req, res)
  local n, body = 0, {}
  while true do
    local piece = req:read(65536)
    if not piece then break end
    n = n + #piece
    if n <= 64 then body[#body + 1] = piece end
  end
  res:json({ method = req.method, path = req.raw_path, query = req.query, headers = req:header_list(),
    length = n, body = table.concat(body) })
end, { max_body = "50m" })
http.handle("GET /x/e/sse", function(req, res)
  res:header("Content-Type", "text/event-stream")
  res:write("data: one\n\n")
  res:flush()
  http.sleep(0.6)
  res:write("data: two\n\n")
end)
]]

local FRONT = [[
local http = require "moonhttp"
local ECHO, UP = %q, %q
http.handle("/e/", function(req, res)
  return http.proxy(req, res, ECHO .. "/x", { via = "mh", forwarded = true })
end, { max_body = "50m" })
http.handle("/trust/", function(req, res)
  return http.proxy(req, res, ECHO, { trust_forwarded = true, preserve_host = true })
end)
http.handle("/u/", function(req, res)
  return http.proxy(req, res, UP, { read_timeout = 1, via = "mh",
    request = function(up) up.path = up.path:gsub("^/u", "") end })
end)
http.handle("/refused/", function(req, res) return http.proxy(req, res, "http://127.0.0.1:1") end)
http.handle("/custom/", function(req, res)
  return http.proxy(req, res, "http://127.0.0.1:1", { on_error = function(r, status, kind, detail)
    r:json({ error = kind, detail = detail }, status)
  end })
end)
http.handle("/hooks/", function(req, res)
  return http.proxy(req, res, ECHO, {
    request = function(up, r)
      up.path = "/rewritten?from=" .. r.path
      up.method = "PUT"
      up.headers["X-Added"] = { "yes" }
    end,
    response = function(head) head.status = 203; head.headers["X-From-Hook"] = { "1" } end,
  })
end)
http.handle("/bad/", function(req, res) return http.proxy(req, res, "ftp://x", { timout = 1 }) end)
]]


-- Sends raw request bytes on a new connection; returns the raw response text (until close).
local function raw(port, bytes, timeout)
  local c = socket.tcp()
  c:settimeout(timeout or 5)
  assert(c:connect("127.0.0.1", port))
  assert(c:send(bytes))
  local data, err, partial = c:receive("*a")
  c:close()
  return data or partial, err
end

local function split(text)
  local head, body = text:match("^(.-\r\n)\r\n(.*)$")
  return head or text, body
end

-- The echo's JSON answer, with its header list turned into name → value (names as sent).
local function echoed(body)
  local e = cjson.decode(body)
  local h = {}
  for i = 1, #e.headers, 2 do h[e.headers[i]] = e.headers[i + 1] end
  e.h = h
  return e
end

local function dechunk(body)
  local out = {}
  local pos = 1
  while true do
    local size, at = body:match("^(%x+)\r\n()", pos)
    if not size or tonumber(size, 16) == 0 then break end
    out[#out + 1] = body:sub(at, at + tonumber(size, 16) - 1)
    pos = at + tonumber(size, 16) + 2
  end
  return table.concat(out)
end

describe("http.proxy", function()
  local echo, up, front
  setup(function()
    echo = H.start(ECHO)
    up = H.upstream()
    front = H.start(string.format(FRONT, "http://127.0.0.1:" .. echo.port, up.base))
  end)
  teardown(function()
    if front then front:stop() end
    if echo then echo:stop() end
    if up then up:stop() end
  end)

  it("drops hop-by-hop headers, keeps header case, sets forwarding headers and Via", function()
    local text = raw(front.port, "GET /e/path?q=1 HTTP/1.1\r\nHost: front.test\r\nX-MiXeD: a\r\n"
      .. "Connection: close, X-Drop\r\nX-Drop: 1\r\nKeep-Alive: 5\r\nTE: trailers\r\n"
      .. "Proxy-Authorization: Basic eA==\r\nX-Forwarded-For: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\n\r\n")
    local head, body = split(text)
    assert.truthy(head:match("^HTTP/1.1 200"), head)
    local e = echoed(body)
    assert.equal("/x/e/path", e.path)
    assert.equal("q=1", e.query)
    assert.equal("a", e.h["X-MiXeD"])
    for _, gone in ipairs({ "X-Drop", "Keep-Alive", "TE", "Proxy-Authorization", "Connection" }) do
      assert.is_nil(e.h[gone], gone)
    end
    assert.equal("127.0.0.1", e.h["X-Forwarded-For"])
    assert.equal("http", e.h["X-Forwarded-Proto"])
    assert.equal("front.test", e.h["X-Forwarded-Host"])
    assert.equal('for=127.0.0.1;proto=http;host="front.test"', e.h["Forwarded"])
    assert.equal("1.1 mh", e.h["Via"])
    assert.is_nil(e.h["User-Agent"]) -- the client sent none
    assert.equal("127.0.0.1:" .. echo.port, e.h["Host"] or e.h["host"])
  end)

  it("appends to the forwarding headers it is told to trust and can pass the client's Host", function()
    local r = front:get("/trust/", { ["X-Forwarded-For"] = "6.6.6.6", ["X-Forwarded-Proto"] = "https" })
    local e = echoed(r.body)
    assert.equal("6.6.6.6, 127.0.0.1", e.h["X-Forwarded-For"])
    assert.equal("https", e.h["X-Forwarded-Proto"])
    assert.equal("localhost", e.h["Host"])
  end)

  it("removes hop-by-hop response headers, keeps case and repeats, adds Via", function()
    local head, body = split(raw(front.port, "GET /u/hop HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
    assert.truthy(head:match("^HTTP/1.1 200"), head)
    assert.truthy(head:find("\r\nX-Resp-Case: Yes\r\n", 1, true), head)
    assert.truthy(head:find("\r\nSet-Cookie: a=1\r\n", 1, true) and head:find("\r\nSet-Cookie: b=2\r\n", 1, true), head)
    assert.truthy(head:find("\r\nVia: 1.1 mh\r\n", 1, true), head)
    assert.truthy(head:find("\r\nContent-Length: 2\r\n", 1, true), head)
    assert.falsy(head:lower():find("x-hop", 1, true), head)
    assert.falsy(head:lower():find("keep-alive: timeout", 1, true), head)
    assert.equal("ok", body)
  end)

  it("keeps the length of a HEAD answer", function()
    local head, body = split(raw(front.port, "HEAD /u/head HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
    assert.truthy(head:match("^HTTP/1.1 200"), head)
    assert.truthy(head:find("\r\nContent-Length: 1234\r\n", 1, true), head)
    assert.equal("", body)
  end)

  it("answers Expect: 100-continue and streams the upload", function()
    local c = socket.tcp()
    c:settimeout(5)
    assert(c:connect("127.0.0.1", front.port))
    local size = 3 * 1024 * 1024
    assert(c:send("POST /e/up HTTP/1.1\r\nHost: x\r\nContent-Length: " .. size
      .. "\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"))
    assert.equal("HTTP/1.1 100 Continue", c:receive("*l"))
    assert.equal("", c:receive("*l"))
    local piece = string.rep("u", 1024 * 1024)
    for _ = 1, 3 do assert(c:send(piece)) end
    local text = c:receive("*a")
    c:close()
    local head, body = split(text)
    assert.truthy(head:match("^HTTP/1.1 200"), head)
    local e = echoed(body)
    assert.equal(size, e.length)
    assert.equal("POST", e.method)
    assert.equal(tostring(size), e.h["Content-Length"])
    assert.is_nil(e.h["Expect"])
  end)

  it("absorbs the upstream's 1xx responses and passes the final one", function()
    local head, body = split(raw(front.port, "GET /u/interim HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
    assert.truthy(head:match("^HTTP/1.1 200 "), head)
    assert.falsy(head:find("103", 1, true), head)
    assert.truthy(head:find("\r\nX-Case-Test: Mixed\r\n", 1, true), head)
    if head:lower():find("transfer-encoding: chunked", 1, true) then body = dechunk(body) end
    assert.equal("hello", body)
  end)

  it("maps failures to 502 and timeouts to 504, with a body the app can replace", function()
    local t0 = socket.gettime()
    local r = front:get("/u/hang")
    local took = socket.gettime() - t0
    assert.equal(504, r.status)
    assert.equal("gateway timeout\n", r.body)
    assert.is_true(took >= 0.95 and took < 2, took)
    r = front:get("/u/rsthead")
    assert.equal(502, r.status)
    assert.equal("bad gateway\n", r.body)
    r = front:get("/refused/")
    assert.equal(502, r.status)
    r = front:get("/custom/")
    assert.equal(502, r.status)
    assert.same({ error = "refused", detail = "connection refused" }, cjson.decode(r.body))
  end)

  it("cuts the client's connection when the upstream fails after the head", function()
    local text = raw(front.port, "GET /u/rst HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    local head, body = split(text)
    assert.truthy(head:match("^HTTP/1.1 200"), head)
    -- the connection ends short of the announced length (or of the last chunk)
    local cl = tonumber(head:match("\r\nContent%-Length: (%d+)\r\n"))
    if cl then
      assert.is_true(#body < cl, #body)
    else
      assert.falsy(body:find("\r\n0\r\n\r\n", 1, true), body)
    end
    assert.equal("ok", front:get("/trust/").status == 200 and "ok" or "down")
  end)

  it("streams a slow body and server-sent events as they come", function()
    local r = front:get("/u/drip")
    assert.equal(200, r.status)
    assert.equal(string.rep("d", 20), r.body)
    local c = socket.tcp()
    c:settimeout(5)
    assert(c:connect("127.0.0.1", front.port))
    assert(c:send("GET /e/sse HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
    local t0 = socket.gettime()
    local got = ""
    while not got:find("data: one", 1, true) do
      local data, err, partial = c:receive(1)
      got = got .. (data or partial or "")
      if err then break end
    end
    local first = socket.gettime() - t0
    c:close()
    assert.truthy(got:find("data: one", 1, true), got)
    assert.is_true(first < 0.5, "the first event took " .. first .. " s")
  end)

  it("runs the request and response hooks", function()
    local r = front:get("/hooks/abc")
    assert.equal(203, r.status)
    assert.equal("1", r.headers["x-from-hook"])
    local e = echoed(r.body)
    assert.equal("PUT", e.method)
    assert.equal("/rewritten", e.path)
    assert.equal("from=/hooks/abc", e.query)
    assert.equal("yes", e.h["X-Added"])
  end)

  it("works behind an HTTP/2 client, upload included", function()
    local file = H.tmpname(".bin")
    H.write_file(file, string.rep("h", 200000))
    local out = H.sh("curl -sS --max-time 5 --http2-prior-knowledge --data-binary @" .. file
      .. " http://127.0.0.1:" .. front.port .. "/e/h2 -w '\\n%{http_code} %{http_version}'")
    os.remove(file)
    local body, status = out:match("^(.*)\n(%d+ 2)$")
    assert.equal("200 2", status, out)
    local e = echoed(body)
    assert.equal(200000, e.length)
    assert.equal("2 mh", e.h["Via"])
    assert.equal("POST", e.method)
  end)

  it("raises for misuse", function()
    local r = front:get("/bad/")
    assert.equal(500, r.status)
    assert.truthy(front:logtext():find('http.proxy: unknown option "timout" (did you mean "timeout"?)', 1, true),
      front:logtext())
  end)
end)
