-- A busy port is an error: a second server (even a different app of the same
-- user) must not join a port another process listens on, while our own
-- master keeps its socket across a SIGHUP reload. Two real processes.
local H = require "helper"
local socket = require "socket"

local APP_A = [[
local http = require "moonhttp"
http.handle("GET /", function(req, res) res:write("A") end)
]]
local APP_B = [[
local http = require "moonhttp"
http.handle("GET /", function(req, res) res:write("B") end)
]]

-- Runs moonhttp with args under timeout(1): a server that wrongly starts is
-- killed after `secs` (exit 124) instead of hanging the spec.
local function run_briefly(args, secs)
  local out = H.tmpname(".out")
  local cmd = "timeout " .. (secs or 5) .. " " .. H.bin
  for _, a in ipairs(args) do cmd = cmd .. " " .. H.shell_quote(a) end
  local _, _, code = os.execute(cmd .. " >" .. out .. " 2>&1 </dev/null")
  local text = H.read_file(out) or ""
  os.remove(out)
  H.check_sanitizers(text, cmd)
  return code, text
end

-- Every answer on the port comes from the first server.
local function all_from(port, want, n)
  for _ = 1, n do
    local res = assert(H.request(port, "GET", "/"))
    if res.body ~= want then return false, res.body end
  end
  return true
end

describe("a busy port", function()
  local a, b_script
  before_each(function() b_script = H.script(APP_B) end)
  after_each(function() if a then a:stop() end; a = nil end)

  for _, workers in ipairs({ "1", "2" }) do
    it("is refused with 'address already in use' (first server with " .. workers .. " workers)", function()
      a = H.start(APP_A, { flags = { "--workers", workers } })
      for _, bw in ipairs({ "1", "2" }) do
        local code, out = run_briefly({ "--listen", "127.0.0.1:" .. a.port, "--workers", bw, b_script })
        assert.equal(1, code, out)
        assert.truthy(out:find("address already in use", 1, true), out)
        assert.truthy(out:find("127.0.0.1:" .. a.port, 1, true), out)
      end
      assert.is_true(all_from(a.port, "A", 20))
    end)
  end

  it("is refused when a process that is not moonhttp listens there", function()
    local s = assert(socket.bind("127.0.0.1", 0))
    local _, port = s:getsockname()
    local code, out = run_briefly({ "--listen", "127.0.0.1:" .. port, "--workers", "1", b_script })
    s:close()
    assert.equal(1, code, out)
    assert.truthy(out:find("address already in use", 1, true), out)
  end)

  it("stays ours across a SIGHUP reload of the master: no gap, no second bind", function()
    local dir = H.tmpname("-dir")
    os.execute("mkdir -p " .. H.shell_quote(dir))
    local path = H.write_file(dir .. "/app.lua", APP_A)
    a = H.start(path, { flags = { "--workers", "2" } })
    H.write_file(path, (APP_A:gsub('"A"', '"A2"')))
    a:signal("HUP")
    local deadline, seen = H.now() + 5, nil
    while H.now() < deadline do
      local res = assert(H.request(a.port, "GET", "/")) -- never refused while workers change
      seen = res.body
      if seen == "A2" then break end
      H.sleep(0.02)
    end
    assert.equal("A2", seen, a:logtext())
    -- still exclusive after the reload
    local code, out = run_briefly({ "--listen", "127.0.0.1:" .. a.port, "--workers", "1", b_script })
    assert.equal(1, code, out)
    assert.is_true(all_from(a.port, "A2", 10))
    os.execute("rm -rf " .. H.shell_quote(dir))
  end)

  it("binds again right after the previous server stopped (rolling restart)", function()
    a = H.start(APP_A)
    local port = a.port
    assert(H.request(port, "GET", "/")) -- leaves a connection in TIME_WAIT on the port
    assert.equal(0, a:stop())
    a = H.start(b_script, { no_listen = true, flags = { "--listen", "127.0.0.1:" .. port } })
    assert.equal(port, a.port)
    assert.is_true(all_from(port, "B", 3))
  end)
end)

describe("--check", function()
  for _, row in ipairs({
    { "127.0.0.1:99999", "bad port" },
    { "127.0.0.1:http", "bad port" },
    { "example.com:80", "host must be an IP address" },
    { "[::1:80", "expected [ipv6]:port" },
  }) do
    it("rejects listen address " .. row[1], function()
      local code, out = H.run({ "--check", "--listen", row[1], H.script(APP_A) })
      assert.equal(1, code, out)
      assert.truthy(out:find(row[1], 1, true) and out:find(row[2], 1, true), out)
    end)
  end

  it("rejects a bad listen address set in the script", function()
    local code, out = H.run({ "--check", H.script('local http = require "moonhttp"\n'
      .. 'http.server{ listen = { "127.0.0.1:8080", "127.0.0.1:70000" } }\n') })
    assert.equal(1, code, out)
    assert.truthy(out:find("127.0.0.1:70000", 1, true) and out:find("bad port", 1, true), out)
  end)

  it("accepts good listen addresses", function()
    local code, out = H.run({ "--check", "--listen", "127.0.0.1:0", "--listen", "[::1]:8080", H.script(APP_A) })
    assert.equal(0, code, out)
  end)
end)
