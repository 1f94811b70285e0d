-- access_log_redact: the values of the named query parameters never reach
-- the access log (a WebSocket authenticated with ?token= would otherwise
-- write the token into every line), in every format, whether the setting
-- comes from the command line or from the script as a list.
local H = require "helper"
local cjson = require "cjson"

local APP = [[
local http = require "moonhttp"
http.handle("GET /ws", function(req, res) res:write(req:arg("token") or "none") end)
]]

-- { the request target, how the log must show it }
local ROWS = {
  { "/ws?token=eyJhbGciOi.secret&room=1", "/ws?token=REDACTED&room=1" },
  { "/ws?room=1&password=hunter2", "/ws?room=1&password=REDACTED" },
  { "/ws?token=a&token=b", "/ws?token=REDACTED&token=REDACTED" },
  { "/ws?token=", "/ws?token=REDACTED" },
  { "/ws?tokens=kept&xtoken=kept&token", "/ws?tokens=kept&xtoken=kept&token" }, -- other names; no value
  { "/ws?TOKEN=case", "/ws?TOKEN=case" },                                     -- names as sent
  { "/ws", "/ws" },
}

local function run(format, start)
  local log = H.tmpname(".access")
  local flags = { "--access-log", log, "--access-log-format", format }
  for _, f in ipairs(start.flags or {}) do flags[#flags + 1] = f end
  local srv = H.start(start.app or APP, { flags = flags })
  for _, row in ipairs(ROWS) do
    local res = srv:get(row[1])
    assert.equal(200, res.status) -- the handler still sees the value: only the log hides it
  end
  srv:stop()
  local lines = {}
  for l in (H.read_file(log) or ""):gmatch("[^\n]+") do lines[#lines + 1] = l end
  os.remove(log)
  return lines
end

for _, start in ipairs {
  { name = "--access-log-redact token,password", flags = { "--access-log-redact", "token,password" } },
  { name = "http.server{ access_log_redact = { \"token\", \"password\" } }",
    app = APP .. 'http.server{ access_log_redact = { "token", "password" } }\n' },
} do
  describe(start.name, function()
    it("writes the values as REDACTED in the common format", function()
      local lines = run("common", start)
      assert.equal(#ROWS, #lines)
      for i, row in ipairs(ROWS) do
        assert.truthy(lines[i]:find('"GET ' .. row[2] .. ' HTTP/1.1"', 1, true), lines[i])
      end
    end)

    it("in the json format's target and query", function()
      local lines = run("json", start)
      for i, row in ipairs(ROWS) do
        local t = cjson.decode(lines[i])
        assert.equal(row[2], t.target)
        assert.equal(row[2]:match("%?(.*)$") or "", t.query)
        assert.equal("/ws", t.path)
      end
      assert.falsy(table.concat(lines):find("secret", 1, true))
    end)
  end)
end

describe("without access_log_redact", function()
  it("logs the target as sent", function()
    local lines = run("common", {})
    assert.truthy(lines[1]:find(ROWS[1][1], 1, true), lines[1])
  end)
end)

describe("a bad access_log_redact", function()
  for _, v in ipairs { "token,,password", "to ken", "" } do
    it(("is refused: %q"):format(v), function()
      local code, out = H.run({ "--access-log-redact", v, "--check", H.script(APP) })
      assert.equal(1, code, out)
      assert.truthy(out:find("access_log_redact", 1, true), out)
    end)
  end
end)
