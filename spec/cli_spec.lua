-- The command line: flags after the script path, `--` ending the flags, and
-- `moonhttp run script.lua args` passing its args to the script untouched.
local H = require "helper"

local APP = [[
local http = require "moonhttp"
http.handle("GET /", function(req, res) res:write("ok") end)
]]

describe("command line", function()
  it("accepts flags after the script path", function()
    local srv = H.start(APP, { no_listen = true, after = { "--listen", "127.0.0.1:0", "--idle-timeout=7" } })
    assert.equal("ok", srv:get("/").body)
    assert.equal(0, srv:stop())
  end)

  it("accepts flags on both sides of the script", function()
    local code, out = H.run({ "--check", H.script(APP), "--listen", "127.0.0.1:99999" })
    assert.equal(1, code, out)
    assert.truthy(out:find("bad port", 1, true), out) -- the flag after the script was read
    code, out = H.run({ H.script(APP), "--check" })
    assert.equal(0, code, out)
    assert.truthy(out:find(": ok (1 routes)", 1, true), out)
  end)

  it("ends the flags at --", function()
    local code, out = H.run({ "--check", "--", H.script(APP) })
    assert.equal(0, code, out)
    code, out = H.run({ "--check", "--", H.script(APP), "--listen", ":1" })
    assert.equal(2, code, out)
    assert.truthy(out:find("unexpected argument after script: --listen", 1, true), out)
  end)

  it("refuses a second script", function()
    local code, out = H.run({ "--check", H.script(APP), H.script(APP) })
    assert.equal(2, code, out)
    assert.truthy(out:find("unexpected argument after script", 1, true), out)
  end)

  it("suggests the flag a typo meant", function()
    local code, out = H.run({ H.script(APP), "--idle-timout", "3" })
    assert.equal(2, code, out)
    assert.truthy(out:find("unknown flag --idle-timout (did you mean --idle-timeout?", 1, true), out)
  end)

  it("passes what follows a `run` script to the script untouched", function()
    local script = H.script('print(#arg, arg[0] ~= nil, table.concat(arg, "|"))\n')
    local code, out = H.run({ "run", script, "--listen", ":9000", "--", "x" })
    assert.equal(0, code, out)
    assert.equal("4\ttrue\t--listen|:9000|--|x\n", out)
  end)
end)
