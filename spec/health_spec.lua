-- http.health_handler: a readiness route that answers 503 once a stop began
-- (while shutdown_delay still serves) or when the app's own check fails.
local H = require "helper"

local APP = [[
local http = require "moonhttp"
local up = true
http.handle("GET /ready", http.health_handler())
http.handle("GET /deps", http.health_handler { check = function(req)
  if up then return true end
  return nil, "database down"
end })
http.handle("GET /raises", http.health_handler { check = function() error("boom") end })
http.handle("GET /plain", function(req, res) res:write("x") end)
http.handle("POST /down", function(req, res) up = false; res:write("down") end)
]]

describe("http.health_handler", function()
  it("answers ok, then the check's error, never cached", function()
    local srv = H.start(APP)
    local res = srv:get("/ready")
    assert.equal(200, res.status)
    assert.equal("ok\n", res.body)
    assert.equal("no-store", res.headers["cache-control"])
    assert.equal(200, srv:get("/deps").status)
    srv:request("POST", "/down")
    res = srv:get("/deps")
    assert.equal(503, res.status)
    assert.equal("database down\n", res.body)
    res = srv:get("/raises")
    assert.equal(503, res.status)
    assert.equal("check failed\n", res.body) -- the error text stays in the log
    assert.equal(0, srv:stop())
    assert.matches("check raised: .*boom", srv:logtext())
  end)

  it("answers 503 stopping during shutdown_delay while other routes still serve", function()
    local srv = H.start(APP, { flags = { "--shutdown-delay", "1" } })
    assert.equal(200, srv:get("/ready").status)
    srv:signal("TERM")
    H.sleep(0.2)
    local res = srv:get("/ready")
    assert.equal(503, res.status)
    assert.equal("stopping\n", res.body)
    assert.equal(200, srv:get("/plain").status)
    assert.equal(0, srv:wait(5))
  end)

  it("refuses bad options at the call", function()
    local code, out = H.run({ "--check", H.script([[
local http = require "moonhttp"
http.handle("GET /r", http.health_handler { chek = function() end })
]]) })
    assert.equal(1, code)
    assert.matches('unknown option "chek"', out, 1, true)
  end)
end)
