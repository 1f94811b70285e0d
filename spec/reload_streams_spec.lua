-- SIGHUP and the long-lived requests of the old code without a drain
-- window (drain_timeout 0, drain_spread 0; spec/drain_spec.lua has the
-- window): WebSockets are closed with 1001 and streams hear "stopping" at
-- once, with one worker (the generation is swapped in place) as with several
-- (old workers stop); the new code serves on.
local H = require "helper"
local W = require "helpers.ws"
local O = require "ops_helper"
local socket = require "socket"

local KEY = "dGhlIHNhbXBsZSBub25jZQ=="
local NO_DRAIN = { "--drain-timeout", "0", "--drain-spread", "0" }

-- VERSION is rewritten on disk before each SIGHUP.
local APP = [[
local http = require "moonhttp"
local VERSION = "%s"
http.handle("GET /ws", function(req, res)
  local ws = assert(req:websocket())
  ws:send(VERSION)
  while true do
    local data, kind = ws:receive()
    if not data then
      http.log("info", ("ws %%s ended: %%s, stopping=%%s"):format(VERSION, kind, http.stopping()))
      return
    end
    ws:send(VERSION .. ":" .. data)
  end
end)
http.handle("GET /sse", function(req, res)
  res:header("Content-Type", "text/event-stream")
  res:write("data: " .. VERSION .. "\n\n")
  local ok, err = http.sleep(30) -- only a stop or a reload ends it early
  http.log("info", ("sse %%s ended: %%s %%s, stopping=%%s"):format(VERSION, ok, err, http.stopping()))
end)
-- an SSE feed waiting on a subscription that never publishes (a TCP peer that never writes)
http.handle("GET /feed", function(req, res)
  local s = http.tcp()
  assert(s:connect("127.0.0.1", tonumber(req:arg("port"))))
  res:header("Content-Type", "text/event-stream")
  res:write("data: " .. VERSION .. "\n\n") -- sent before the read waits (the flush rule)
  local line, err = s:receive()
  http.log("info", ("feed %%s ended: %%s %%s"):format(VERSION, line, err))
  s:close()
end)
http.handle("GET /stopping", function(req, res) res:write(VERSION, " ", tostring(http.stopping())) end)
]]

local function write_app(path, version)
  H.write_file(path, APP:format(version))
end

local frame, read_frame = W.frame, W.read_frame

-- A WebSocket on /ws; returns the connection and the server's first message (its VERSION).
local function open_ws(srv)
  local c = srv:connect(3)
  c:send("GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" ..
    "Sec-WebSocket-Key: " .. KEY .. "\r\nSec-WebSocket-Version: 13\r\n\r\n")
  assert.equal(101, assert(c:read_response()).status)
  local f = assert(read_frame(c))
  return c, f.payload
end

-- An SSE stream on /sse, read up to its first event.
local function open_sse(srv, version)
  local c = srv:connect(3)
  c:send("GET /sse HTTP/1.1\r\nHost: a\r\n\r\n")
  assert.equal(200, assert(c:read_response({ head = true })).status)
  while not c.buf:find("data: " .. version, 1, true) do assert(c:fill(), c.err) end
  return c
end

-- An SSE stream on /feed, its handler waiting on a socket to `peer` (a listening luasocket).
local function open_feed(srv, version, peer)
  local c = srv:connect(3)
  c:send(("GET /feed?port=%d HTTP/1.1\r\nHost: a\r\n\r\n"):format(select(2, peer:getsockname())))
  assert.equal(200, assert(c:read_response({ head = true })).status)
  while not c.buf:find("data: " .. version, 1, true) do assert(c:fill(), c.err) end
  return c
end

-- Seconds until the chunked stream on c ends (its last chunk), or nil after `limit`.
local function stream_end(c, t0, limit)
  c.timeout = limit
  while not c.buf:find("\r\n0\r\n\r\n", 1, true) do
    if not c:fill() then return nil end
  end
  return H.now() - t0
end

local function reload_to(srv, path, version)
  write_app(path, version)
  local t0 = H.now()
  srv:signal("HUP")
  return t0
end

local function new_code_serves(srv, version)
  return O.wait_for(function()
    local res = srv:try_get("/stopping")
    return res == version .. " false"
  end, 5)
end

