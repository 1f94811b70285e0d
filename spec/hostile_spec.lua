-- Hostile and malformed input, written as data: the bytes a client sends,
-- the status it must get, and whether the connection stays open after.
local H = require "helper"
local cases = require "hostile_rows"

describe("hostile input", function()
  local srv
  setup(function()
    srv = H.start("spec/apps/basic.lua", { flags = { "--max-body-bytes", "1024", "--max-header-bytes", "2048" } })
  end)
  teardown(function() srv:stop() end)

  for _, case in ipairs(cases) do
    local name, bytes, want = case[1], case[2], case[3]
    it(name .. " -> " .. (type(want) == "table" and table.concat(want, ", ") or tostring(want)), function()
      local c = srv:connect()
      assert(c:send(bytes))
      local statuses = type(want) == "table" and want or { want }
      for _, status in ipairs(statuses) do
        local res, err = c:read_response()
        assert.is_truthy(res, "no response: " .. tostring(err))
        assert.equal(status, res.status)
        if status >= 400 and not case.keep then
          assert.equal("close", res.headers["connection"])
        end
        if case.body then assert.equal(case.body, res.body) end
        if case.allow then assert.equal(case.allow, res.headers["allow"]) end
        if case.method then assert.equal(case.method, res.headers["x-method"]) end
        if case.conn then assert.equal(case.conn, res.headers["connection"]) end
        if case.location then assert.equal(case.location, res.headers["location"]) end
      end
      assert.equal(case.keep == true, not c:closed_by_peer(0.3),
        case.keep and "connection should stay open" or "connection should be closed")
      c:close()
    end)
  end

  it("logs a handler's failure on a malformed body as the client's fault, not an error", function()
    local log = srv:logtext()
    assert.truthy(log:find("handler error after a bad request body (route POST /body-assert", 1, true), log)
    assert.falsy(log:find("[error]", 1, true), log)
  end)

  it("routes a method llhttp does not know when it arrives a byte at a time", function()
    local c = srv:connect()
    assert(H.trickle(c, "purge /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nok", { gap = 0.002 }))
    local res = assert(c:read_response())
    assert.same({ 200, "purge", "ok" }, { res.status, res.headers["x-method"], res.body })
    c:close()
  end)

  it("keeps serving after all of that", function()
    assert.equal(200, srv:get("/hello").status)
  end)
end)
