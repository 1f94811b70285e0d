-- What the cluster specs share: one redis-server for a describe block, the
-- instances a test starts against it (stopped after each test) and their
-- notes files (removed after each test), and redis-cli.
local H = require "helper"
local busted = require "busted"

local C = {}

-- redis-cli -p port <cmd>'s output, without the trailing newline.
function C.redis_cli(port, cmd)
  local out = H.sh(string.format("redis-cli -p %d %s", port, cmd))
  return (out:gsub("%s+$", ""))
end

-- Call in a describe block: t.redis (the server), and per test t.servers (put the started
-- instances there) and t.notes (a fresh path prefix); Redis is flushed before each test.
function C.fixture()
  local t = { servers = {} }
  busted.setup(function() t.redis = H.redis() end)
  busted.teardown(function() t.redis:stop() end)
  busted.before_each(function()
    t.servers = {}
    t.notes = H.tmpname("")
    C.redis_cli(t.redis.port, "FLUSHALL")
  end)
  busted.after_each(function()
    for _, s in ipairs(t.servers) do
      if s:alive() then s:stop() end
    end
    os.execute("rm -f " .. t.notes .. ".*")
  end)
  return t
end

return C
