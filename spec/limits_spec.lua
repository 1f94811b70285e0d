-- Settings with short values, slow and greedy clients, graceful shutdown.
local H = require "helper"

local function rss_kb(pid)
  local s = H.read_file("/proc/" .. pid .. "/status") or ""
  return tonumber(s:match("VmRSS:%s*(%d+)")) or 0
end

describe("timeouts", function()
  local srv
  setup(function()
    srv = H.start("spec/apps/limits.lua", { flags = {
      "--read-header-timeout", "0.3", "--idle-timeout", "0.5", "--write-timeout", "0.4" } })
  end)
  teardown(function() srv:stop() end)

  it("cuts a connection that sends nothing at read_header_timeout", function()
    local c = srv:connect()
    local t0 = H.now()
    assert.is_true(c:closed_by_peer(3))
    local dt = H.now() - t0
    assert.is_true(dt > 0.2 and dt < 1.5, "closed after " .. dt)
  end)

  it("cuts a slowloris client at read_header_timeout from its first byte", function()
    local c = srv:connect()
    local head = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Slow: 1234567890\r\n\r\n"
    local _, closed, dt = H.trickle(c, head:sub(1, -2), { gap = 0.05, limit = 2 })
    assert.is_true(closed or c:closed_by_peer(1))
    assert.is_true(dt < 1.5, "slowloris lived " .. dt .. " s")
  end)

  it("closes an idle keep-alive connection at idle_timeout, not before", function()
    local c = srv:connect()
    assert(c:send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert.equal("hello", assert(c:read_response()).body)
    local t0 = H.now()
    assert.is_true(c:closed_by_peer(3))
    local dt = H.now() - t0
    assert.is_true(dt > 0.4 and dt < 1.5, "closed after " .. dt)
  end)

  it("cuts a response that takes longer than write_timeout", function()
    local c = srv:connect()
    assert(c:send("GET /sleep?s=1 HTTP/1.1\r\nHost: x\r\n\r\n"))
    local res = c:read_response()
    assert.is_nil(res)
  end)

  it("lets a handler extend its write deadline", function()
    local c = srv:connect()
    assert(c:send("GET /sleep-extended?s=0.6 HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert.equal("slept", assert(c:read_response()).body)
  end)

end)

describe("read_timeout", function()
  local srv
  setup(function()
    srv = H.start("spec/apps/limits.lua", { flags = { "--read-timeout", "0.4", "--write-timeout", "3" } })
  end)
  teardown(function() srv:stop() end)

  it("gives a handler 'timeout' when the body is late past read_timeout", function()
    local c = srv:connect()
    assert(c:send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345"))
    local res = assert(c:read_response())
    assert.equal(400, res.status)
    assert.equal("error: timeout", res.body)
    assert.is_true(c:closed_by_peer(1))
  end)

  it("lets a handler extend its read deadline", function()
    local c = srv:connect()
    assert(c:send("POST /patient HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345"))
    H.sleep(0.6)
    assert(c:send("67890"))
    local res = assert(c:read_response())
    assert.equal("1234567890", res.body)
  end)
end)

describe("limits", function()
  local srv
  setup(function()
    srv = H.start("spec/apps/limits.lua", { flags = {
      "--max-body-bytes", "10000", "--max-connections", "5", "--keepalive-requests", "3",
      "--write-timeout", "1" } })
  end)
  teardown(function() srv:stop() end)

  it("cuts a streamed chunked body over max_body_bytes with 413", function()
    local c = srv:connect()
    local chunk = string.format("%x\r\n%s\r\n", 4000, string.rep("y", 4000))
    assert(c:send("POST /stream-in HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      .. chunk .. chunk .. chunk .. "0\r\n\r\n"))
    local res = assert(c:read_response())
    assert.equal(413, res.status)
    assert.is_true(c:closed_by_peer(1))
  end)

  it("streams a body under the limit", function()
    local res = assert(srv:request("POST", "/stream-in", {}, string.rep("z", 9000)))
    assert.equal("9000", res.body)
  end)

  it("closes after keepalive_requests requests", function()
    local c = srv:connect()
    for i = 1, 3 do
      assert(c:send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"))
      local res = assert(c:read_response())
      assert.equal(i == 3 and "close" or nil, res.headers["connection"])
    end
    assert.is_true(c:closed_by_peer(1))
  end)

  it("pauses accepting at max_connections and resumes when one closes", function()
    local conns = {}
    for i = 1, 5 do
      conns[i] = srv:connect()
      assert(conns[i]:send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"))
      assert.equal("hello", assert(conns[i]:read_response()).body)
    end
    local extra = srv:connect()
    assert(extra:send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"))
    extra:settimeout(0.4)
    assert.is_nil(extra:read_response())
    conns[1]:close()
    extra:settimeout(3)
    assert.equal("hello", assert(extra:read_response()).body)
    for i = 2, 5 do conns[i]:close() end
    extra:close()
  end)

  it("keeps memory bounded for a client that stops reading, and cuts it at write_timeout", function()
    H.sleep(0.1)
    local before = rss_kb(srv.pid)
    local c = srv:connect()
    assert(c:send("GET /big?chunks=800 HTTP/1.1\r\nHost: x\r\n\r\n")) -- 50 MiB, never read
    H.sleep(0.5)
    local during = rss_kb(srv.pid)
    assert.is_true(during - before < 8 * 1024, "RSS grew by " .. (during - before) .. " KiB")
    H.sleep(1.0)
    assert.is_true(c:closed_by_peer(1))
    assert.truthy(srv:logtext():find("write timeout", 1, true))
  end)
end)

describe("graceful shutdown", function()
  it("finishes in-flight requests, closes idle ones, refuses new ones and exits 0", function()
    local srv = H.start("spec/apps/limits.lua")
    local idle = srv:connect()
    assert(idle:send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert(idle:read_response())
    local busy = {}
    for i = 1, 20 do
      busy[i] = srv:connect()
      assert(busy[i]:send("GET /sleep?s=0.5 HTTP/1.1\r\nHost: x\r\n\r\n"))
    end
    H.sleep(0.1)
    srv:signal("TERM")
    assert.is_true(idle:closed_by_peer(1), "idle connection not closed on SIGTERM")
    H.sleep(0.1)
    local ok = pcall(function() local c = srv:connect(0.5); c:send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"); assert(c:read_response()) end)
    assert.is_false(ok, "a new connection was served during shutdown")
    for i = 1, 20 do
      local res = assert(busy[i]:read_response())
      assert.equal("slept", res.body)
      assert.equal("close", res.headers["connection"])
    end
    assert.equal(0, srv:wait(5))
    srv.stopped = true
    H.check_sanitizers(srv:logtext(), "shutdown")
  end)

  it("completes every response it starts while under load", function()
    local srv = H.start("spec/apps/limits.lua")
    local conns, done, complete, broken = {}, 0, 0, 0
    for i = 1, 30 do conns[i] = srv:connect(2) end
    local t0 = H.now()
    local signalled = false
    while H.now() - t0 < 1.5 do
      for i = 1, 30 do
        local c = conns[i]
        if c and c:send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n") then
          local res = c:read_response()
          if res then
            if res.body == "hello" then complete = complete + 1 else broken = broken + 1 end
            if res.headers["connection"] == "close" then conns[i] = nil end
          else
            conns[i] = nil
          end
        else
          conns[i] = nil
        end
      end
      if not signalled and H.now() - t0 > 0.3 then srv:signal("TERM"); signalled = true end
      if not next(conns) then break end
    end
    assert.is_true(complete > 30)
    assert.equal(0, broken)
    assert.equal(0, srv:wait(5))
    srv.stopped = true
  end)

  it("gives up on stuck handlers after shutdown_timeout", function()
    local srv = H.start("spec/apps/limits.lua", { flags = { "--shutdown-timeout", "0.5", "--write-timeout", "0" } })
    local c = srv:connect()
    assert(c:send("GET /sleep?s=10 HTTP/1.1\r\nHost: x\r\n\r\n"))
    H.sleep(0.1)
    local t0 = H.now()
    srv:signal("TERM")
    assert.equal(0, srv:wait(5))
    srv.stopped = true
    assert.is_true(H.now() - t0 < 2)
    assert.is_true(c:closed_by_peer(1))
  end)
end)
