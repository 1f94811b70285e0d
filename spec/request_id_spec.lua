-- req:id(): generated per request (stable within it), taken from a header
-- only when the request_id_header setting trusts it and the value is a
-- clean token, and written to the json access log.
local H = require "helper"
local cjson = require "cjson"

local APP = [[
local http = require "moonhttp"
http.handle("GET /id", function(req, res)
  local first = req:id()
  http.sleep(0.01) -- still the same after a yield
  res:write(first, " ", req:id(), "\n")
end)
http.handle("GET /quiet", function(req, res) res:write("no id asked") end)
]]

local function id_of(srv, headers)
  local res = srv:get("/id", headers)
  assert.equal(200, res.status, res.body)
  local a, b = res.body:match("^(%S+) (%S+)\n$")
  assert.equal(a, b, "the id changed within one request")
  return a
end

describe("req:id()", function()
  it("is generated, differs between requests and ignores the header by default", function()
    local srv = H.start(H.script(APP))
    local seen = {}
    for _ = 1, 5 do
      local id = id_of(srv)
      assert.truthy(id:match("^%x+$") and #id == 32, id)
      assert.is_nil(seen[id], "an id came twice")
      seen[id] = true
    end
    local id = id_of(srv, { ["X-Request-Id"] = "from-the-client" })
    assert.not_equal("from-the-client", id)
    assert.equal(32, #id)
    assert.equal(0, srv:stop())
  end)

  it("takes the trusted header when its value is a clean token", function()
    local srv = H.start(H.script(APP), { flags = { "--request-id-header", "X-Request-Id" } })
    local rows = {
      -- header value, used as the id?
      { "abc-123", true },
      { "4bf92f3577b34da6a3ce929d0e0e4736", true },
      { "req:7/a+b=c@host_1.2", true },
      { string.rep("a", 128), true },
      { string.rep("a", 129), false },
      { "has space", false },
      { 'quote"d', false },
      { "semi;colon", false },
      { "caf\195\169", false },
    }
    for i, row in ipairs(rows) do
      local id = id_of(srv, { ["X-Request-Id"] = row[1] })
      if row[2] then
        assert.equal(row[1], id, "row " .. i)
      else
        assert.truthy(id:match("^%x+$") and #id == 32, "row " .. i .. ": " .. id)
      end
    end
    assert.truthy(id_of(srv):match("^%x+$"))
    -- Another header is not the trusted one.
    assert.equal(32, #id_of(srv, { ["X-Correlation-Id"] = "abc" }))
    assert.equal(0, srv:stop())
  end)

  it("is written to the json access log, asked for or not", function()
    local log = H.tmpname(".access")
    local srv = H.start(H.script(APP), { flags = { "--access-log", log, "--access-log-format", "json",
      "--request-id-header", "X-Request-Id" } })
    local generated = id_of(srv)
    local given = id_of(srv, { ["X-Request-Id"] = "trace-42" })
    assert.equal(200, srv:get("/quiet").status)
    assert.equal(200, srv:get("/quiet", { ["X-Request-Id"] = "trace-43" }).status)
    assert.equal(0, srv:stop())
    local lines = {}
    for line in (H.read_file(log) or ""):gmatch("[^\n]+") do lines[#lines + 1] = cjson.decode(line) end
    assert.equal(4, #lines)
    assert.equal(generated, lines[1].request_id)
    assert.equal("trace-42", given)
    assert.equal("trace-42", lines[2].request_id)
    assert.truthy(lines[3].request_id:match("^%x+$") and #lines[3].request_id == 32, lines[3].request_id)
    assert.equal("trace-43", lines[4].request_id)
    os.remove(log)
  end)

  it("works per stream over HTTP/2", function()
    local srv = H.start(H.script(APP), { flags = { "--h2c", "on", "--request-id-header", "X-Request-Id" } })
    local base = "http://127.0.0.1:" .. srv.port
    -- Two concurrent streams on one connection (nghttp multiplexes them; curl 7.88
    -- fails to reuse a prior-knowledge connection before sending the second).
    local both = H.sh("nghttp " .. base .. "/id " .. base .. "/id?again")
    local a1, a2, b1, b2 = both:match("^(%x+) (%x+)\n(%x+) (%x+)\n$")
    assert.truthy(a1, both)
    assert.equal(a1, a2); assert.equal(b1, b2)
    assert.not_equal(a1, b1)
    local out = H.sh("curl -sS --max-time 10 --http2-prior-knowledge -H 'X-Request-Id: h2-trace' " .. base .. "/id")
    assert.equal("h2-trace h2-trace\n", out)
    assert.equal(0, srv:stop())
  end)

  it("refuses a request_id_header that is not a header name", function()
    local code, out = H.run({ "--check", "--request-id-header", "X Request", "spec/apps/basic.lua" })
    assert.equal(1, code)
    assert.truthy(out:find("request_id_header", 1, true), out)
  end)
end)
