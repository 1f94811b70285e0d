-- bench/tfb: moonhttp's TechEmpower implementations (bench/tfb/moonhttp)
-- pass bench/tfb/verify.py, run through the real binary against a
-- throw-away PostgreSQL (spec/pg_helper.lua, filled by bench/tfb/setup.sql)
-- and a redis-server. The verifier itself is checked too: copies of the app
-- with one requirement broken (fortunes escaping, the queries clamp, the
-- updates' write) must each be refused.
local H = require "helper"
local P = require "pg_helper"

local APP_DIR = "bench/tfb/moonhttp"

describe("bench/tfb", function()
  local cluster, redis

  setup(function()
    cluster = P.start()
    H.must(string.format("%s/psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p %d -U postgres -d postgres -f %s",
      P.bindir, cluster.port, "bench/tfb/setup.sql"))
    redis = H.redis()
  end)
  teardown(function()
    if redis then redis:stop() end
    if cluster then cluster:stop() end
  end)

  local function start(script)
    return H.start(script, { env = string.format("PGPORT=%d REDIS_PORT=%d POOL=4", cluster.port, redis.port) })
  end

  -- The verifier's exit status (true: all passed) and its output.
  local function verify(server, tests)
    local out, ok = H.sh(string.format("python3 bench/tfb/verify.py --name moonhttp --url http://127.0.0.1:%d "
      .. "--pg-port %d --redis-port %d%s", server.port, cluster.port, redis.port,
      tests and (" --tests " .. tests) or ""))
    return ok, out
  end

  -- A copy of the app folder with `old` replaced by `new` (exactly once) in `file`.
  local function broken_copy(file, old, new)
    local dir = H.tmpname("-tfb")
    H.must(string.format("cp -r %s %s", APP_DIR, H.shell_quote(dir)))
    local path = dir .. "/" .. file
    local src = assert(H.read_file(path))
    local at = src:find(old, 1, true)
    assert(at and not src:find(old, at + 1, true), "expected one '" .. old .. "' in " .. path)
    H.write_file(path, src:sub(1, at - 1) .. new .. src:sub(at + #old))
    return dir
  end

  it("moonhttp's implementation passes every test", function()
    local server = start(APP_DIR .. "/app.lua")
    local ok, out = verify(server)
    server:stop()
    assert(ok, out)
    for _, t in ipairs{ "json", "db", "queries", "fortunes", "updates", "plaintext", "cached", "redis" } do
      assert.matches("PASS moonhttp " .. t .. "\n", out, 1, true)
    end
  end)

  -- Each row: the file, the text to break, what replaces it, the test that must fail.
  local broken = {
    { "fortunes.html", "{{ f.message }}", "{{! f.message }}", "fortunes", "unescaped fortunes" },
    { "app.lua", "if n > 500 then return 500 end", "", "queries", "queries not clamped to 500" },
    { "app.lua", "if not n or n < 1 then return 1 end", "n = n or 0", "queries", "bad queries values not 1" },
    { "app.lua", "db:query(UPDATE_WORLDS, ids, nums)", "db:query('SELECT 1')", "updates", "updates not written" },
    { "app.lua", 'rows[#rows + 1] = { id = 0, message = "Additional fortune added at request time." }', "",
      "fortunes", "no fortune added at request time" },
  }
  for _, row in ipairs(broken) do
    local file, old, new, test, what = table.unpack(row)
    it("refuses " .. what, function()
      local dir = broken_copy(file, old, new)
      local server = start(dir .. "/app.lua")
      local ok, out = verify(server, test)
      server:stop()
      os.execute("rm -rf " .. H.shell_quote(dir))
      assert.is_false(ok, out)
      assert.matches("FAIL moonhttp " .. test .. ":", out, 1, true)
    end)
  end
end)
