-- http.proxy's bodies moved in C (src/lua/lua_proxy_body.c: core.proxy_upload,
-- core.proxy_relay) through the real binary: 1 GiB down and 1 GiB up with the
-- proxy's resident memory bounded, back-pressure both ways (a client that
-- stops reading, an upstream that reads slowly), trailers passed down, an
-- upstream that ends mid-body (the client sees the cut, never a complete
-- response) and a client that leaves mid-upload (the upstream's connection
-- is closed, not pooled). The proxy routes have no hooks: the plain path.
local H = require "helper"
local socket = require "socket"
local cjson = require "cjson"

local UPSTREAM = [[
local http = require "moonhttp"
http.server{ shared = { ev = "64k" } }
local ev = http.shared.ev
local PIECE = string.rep("x", 65536)
http.handle("GET /p/big", function(req, res)
  local n = tonumber(req:args().n)
  res:header("Content-Length", tostring(n))
  while n > 0 do
    local piece = n >= #PIECE and PIECE or PIECE:sub(1, n)
    ev:incr("written", #piece, 0)
    if not res:write(piece) then return end
    n = n - #piece
  end
end)
http.handle("POST /p/sink", function(req, res)
  local n, delay = 0, tonumber(req:args().delay or "0")
  while true do
    local piece, err = req:read(65536)
    if not piece then
      if err then ev:set("sink_error", err) end
      break
    end
    n = n + #piece
    if delay > 0 then http.sleep(delay) end
  end
  ev:set("sink_length", n)
  res:json({ length = n })
end, { max_body = "2g" })
http.handle("GET /p/ev", function(req, res)
  res:json({ written = ev:get("written") or 0, sink_error = ev:get("sink_error") or "",
    sink_length = ev:get("sink_length") or -1 })
end)
http.handle("GET /p/reset_ev", function(req, res)
  ev:flush_all()
  res:write("ok")
end)
]]

local FRONT = [[
local http = require "moonhttp"
local UP, RAW = %q, %q
http.handle("/p/", function(req, res)
  return http.proxy(req, res, UP)
end, { max_body = "2g" })
for _, path in ipairs({ "/interim", "/rst", "/chunkcut" }) do -- spec/servers/upstream.lua's
  http.handle("GET " .. path, function(req, res) return http.proxy(req, res, RAW) end)
end
http.handle("GET /stats", function(req, res) res:json(http.client_stats()) end)
]]

local GiB = 1024 * 1024 * 1024

-- A plain luasocket connection (its receive reads to the end or to a count).
local function connect(port, timeout)
  local c = socket.tcp()
  c:settimeout(timeout)
  assert(c:connect("127.0.0.1", port))
  return c
end

local function rss_kb(pid)
  local s = H.read_file("/proc/" .. pid .. "/status") or ""
  return tonumber(s:match("VmRSS:%s*(%d+)")) or 0
end

-- Runs cmd in the background while sampling pid's VmRSS every 50 ms; returns the
-- command's output and the largest sample.
local function sampled(pid, cmd)
  local out = os.tmpname()
  local done = os.tmpname()
  os.remove(done)
  os.execute(string.format("(%s >%s 2>&1; touch %s) &", cmd, out, done))
  local peak = 0
  while not H.read_file(done) do
    peak = math.max(peak, rss_kb(pid))
    socket.sleep(0.05)
  end
  local text = H.read_file(out)
  os.remove(out)
  os.remove(done)
  return text, peak
end

describe("http.proxy's bodies in C", function()
  local up, raw, front
  setup(function()
    up = H.start(UPSTREAM)
    raw = H.upstream()
    front = H.start(string.format(FRONT, "http://127.0.0.1:" .. up.port, raw.base))
  end)
  teardown(function()
    if front then front:stop() end
    if up then up:stop() end
    if raw then raw:stop() end
  end)

  local function warm()
    -- the pool, the buffers and the Lua state reach their working size first
    for _ = 1, 3 do
      H.must(string.format("curl -sf -o /dev/null 'http://127.0.0.1:%d/p/big?n=%d'", front.port, 8 * 1024 * 1024))
      H.must(string.format("head -c %d /dev/zero | curl -sf -o /dev/null -X POST -T - 'http://127.0.0.1:%d/p/sink'",
        8 * 1024 * 1024, front.port))
    end
  end

  it("streams 1 GiB down and 1 GiB up with the proxy's memory growing less than 1 MiB", function()
    warm()
    -- ASan's quarantine and shadow pages move RSS by about 100 KiB more here
    -- (1,068-1,124 KiB seen): 4 MiB under it, still far below the +989 MiB of
    -- a relay that does not pause.
    local bound = H.sanitized(front.pid) and 4096 or 1024
    local before = rss_kb(front.pid)
    local text, peak = sampled(front.pid, string.format(
      "curl -s -o /dev/null -w '%%{http_code} %%{size_download}' --max-time 300 'http://127.0.0.1:%d/p/big?n=%d'",
      front.port, GiB))
    assert.equal("200 " .. GiB, text)
    assert.is_true(peak - before < bound, "RSS grew " .. (peak - before) .. " KiB downloading")
    text, peak = sampled(front.pid, string.format(
      "head -c %d /dev/zero | curl -s -X POST -T - --max-time 300 'http://127.0.0.1:%d/p/sink'", GiB, front.port))
    assert.same({ length = GiB }, cjson.decode(text))
    assert.is_true(peak - before < bound, "RSS grew " .. (peak - before) .. " KiB uploading")
  end)

  it("reads the upstream no faster than a client that stops reading", function()
    front:get("/p/reset_ev")
    local c = connect(front.port, 10)
    assert(c:send("GET /p/big?n=" .. 512 * 1024 * 1024 .. " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
    socket.sleep(1.5)
    -- the response's high-water mark and the sockets' buffers (loopback's grow to a few
    -- MiB each) hold tens of MiB at most, not 512
    local written = cjson.decode(front:get("/p/ev").body).written
    assert.is_true(written < 64 * 1024 * 1024, written .. " bytes written upstream with the client stalled")
    local got = 0
    while true do
      local data, err, partial = c:receive(65536)
      got = got + #(data or partial or "")
      if err then break end
    end
    c:close()
    assert.is_true(got > 512 * 1024 * 1024, "got " .. got)
  end)

  it("holds the client's upload back while the upstream reads slowly", function()
    local before = rss_kb(front.pid)
    local text, peak = sampled(front.pid, string.format(
      "head -c %d /dev/zero | curl -s -X POST -T - --max-time 60 'http://127.0.0.1:%d/p/sink?delay=0.01'",
      64 * 1024 * 1024, front.port))
    assert.same({ length = 64 * 1024 * 1024 }, cjson.decode(text))
    assert.is_true(peak - before < 1024, "RSS grew " .. (peak - before) .. " KiB")
  end)

  it("passes the upstream's trailers down", function()
    local c = connect(front.port, 5)
    assert(c:send("GET /interim HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
    local text = c:receive("*a")
    c:close()
    assert.truthy(text:match("^HTTP/1.1 200"), text)
    assert.truthy(text:find("5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r\n", 1, true), text)
  end)

  -- spec/servers/upstream.lua: 4 of 1,000 announced bytes, then a reset (/rst); a chunked
  -- body closed after its first chunk (/chunkcut). Each waits 50 ms before it ends, so the
  -- proxy has sent the head by then (an end that comes with the head is a 502).
  for _, case in ipairs({ "/rst", "/chunkcut" }) do
    it("cuts the client's response when the upstream fails mid-body (" .. case .. ")", function()
      local c = connect(front.port, 5)
      assert(c:send("GET " .. case .. " HTTP/1.1\r\nHost: x\r\n\r\n"))
      local data, _, partial = c:receive("*a")
      c:close()
      local text = data or partial
      local head, body = text:match("^(.-\r\n)\r\n(.*)$")
      assert.truthy(head:match("^HTTP/1.1 200"), text)
      -- never a complete response: short of its length, or without the last chunk
      local cl = tonumber(head:match("\r\nContent%-Length: (%d+)"))
      if cl then
        assert.is_true(#body < cl, text)
      else
        assert.truthy(head:find("Transfer-Encoding: chunked", 1, true), text)
        assert.falsy(body:find("0\r\n\r\n", 1, true), text)
      end
    end)
  end

  -- SIGINT: the stop without a drain (SIGTERM's drain serves streams on for shutdown_timeout)
  it("ends a relayed body at a stop instead of holding the stop for shutdown_timeout", function()
    local f2 = H.start(string.format(FRONT, "http://127.0.0.1:" .. up.port, raw.base))
    local c = connect(f2.port, 5)
    assert(c:send("GET /p/big?n=" .. 1024 * 1024 * 1024 .. " HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert(c:receive(65536))
    local t0 = socket.gettime()
    f2:signal("INT")
    -- a slow reader (6.4 MB/s): the relay is under way, held back now and then
    local cut = false
    while socket.gettime() - t0 < 8 do
      local _, err = c:receive(65536)
      if err == "closed" then cut = true break end
      socket.sleep(0.01)
    end
    local status = f2:wait(8)
    local took = socket.gettime() - t0
    c:close()
    assert.is_true(cut, "the client's stream was not ended")
    f2:stop()
    assert.equal(0, status)
    assert.is_true(took < 5, "the stop took " .. took .. " s") -- shutdown_timeout is 10 s
  end)

  it("closes the upstream's connection, not pools it, when the client leaves mid-upload", function()
    front:get("/p/reset_ev")
    -- the upload below takes this idle connection
    local idle_before = cjson.decode(front:get("/stats").body).idle
    local c = connect(front.port, 5)
    assert(c:send("POST /p/sink HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n"
      .. string.rep("u", 1000000)))
    socket.sleep(0.3)
    c:close()
    local deadline = socket.gettime() + 5
    local ev
    repeat
      socket.sleep(0.1)
      ev = cjson.decode(up:get("/p/ev").body)
    until ev.sink_error ~= "" or socket.gettime() > deadline
    assert.equal("connection closed", ev.sink_error)
    assert.is_true(ev.sink_length < 10000000)
    local stats = cjson.decode(front:get("/stats").body)
    assert.equal(idle_before - 1, stats.idle)
    assert.equal(0, stats.in_use)
  end)
end)
