-- log_format = "json": every line the server writes to stderr is one JSON
-- object (time, level, pid, msg), messages with quotes, newlines and control
-- bytes included.
local H = require "helper"
local cjson = require "cjson"

describe("log_format", function()
  it("json: one object per line, escaped", function()
    local srv = H.start([[
local http = require "moonhttp"
http.handle("GET /say", function(req, res)
  http.log("warn", 'say "hi"\nthere\t\\ \1')
  res:write("ok")
end)
]], { flags = { "--log-format", "json" } })
    assert.equal("ok", srv:get("/say").body)
    assert.equal(0, srv:stop())
    local n, said = 0, nil
    for line in srv:logtext():gmatch("[^\n]+") do
      local ok, obj = pcall(cjson.decode, line)
      assert(ok and type(obj) == "table", "not a JSON object: " .. line)
      assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ$", obj.time)
      assert.is_number(obj.pid)
      assert.truthy(({ error = 1, warn = 1, info = 1, debug = 1 })[obj.level], line)
      if obj.level == "warn" and obj.msg:find("say", 1, true) then said = obj.msg end
      n = n + 1
    end
    assert.is_true(n >= 3)
    assert.matches('say "hi"\nthere\t\\ \1', said, 1, true)
  end)

  it("refuses an unknown format", function()
    local code, out = H.run({ "--log-format", "xml", "--check", H.script("local http = require 'moonhttp'") })
    assert.equal(1, code)
    assert.matches('log_format: "xml" is not text or json', out, 1, true)
  end)
end)
