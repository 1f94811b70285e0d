-- Per-route body limits: a route option or req:set_max_body(bytes) before the
-- first read, so one upload route does not force a large max_body_bytes on
-- every route.
local H = require "helper"

local APP = [[
local http = require "moonhttp"
http.server{ max_body_bytes = 1000 }
local function echo_size(req, res)
  local body, err = req:body()
  if not body then res:status(400); res:write(err) return end
  res:write(tostring(#body))
end
http.handle("POST /echo", echo_size)
http.handle("POST /upload", echo_size, { max_body = "64k" })
-- read by the settings' own byte parser, as max_body_bytes = "1.5k" would be
http.handle("POST /fraction", echo_size, { max_body = "1.5k" })
http.handle("POST /small", function(req, res) req:set_max_body(10); return echo_size(req, res) end)
http.handle("POST /raise", function(req, res) req:set_max_body(100000); return echo_size(req, res) end)
http.handle("POST /late", function(req, res)
  req:read(1)
  req:set_max_body(5)
end)
http.handle("POST /ignore", function(req, res) res:write("ignored") end)
-- middleware reading the body sees the route's limit too
local g = http.group("/mw")
g:use(function(next)
  return function(req, res)
    local body, err = req:body()
    if not body then res:status(400); res:write(err) return end
    res:write("mw read ", tostring(#body))
  end
end)
g:handle("POST /big", function() end, { max_body = 5000 })
]]

local function chunked(n)
  return "POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    .. string.format("%x\r\n", n) .. string.rep("y", n) .. "\r\n0\r\n\r\n"
end

describe("per-route body limits", function()
  local srv
  setup(function() srv = H.start(APP) end)
  teardown(function() srv:stop() end)

  -- route, body size, status, body
  for _, row in ipairs({
    { "/echo", 900, 200, "900" },
    { "/echo", 5000, 413, "request body too large\n" },
    { "/upload", 5000, 200, "5000" },
    { "/upload", 65536, 200, "65536" },
    { "/upload", 70000, 413, "request body too large\n" },
    { "/fraction", 1536, 200, "1536" },
    { "/fraction", 1537, 413, "request body too large\n" },
    { "/small", 10, 200, "10" },
    { "/small", 20, 413, "request body too large\n" },
    { "/raise", 50000, 200, "50000" },
    { "/mw/big", 4000, 200, "mw read 4000" },
    { "/mw/big", 6000, 413, "request body too large\n" },
  }) do
    it(string.format("POST %s with %d bytes -> %d", row[1], row[2], row[3]), function()
      local res = assert(srv:request("POST", row[1], {}, string.rep("x", row[2])))
      assert.same({ row[3], row[4] }, { res.status, res.body })
    end)
  end

  it("applies the route's limit to a chunked body", function()
    local c = srv:connect()
    assert(c:send(chunked(5000)))
    assert.equal("5000", assert(c:read_response()).body)
    c:close()
    c = srv:connect()
    assert(c:send(chunked(70000)))
    assert.equal(413, assert(c:read_response()).status)
    c:close()
  end)

  it("refuses a declared oversize body without sending 100 Continue", function()
    local c = srv:connect()
    assert(c:send("POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n"))
    local res = assert(c:read_response())
    assert.equal(413, res.status)
    c:close()
  end)

  it("raises when the limit is set after the body is being read", function()
    local res = assert(srv:request("POST", "/late", {}, "abc"))
    assert.equal(500, res.status)
    assert.truthy(srv:logtext():find("req:set_max_body: the body is being read already", 1, true))
  end)

  it("leaves a handler that ignores the body alone", function()
    local res = assert(srv:request("POST", "/ignore", {}, string.rep("x", 5000)))
    assert.same({ 200, "ignored" }, { res.status, res.body })
  end)

  it("rejects bad route options at load time", function()
    local code, out = H.run({ "--check", H.script('local http = require "moonhttp"\n'
      .. 'http.handle("POST /u", function() end, { max_bdy = 3 })\n') })
    assert.equal(1, code)
    assert.truthy(out:find(':2: http.handle: unknown option "max_bdy" (did you mean "max_body"?)', 1, true), out)
    code, out = H.run({ "--check", H.script('local http = require "moonhttp"\n'
      .. 'http.handle("POST /u", function() end, { max_body = "lots" })\n') })
    assert.equal(1, code)
    assert.truthy(out:find(":2: http.handle: max_body must be a size in bytes", 1, true), out)
  end)
end)
