-- http.proxy's two paths agree (issue 37): without hooks, the heads go as
-- text and straight into res; with a request or response hook, as tables
-- through http.fetch (lua/moonhttp/proxy.lua). Both take their fields from
-- the one copy of the rules, src/lua/lua_proxy.c (core.proxy_request,
-- core.proxy_response). The same requests go through both, over HTTP/1.1 and
-- HTTP/2, and what the upstream receives and the client gets back must
-- match: the same fields with the same values in the same order per name,
-- the same spellings. The plain path also keeps the client's order of fields
-- going up (a hook's table has none).
local H = require "helper"
local socket = require "socket"
local cjson = require "cjson"

local ECHO = [[
local http = require "moonhttp"
http.handle("/", function(req, res)
  local n = 0
  while true do
    local piece = req:read(65536)
    if not piece then break end
    n = n + #piece
  end
  res:json({ method = req.method, path = req.raw_path, query = req.query, headers = req:header_list(),
    length = n })
end, { max_body = "10m" })
]]

-- /c/<set>/...: the C path; /l/<set>/...: the same options with hooks that change nothing.
local FRONT = [[
local http = require "moonhttp"
local ECHO, UP = %q, %q
local SETS = {
  plain = {},
  fwd = { via = "mh", forwarded = true },
  trust = { trust_forwarded = true, preserve_host = true, via = "mh", forwarded = true },
  noxf = { trust_forwarded = true, x_forwarded = false },
}
local function route(set, hooked, target)
  local opts = {}
  for k, v in pairs(SETS[set]) do opts[k] = v end
  if hooked then
    opts.request = function() end
    opts.response = function() end
  end
  return function(req, res) return http.proxy(req, res, target, opts) end
end
-- a group target without hooks takes the plain path too, its server picked per attempt
local group = http.upstream{ servers = { (ECHO:gsub("^http://", "")) } }
http.handle("/g/", function(req, res) return http.proxy(req, res, group) end)
-- a stand-in req (as moonhttp.cache hands one) whose field would split in two going up
http.handle("/standin-bad", function(req, res)
  local fake = { method = "GET", raw_path = "/s", query = "", host = "h", remote_addr = "127.0.0.1:9",
    proto = "HTTP/1.1" }
  function fake.header_list() return { "X-A", "a\r\nX-Injected: 1" } end
  function fake.tls() return false end
  return http.proxy(fake, res, ECHO)
end)
for set in pairs(SETS) do
  http.handle("/c/" .. set .. "/", route(set, false, ECHO), { max_body = "10m" })
  http.handle("/l/" .. set .. "/", route(set, true, ECHO), { max_body = "10m" })
  http.handle("/cu/" .. set .. "/", route(set, false, UP))
  http.handle("/lu/" .. set .. "/", route(set, true, UP))
end
]]

local function raw(port, bytes)
  local c = socket.tcp()
  c:settimeout(5)
  assert(c:connect("127.0.0.1", port))
  assert(c:send(bytes))
  local data, _, partial = c:receive("*a")
  c:close()
  return data or partial
end

-- The fields of a header list { n1, v1, ... } as "Name: value" lines grouped by lowercase name
-- (in their order within a name), names sorted, the Lua path's order between names being none.
local function grouped(list)
  local by, names = {}, {}
  for i = 1, #list, 2 do
    local l = list[i]:lower()
    if not by[l] then by[l] = {}; names[#names + 1] = l end
    table.insert(by[l], list[i] .. ": " .. list[i + 1])
  end
  table.sort(names)
  local out = {}
  for _, l in ipairs(names) do out[#out + 1] = table.concat(by[l], "\n") end
  return table.concat(out, "\n")
end

-- A raw response's status line and fields as a header list (Date dropped: it ticks).
local function response_list(text)
  local head, body = text:match("^(.-)\r\n\r\n(.*)$")
  local list = {}
  for line in head:gmatch("[^\r\n]+") do
    local n, v = line:match("^([^:]+):%s*(.*)$")
    if n and n:lower() ~= "date" then list[#list + 1] = n; list[#list + 1] = v end
  end
  return head:match("^[^\r\n]+"), list, body
end

local REQUESTS = {
  { name = "hop-by-hop and forwarding fields, repeats in two cases",
    head = "GET %s/a/b?q=1&r=2 HTTP/1.1\r\nHost: front.test\r\nX-MiXeD: a\r\nConnection: close, X-Drop,\tx-two\r\n"
      .. "X-Drop: 1\r\nX-Two: 2\r\nKeep-Alive: 5\r\nTE: trailers\r\nProxy-Authorization: Basic eA==\r\n"
      .. "X-Forwarded-For: 6.6.6.6\r\nx-forwarded-for: 7.7.7.7\r\nForwarded: for=6.6.6.6\r\nX-Rep: 1\r\n"
      .. "x-rep: 2\r\nX-REP: 3\r\nvia: 1.0 other\r\nX-Forwarded-Proto: https\r\nUser-Agent: t/1\r\n\r\n" },
  { name = "HTTP/1.0, no query",
    head = "GET %s/ HTTP/1.0\r\nHost: h\r\nx-forwarded-host: fh\r\n\r\n" },
  { name = "a body with its length",
    head = "POST %s/up HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello" },
  { name = "a chunked body",
    head = "PUT %s/up HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
      .. "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n" },
  { name = "an empty body",
    head = "POST %s/e HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" },
  { name = "a POST without a body",
    head = "POST %s/e HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n" },
  { name = "nine Connection fields (more than struct mh_hop keeps: joined)",
    head = "GET %s/n HTTP/1.1\r\nHost: h\r\n" .. string.rep("Connection: x-a\r\n", 8)
      .. "Connection: x-b, close\r\nX-A: 1\r\nX-B: 2\r\nX-C: 3\r\n\r\n" },
}

describe("http.proxy without hooks (C) and with them (Lua)", function()
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

  -- Sends one request through /c/<set> and /l/<set>; returns both echoes.
  local function both(set, head)
    local function go(prefix)
      local text = raw(front.port, head:format("/" .. prefix .. "/" .. set))
      local status, _, body = response_list(text)
      assert.truthy(status:match(" 200 "), text)
      return cjson.decode(body)
    end
    return go("c"), go("l")
  end

  for _, set in ipairs({ "plain", "fwd", "trust", "noxf" }) do
    for _, rq in ipairs(REQUESTS) do
      it("sends the upstream the same request: " .. set .. ", " .. rq.name, function()
        local c, l = both(set, rq.head)
        assert.equal(l.method, c.method)
        assert.equal((l.path:gsub("^/l/", "/c/")), c.path)
        assert.equal(l.query, c.query)
        assert.equal(l.length, c.length)
        assert.equal(grouped(l.headers), grouped(c.headers))
      end)
    end
  end

  for _, target in ipairs({ "/c/plain/o", "/g/o" }) do
    it("passes the client's fields up in the client's order: " .. target, function()
      local names = { "X-Fox", "X-Ant", "X-Eel", "X-Bee", "X-Dog", "X-Cat", "X-Gnu", "X-Hen" }
      local lines = {}
      for _, n in ipairs(names) do lines[#lines + 1] = n .. ": " .. n:sub(3):lower() end
      local text = raw(front.port, "GET " .. target .. " HTTP/1.1\r\nHost: h\r\n" .. table.concat(lines, "\r\n")
        .. "\r\nConnection: close\r\n\r\n")
      local _, _, body = response_list(text)
      local got = {}
      for i, n in ipairs(cjson.decode(body).headers) do
        if i % 2 == 1 and n:match("^X%-") and not n:match("^X%-Forwarded") then got[#got + 1] = n end
      end
      assert.equal(table.concat(names, " "), table.concat(got, " "))
    end)
  end

  -- trusted: the client's X-Forwarded-For fields joined and extended where the first stood
  it("extends a trusted X-Forwarded-For in place", function()
    local text = raw(front.port, "GET /c/trust/x HTTP/1.1\r\nHost: h\r\nX-A: a\r\nX-Forwarded-For: 1.1.1.1\r\n"
      .. "X-B: b\r\nx-forwarded-for: 2.2.2.2\r\nX-C: c\r\nConnection: close\r\n\r\n")
    local _, _, body = response_list(text)
    local got = {}
    local list = cjson.decode(body).headers
    for i = 1, #list, 2 do
      if list[i]:match("^X%-[ABC]$") or list[i]:lower() == "x-forwarded-for" then
        got[#got + 1] = list[i] .. ": " .. list[i + 1]
      end
    end
    assert.equal("X-A: a|X-Forwarded-For: 1.1.1.1, 2.2.2.2, 127.0.0.1|X-B: b|X-C: c", table.concat(got, "|"))
  end)

  it("answers 400 for a stand-in req's field with CR, LF or NUL", function()
    local text = raw(front.port, "GET /standin-bad HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
    local status, _, body = response_list(text)
    assert.truthy(status:match(" 400 "), text)
    assert.equal("bad request\n", body)
  end)

  for _, set in ipairs({ "plain", "fwd" }) do
    for _, path in ipairs({ "/hop", "/multi", "/chunked" }) do
      it("gives the client the same response: " .. set .. ", " .. path, function()
        local function go(prefix)
          local text = raw(front.port, "GET /" .. prefix .. "/" .. set .. path
            .. " HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
          return response_list(text)
        end
        local cs, cl, cb = go("cu")
        local ls, ll, lb = go("lu")
        assert.equal(ls, cs)
        assert.equal(grouped(ll), grouped(cl))
        assert.equal(lb, cb)
      end)
    end
  end

  it("agrees behind an HTTP/2 client, upload included", function()
    local function go(prefix)
      local out = H.sh("curl -sS --max-time 5 --http2-prior-knowledge -H 'X-A: 1' -H 'x-b: 2' --data-binary abc"
        .. " http://127.0.0.1:" .. front.port .. "/" .. prefix .. "/fwd/h2")
      return cjson.decode(out)
    end
    local c, l = go("c"), go("l")
    assert.equal(3, c.length)
    assert.equal(l.method, c.method)
    assert.equal(grouped(l.headers), grouped(c.headers))
    assert.truthy(grouped(c.headers):find("Via: 2 mh", 1, true))
  end)
end)