describe("SIGHUP with one worker", function()
  local srv, path
  before_each(function()
    path = H.tmpname("-app.lua")
    write_app(path, "v1")
    srv = H.start(path, { flags = NO_DRAIN })
  end)
  after_each(function()
    assert.equal(0, srv:stop())
    os.remove(path)
  end)

  it("closes the old code's WebSockets with 1001 within 1 s; a new one gets the new code", function()
    local c, first = open_ws(srv)
    assert.equal("v1", first)
    assert.equal("v1 false", srv:try_get("/stopping"))
    local t0 = reload_to(srv, path, "v2")
    c.timeout = 1
    local f = read_frame(c)
    local took = H.now() - t0
    assert.truthy(f, "no close frame within 1 s")
    assert.equal(8, f.op)
    assert.equal(1001, (string.unpack(">I2", f.payload)))
    assert.truthy(took < 1, took)
    print(string.format("one worker: close 1001 after %.3f s", took))
    c:send(frame(8, string.pack(">I2", 1001)))
    assert.truthy(c:closed_by_peer(2))
    c:close()
    -- the old handler's receive ended, and it saw http.stopping() true
    assert.truthy(O.wait_for(function()
      return srv:logtext():find("ws v1 ended: closed, stopping=true", 1, true)
    end, 2), srv:logtext())
    -- the new code: a new socket, untouched by the old one's retirement
    assert.truthy(new_code_serves(srv, "v2"))
    local n, second = open_ws(srv)
    assert.equal("v2", second)
    n:send(frame(1, "hi"))
    assert.equal("v2:hi", read_frame(n).payload)
    n:close()
  end)

  it("ends the old code's SSE streams within 1 s (their wait returns nil, \"stopping\")", function()
    local c = open_sse(srv, "v1")
    local t0 = reload_to(srv, path, "v2")
    local took = stream_end(c, t0, 1)
    c:close()
    assert.truthy(took and took < 1, took or "the stream did not end within 1 s")
    print(string.format("one worker: SSE stream ended after %.3f s", took))
    assert.truthy(O.wait_for(function()
      return srv:logtext():find("sse v1 ended: nil stopping, stopping=true", 1, true)
    end, 2), srv:logtext())
    -- a stream on the new code is not ended by that
    assert.truthy(new_code_serves(srv, "v2"))
    local n = open_sse(srv, "v2")
    assert.is_nil(stream_end(n, H.now(), 0.5))
    n:close()
  end)

  it("wakes the old code's stream waiting on a socket with nil, \"stopping\" within 1 s", function()
    local peer = assert(socket.bind("127.0.0.1", 0))
    local c = open_feed(srv, "v1", peer)
    local t0 = reload_to(srv, path, "v2")
    local took = stream_end(c, t0, 1)
    c:close()
    assert.truthy(took and took < 1, took or "the stream did not end within 1 s")
    assert.truthy(O.wait_for(function()
      return srv:logtext():find("feed v1 ended: nil stopping", 1, true)
    end, 2), srv:logtext())
    -- the socket was left usable: the new code's feed waits on the same kind of socket
    assert.truthy(new_code_serves(srv, "v2"))
    local n = open_feed(srv, "v2", peer)
    assert.is_nil(stream_end(n, H.now(), 0.5))
    n:close()
    peer:close()
  end)

  it("keeps the sockets open when a reload fails (the code is not retired)", function()
    write_app(path, "v2")
    srv:signal("HUP")
    assert.truthy(new_code_serves(srv, "v2"))
    local c, first = open_ws(srv)
    assert.equal("v2", first)
    -- a reload that fails keeps the code, and its sockets
    H.write_file(path, "syntax error here")
    srv:signal("HUP")
    assert.truthy(O.wait_for(function()
      return srv:logtext():find("reload (SIGHUP) failed", 1, true)
    end, 2))
    c:send(frame(1, "still"))
    c.timeout = 2
    assert.equal("v2:still", read_frame(c).payload)
    c:close()
  end)
end)

describe("a stop", function()
  -- Rows: the signal, its flags, when the stream may end. SIGTERM first drains
  -- (shutdown_timeout 0.5 s here; before the drain on stop it ended at once),
  -- SIGINT stops at once; either way the stop does not wait for the socket.
  for _, row in ipairs({
    { "TERM", { "--shutdown-timeout", "0.5", "--drain-spread", "0" }, 0.45, 1.5 },
    { "INT", { "--shutdown-timeout", "5" }, 0, 1 },
  }) do
    local sig, flags, from, upto = row[1], row[2], row[3], row[4]
    it(("SIG%s wakes a stream waiting on a socket with nil, \"stopping\" after %g s"):format(sig, from), function()
      local path = H.tmpname("-app.lua")
      write_app(path, "v1")
      local srv = H.start(path, { flags = flags })
      local peer = assert(socket.bind("127.0.0.1", 0))
      local c = open_feed(srv, "v1", peer)
      local t0 = H.now()
      srv:signal(sig)
      local took = stream_end(c, t0, upto)
      assert.truthy(took and took >= from, "the stream ended after " .. tostring(took) .. " s")
      c:close()
      assert.equal(0, srv:wait(2))
      srv.stopped = true
      assert.truthy(H.now() - t0 < upto + 1, H.now() - t0)
      assert.truthy(srv:logtext():find("feed v1 ended: nil stopping", 1, true), srv:logtext())
      H.check_sanitizers(srv:logtext(), "stop")
      peer:close()
      os.remove(path)
    end)
  end
end)

describe("SIGHUP with two workers", function()
  it("still closes the old workers' WebSockets with 1001 and ends their streams", function()
    local path = H.tmpname("-app.lua")
    write_app(path, "v1")
    local srv = H.start(path, { flags = { "--workers", "2", table.unpack(NO_DRAIN) } })
    assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    local c, first = open_ws(srv)
    assert.equal("v1", first)
    local s = open_sse(srv, "v1")
    local t0 = reload_to(srv, path, "v2")
    -- new workers start before the old ones stop: allow for that on a busy machine
    c.timeout = 3
    local f = read_frame(c)
    assert.truthy(f, "no close frame within 3 s")
    assert.equal(1001, (string.unpack(">I2", f.payload)))
    print(string.format("two workers: close 1001 after %.2f s", H.now() - t0))
    c:close()
    assert.truthy(stream_end(s, t0, 3))
    s:close()
    assert.truthy(new_code_serves(srv, "v2"))
    local n, second = open_ws(srv)
    assert.equal("v2", second)
    n:close()
    assert.equal(0, srv:stop())
    os.remove(path)
  end)
end)
