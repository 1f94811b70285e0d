-- Response trailers (docs/guide/handlers.md, res:trailers; docs/guide/proxy.md,
-- "Trailers"): the chunked tail on HTTP/1.1 read from a raw socket, the
-- trailing HEADERS frame on HTTP/2 (spec/h2_frames.py's client), refusals
-- as values (HTTP/1.0, a Content-Length body), and http.proxy passing an
-- upstream's trailers on (spec/servers/upstream.lua's /interim and a
-- moonhttp upstream).
local H = require "helper"

local APP = [[
local http = require "moonhttp"
http.handle("GET /t", function(req, res)
  assert(res:trailers{ ["X-Checksum"] = "abc", ["X-Count"] = { "1", "2" } })
  res:write("hello")
end)
http.handle("GET /stream", function(req, res)
  res:write("part1,")
  res:flush()
  http.sleep(0.05)
  assert(res:trailers{ ["Server-Timing"] = "db;dur=53" })
  res:write("part2")
end)
http.handle("GET /length", function(req, res)
  res:header("Content-Length", "5")
  local ok, err = res:trailers{ ["X-A"] = "1" }
  res:write(ok and "yes!!" or err:sub(1, 5))
end)
http.handle("GET /old", function(req, res)
  local ok, err = res:trailers{ ["X-A"] = "1" }
  res:write(ok and "accepted" or err)
end)
http.handle("GET /forbidden", function(req, res)
  local ok, err = pcall(res.trailers, res, { ["Content-Length"] = "3" })
  res:write(ok and "accepted" or err)
end)
]]

local FRONT = [[
local http = require "moonhttp"
local APP, UP = %q, %q
http.handle("/a/", function(req, res)
  return http.proxy(req, res, APP, { request = function(up) up.path = up.path:sub(3) end })
end)
http.handle("/u/", function(req, res)
  return http.proxy(req, res, UP, { request = function(up) up.path = up.path:sub(3) end })
end)
]]

local function raw(port, request)
  local c = H.connect(port)
  assert(c:send(request))
  local got = c:read_all()
  c:close()
  return got
end

local function get(port, path)
  return raw(port, "GET " .. path .. " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
end

-- HTTP/2 GET of path: the key=value lines of spec/h2_frames.py's client.
local function h2_get(port, path)
  local prog = "import sys; sys.path.insert(0, 'spec'); import h2_frames as f\n"
    .. "c = f.Client(%d)\nc.send(c.headers(1, path=%q))\n"
    .. "c.read(lambda c: 'end.1' in c.out or 'rst.1' in c.out, timeout=5)\nc.report()\n"
  local out = H.sh("/usr/bin/python3 -c " .. H.shell_quote(prog:format(port, path)))
  local kv = {}
  for k, v in out:gmatch("([^\n=]+)=([^\n]*)") do kv[k] = v end
  return kv, out
end

describe("response trailers", function()
  local app, up, front

  setup(function()
    app = H.start(APP)
    up = H.upstream()
    front = H.start(FRONT:format("http://127.0.0.1:" .. app.port, up.base))
  end)

  teardown(function()
    if front then front:stop() end
    if app then app:stop() end
    if up then up:stop() end
  end)

  it("ends a response finished at once with chunked framing and the trailer fields (HTTP/1.1)", function()
    local got = get(app.port, "/t")
    local head, body = got:match("^(.-\r\n)\r\n(.*)$")
    assert.truthy(head:find("\r\nTransfer-Encoding: chunked\r\n", 1, true), head)
    -- announced in the head (RFC 9110 §6.6.2), each name once
    assert.truthy(head:find("\r\nTrailer: X-Checksum\r\n", 1, true), head)
    assert.truthy(head:find("\r\nTrailer: X-Count\r\n", 1, true), head)
    assert.falsy(head:find("X-Count.*X-Count"), head)
    assert.falsy(head:lower():find("content-length", 1, true), head)
    assert.truthy(body:match("^5\r\nhello\r\n0\r\n"), body)
    local tail = body:match("^5\r\nhello\r\n0\r\n(.*)$")
    assert.truthy(tail:find("X-Checksum: abc\r\n", 1, true), tail)
    assert.truthy(tail:find("X-Count: 1\r\nX-Count: 2\r\n", 1, true), tail)
    assert.equal("\r\n", tail:sub(-2))
    assert.equal("\r\n\r\n", tail:sub(-4))
  end)

  it("sends trailers set while streaming after the last chunk", function()
    local got = get(app.port, "/stream")
    local head, body = got:match("^(.-)\r\n\r\n(.*)$")
    assert.truthy(body:match("0\r\nServer%-Timing: db;dur=53\r\n\r\n$"), body)
    assert.falsy(head:find("Trailer:", 1, true), head) -- set after the head went out: unannounced
    assert.truthy(body:find("part1,", 1, true) and body:find("part2", 1, true), body)
  end)

  it("refuses them as values where they cannot go: Content-Length, HTTP/1.0", function()
    local got = get(app.port, "/length")
    assert.truthy(got:find("\r\n\r\ntrail$"), got) -- "trailers need a chunked body ..."
    got = raw(app.port, "GET /old HTTP/1.0\r\nHost: x\r\n\r\n")
    assert.truthy(got:find("\r\n\r\nno trailers in HTTP/1.0$"), got)
    got = get(app.port, "/forbidden")
    assert.truthy(got:find("this field cannot be a trailer", 1, true), got)
  end)

  it("sends them as a last HEADERS frame with END_STREAM on HTTP/2", function()
    local kv, out = h2_get(app.port, "/t")
    assert.equal("200", kv["status.1"], out)
    assert.equal("hello", kv["body.1"], out)
    assert.equal("abc", kv["header.1.x-checksum"], out)
    assert.equal("1", kv["end.1"], out)
    assert.truthy(out:find("header.1.trailer=X-Checksum", 1, true) or out:find("header.1.trailer=X-Count", 1, true), out)
    kv, out = h2_get(app.port, "/stream")
    assert.equal("part1,part2", kv["body.1"], out)
    assert.equal("db;dur=53", kv["header.1.server-timing"], out)
  end)

  it("http.proxy passes an upstream's trailers on, to HTTP/1.1 and HTTP/2 clients", function()
    local got = get(front.port, "/u/interim") -- "0\r\nX-Sum: 42\r\n\r\n" from the upstream
    assert.truthy(got:match("\r\n0\r\nX%-Sum: 42\r\n\r\n$"), got)
    assert.truthy(got:find("\r\nTrailer: X-Sum\r\n", 1, true), got) -- the upstream's announcement passed on
    got = raw(front.port, "GET /u/interim HTTP/1.0\r\nHost: x\r\n\r\n")
    assert.falsy(got:find("Trailer:", 1, true), got) -- none to a client that gets no trailers
    got = get(front.port, "/a/t")
    assert.truthy(got:find("\r\nTrailer: X-Checksum\r\n", 1, true), got)
    local tail = got:match("\r\n0\r\n(.*)$")
    assert.truthy(tail and tail:find("X-Checksum: abc\r\n", 1, true), got)
    assert.truthy(tail:find("X-Count: 1\r\n", 1, true) and tail:find("X-Count: 2\r\n", 1, true), got)
    local kv, out = h2_get(front.port, "/u/interim")
    assert.equal("hello", kv["body.1"], out)
    assert.equal("X-Sum", kv["header.1.trailer"], out)
    assert.equal("42", kv["header.1.x-sum"], out)
  end)
end)
