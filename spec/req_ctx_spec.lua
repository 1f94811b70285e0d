-- req.ctx (issue 37): a table of the request's own that middleware fills and
-- the handler reads, made on first use, never shared between requests, the
-- same over HTTP/1.1 and HTTP/2 (curl with prior knowledge).
local H = require "helper"

local SERVER = [[
local http = require "moonhttp"
http.use(function(next)
  return function(req, res)
    req.ctx.user = req:header("x-user") or req:arg("u") or "anon"
    req.ctx.seen = (req.ctx.seen or 0) + 1
    return next(req, res)
  end
end)
http.handle("GET /who", function(req, res)
  local ctx = req.ctx
  -- a value left by an earlier request would show as seen = 2 or a stale user
  res:write(string.format("%s %d %s %s\n", ctx.user, ctx.seen, tostring(ctx == req.ctx), tostring(ctx.leak)))
  ctx.leak = "leaked"
end)
http.handle("GET /keep", function(req, res)
  http.sleep(0.2) -- two of these overlap: each must keep its own table
  res:write(req.ctx.user .. "\n")
end)
]]

describe("req.ctx", function()
  local srv
  setup(function() srv = H.start(SERVER) end)
  teardown(function() srv:stop() end)

  it("carries what middleware set to the handler, fresh for each request", function()
    assert.equal("alice 1 true nil\n", srv:get("/who", { ["X-User"] = "alice" }).body)
    assert.equal("anon 1 true nil\n", srv:get("/who").body)
    -- two requests on one keep-alive connection
    local c = H.connect(srv.port)
    for _, u in ipairs({ "bob", "carol" }) do
      assert(c:send("GET /who HTTP/1.1\r\nHost: x\r\nX-User: " .. u .. "\r\n\r\n"))
      assert.equal(u .. " 1 true nil\n", c:read_response().body)
    end
    c:close()
  end)

  it("keeps overlapping requests apart", function()
    local a, b = H.connect(srv.port), H.connect(srv.port)
    assert(a:send("GET /keep HTTP/1.1\r\nHost: x\r\nX-User: first\r\n\r\n"))
    assert(b:send("GET /keep HTTP/1.1\r\nHost: x\r\nX-User: second\r\n\r\n"))
    assert.equal("first\n", a:read_response().body)
    assert.equal("second\n", b:read_response().body)
    a:close()
    b:close()
  end)

  it("works over HTTP/2, one table per stream on one connection", function()
    -- nghttp sends the three as concurrent streams of one h2c connection
    local url = "http://127.0.0.1:" .. srv.port
    local out = H.sh("timeout 5 nghttp " .. url .. "/keep?u=k1 " .. url .. "/who?u=h2a " .. url .. "/who?u=h2b")
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    table.sort(lines)
    assert.same({ "h2a 1 true nil", "h2b 1 true nil", "k1" }, lines)
  end)
end)
