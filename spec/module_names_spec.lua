-- The modules of require "moonhttp" raise for a name they do not have, at
-- the line that reads it, with the name meant (pg.connect: pg.pool, as the
-- guide's own example once had it), so a typo is not "attempt to call a nil
-- value". Read while the script loads, it fails `moonhttp --check`.
local H = require "helper"

-- { the read, the message }
local ROWS = {
  { [[pg.connect{ database = "app" }]], "pg.connect does not exist (did you mean pg.pool?)" },
  { [[pg.pol{}]], "pg.pol does not exist (did you mean pg.pool?)" },
  { [[http.hadle("GET /", print)]], "http.hadle does not exist (did you mean http.handle?)" },
  { [[redis.conect{}]], "redis.conect does not exist (did you mean redis.connect?)" },
  { [[session.middlewar{}]], "session.middlewar does not exist (did you mean session.middleware?)" },
  { [[csrf.midleware{}]], "csrf.midleware does not exist (did you mean csrf.middleware?)" },
  { [[template.rendr("x")]], "template.rendr does not exist (did you mean template.render?)" },
  { [[cache.neww{}]], "cache.neww does not exist (did you mean cache.new?)" },
  { [[ratelimit.midleware{}]], "ratelimit.midleware does not exist (did you mean ratelimit.middleware?)" },
  -- nothing close: the names it has
  { [[redis.pool{}]], "redis.pool does not exist (redis has: ErrorReply, connect," },
}

local PRELUDE = [[
local http = require "moonhttp"
local pg = require "moonhttp.pg"
local redis = require "moonhttp.redis"
local session = require "moonhttp.session"
local csrf = require "moonhttp.csrf"
local template = require "moonhttp.template"
local cache = require "moonhttp.cache"
local ratelimit = require "moonhttp.ratelimit"
]]

describe("a module name that does not exist", function()
  for _, row in ipairs(ROWS) do
    it("fails --check at its line: " .. row[1], function()
      local path = H.script(PRELUDE .. row[1] .. "\n")
      local code, out = H.run({ "--check", path })
      os.remove(path)
      assert.equal(1, code, out)
      assert.truthy(out:find(":9: " .. row[2], 1, true), out)
    end)
  end

  it("raises when read in a handler, and names that exist read as before", function()
    local lines = { PRELUDE, 'http.handle("GET /", function(req, res)\n  local out = {}\n' }
    for i, row in ipairs(ROWS) do
      lines[#lines + 1] = ("  out[%d] = select(2, pcall(function() return %s end))\n"):format(i, row[1])
    end
    lines[#lines + 1] = '  out[#out + 1] = tostring(pg.null == http.json.null and type(http.handle))\n'
    lines[#lines + 1] = '  res:write(table.concat(out, "\\n"))\nend)\n'
    local srv = H.start(table.concat(lines))
    local res = srv:get("/")
    srv:stop()
    local got = {}
    for l in (res.body .. "\n"):gmatch("([^\n]*)\n") do got[#got + 1] = l end
    for i, row in ipairs(ROWS) do
      assert.truthy(got[i]:find(row[2], 1, true), got[i])
    end
    assert.equal("function", got[#ROWS + 1])
  end)
end)
