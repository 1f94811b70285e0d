-- The flush rule (docs/guide/handlers.md): what a handler wrote before it
-- waits is sent before it waits, whatever it waits for. Each row's handler
-- writes its first event and then waits (a channel's receive, a
-- moonhttp.waiter); the client must read that event BEFORE it sends the
-- request that wakes the handler, over HTTP/1.1 (a raw socket) and HTTP/2
-- (spec/h2_frames.py's client, both requests on one connection). Writes
-- within one run of a handler still go out as one Content-Length response.
local H = require "helper"

local q, sh = H.shell_quote, H.sh
local PY = "/usr/bin/python3"
local FRAMES = debug.getinfo(1, "S").source:sub(2):gsub("flush_wait_spec%.lua$", "h2_frames.py")

local APP = [[
local http = require "moonhttp"
local waiter = require "moonhttp.waiter"
local waiting = {}
http.handle("GET /sse", function(req, res)
  local sub = http.channel(req:arg("ch")):subscribe()
  res:header("Content-Type", "text/event-stream")
  res:write("data: first\n\n")
  res:write("data: " .. tostring(sub:receive()) .. "\n\n")
end)
http.handle("GET /pub", function(req, res)
  res:write(tostring(http.channel(req:arg("ch")):publish(req:arg("m"))))
end)
http.handle("GET /waiter", function(req, res)
  local w = waiter.new()
  waiting[req:arg("id")] = w
  res:write("data: first\n\n")
  res:write("data: " .. tostring(w:wait()) .. "\n\n")
end)
http.handle("GET /wake", function(req, res)
  local w = waiting[req:arg("id")]
  res:write(tostring(w and w:wake(req:arg("m"))))
end)
-- no wait: one run, one response with a length
http.handle("GET /nowait", function(req, res)
  res:write("a")
  res:write("b")
end)
-- a wait before any write leaves the head open to status and headers
http.handle("GET /wait_first", function(req, res)
  http.sleep(0.01)
  res:status(201)
  res:header("X-After", "wait")
  res:write("ab")
end)
]]

-- Reads from c until its buffer holds `text`; true when it did within c's timeout per read.
local function read_until(c, text)
  while not c.buf:find(text, 1, true) do
    if not c:fill() then return false end
  end
  return true
end

-- HTTP/1.1: the stream's head and first event, then the wake, then the second event.
local function over_h1(srv, row)
  local c = srv:connect(3)
  assert(c:send("GET " .. row.stream .. " HTTP/1.1\r\nHost: a\r\n\r\n"))
  local saw_first = read_until(c, "data: first")
  local got = { first_before_wake = saw_first, head = c.buf:match("^(.-)\r\n\r\n") or c.buf }
  -- the wake only now: the first event cannot have been pushed out by it
  got.wake = srv:get(row.wake).body
  got.second = read_until(c, "data: second")
  c:close()
  return got
end

-- HTTP/2: spec/h2_frames.py's stream_then_wake scenario (stream 1 the stream, stream 3 the wake).
local function over_h2(srv, row)
  local out, ok = sh(string.format("H2_STREAM=%s H2_WAKE=%s timeout 20 %s %s stream_then_wake %d",
    q(row.stream), q(row.wake), PY, q(FRAMES), srv.port))
  assert(ok, out)
  local kv = {}
  for k, v in out:gmatch("([^\n=]+)=([^\n]*)") do kv[k] = v end
  return { first_before_wake = kv.first_before_wake == "1", wake = kv["body.3"],
           second = (kv["body.1"] or ""):find("data: second", 1, true) ~= nil,
           status = kv["status.1"] }
end

describe("output written before a handler waits", function()
  local srv
  setup(function() srv = H.start(APP) end)
  teardown(function() if srv then srv:stop() end end)

  -- { name, protocol, the streaming request, the request that wakes its handler }
  local rows = {
    { "SSE waiting in a channel's receive, HTTP/1.1", "h1", "/sse?ch=a", "/pub?ch=a&m=second" },
    { "chunked stream waiting on a moonhttp.waiter, HTTP/1.1", "h1", "/waiter?id=a",
      "/wake?id=a&m=second" },
    { "HTTP/2 stream waiting in a channel's receive", "h2", "/sse?ch=b", "/pub?ch=b&m=second" },
    { "HTTP/2 stream waiting on a moonhttp.waiter", "h2", "/waiter?id=b", "/wake?id=b&m=second" },
  }
  for _, row in ipairs(rows) do
    it("is sent before it waits: " .. row[1], function()
      local r = { stream = row[3], wake = row[4] }
      local got = (row[2] == "h2" and over_h2 or over_h1)(srv, r)
      assert.is_true(got.first_before_wake, "the first event came only after the wake")
      -- the wake reached the waiting handler: 1 subscriber, or the waiter's true
      assert.is_truthy(got.wake == "1" or got.wake == "true", tostring(got.wake))
      assert.is_true(got.second)
      if row[2] == "h1" then
        assert.matches("\r\nTransfer%-Encoding: chunked", got.head)
      else
        assert.equal("200", got.status)
      end
    end)
  end

  -- { path, status, what the head must say }: writes in one run batch; a wait with nothing written sends nothing
  local batched = {
    { "/nowait", 200, { ["content-length"] = "2" } },
    { "/wait_first", 201, { ["content-length"] = "2", ["x-after"] = "wait" } },
  }
  for _, row in ipairs(batched) do
    it("is one response with a length when nothing was written before a wait: " .. row[1], function()
      local res, err = srv:get(row[1])
      assert(res, "no complete response: " .. tostring(err))
      assert.equal(row[2], res.status)
      assert.equal("ab", res.body)
      assert.is_nil(res.headers["transfer-encoding"])
      for k, v in pairs(row[3]) do assert.equal(v, res.headers[k]) end
    end)
  end
end)
