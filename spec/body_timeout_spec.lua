-- body_timeout (issue 29): a no-progress timeout on request bodies, as
-- nginx's client_body_timeout. A body still owed that brings no bytes for
-- body_timeout while the server waits for them ends its request: 408 and
-- close when no response has started, the connection (HTTP/1.1) or the
-- stream (HTTP/2) cut when one has. A slow but steady upload is never cut,
-- and a client held back by the server (a handler that does not read yet)
-- is not late. The specs use body_timeout = 1 s.
local H = require "helper"

local q, sh = H.shell_quote, H.sh
local PY = "/usr/bin/python3"
local FRAMES = debug.getinfo(1, "S").source:sub(2):gsub("body_timeout_spec%.lua$", "h2_frames.py")

local APP = [[
local http = require "moonhttp"
http.handle("GET /hello", function(req, res) res:write("hello") end)
-- waits for the whole body: after a stall it hears "timeout", and its error becomes the 408
http.handle("POST /echo", function(req, res)
  local body, err = req:body()
  if not body then http.log("info", "echo heard " .. err) end
  res:write(#assert(body, err))
end)
-- reads the body in pieces
http.handle("POST /stream", function(req, res)
  local n = 0
  while true do
    local data, err = req:read()
    if not data then
      if err then http.log("info", "stream heard " .. err) return end
      break
    end
    n = n + #data
  end
  res:write(n)
end)
-- answers first, then reads: the response is under way when the body stalls
http.handle("POST /answer-first", function(req, res)
  res:write("started"); res:flush()
  local body, err = req:body()
  http.log("info", "answer-first heard " .. tostring(err))
end)
-- does not read for a while (HTTP/2: the stream is reset meanwhile)
http.handle("POST /busy", function(req, res)
  http.sleep(3)
  local body, err = req:body()
  http.log("info", "busy heard " .. tostring(err))
end)
-- reads only after 2.5 s: until then the server does not take the client's bytes
http.handle("POST /late", function(req, res)
  http.sleep(2.5)
  local n = 0
  while true do
    local data, err = req:read()
    if not data then
      if err then http.log("info", "late heard " .. err) return end
      break
    end
    n = n + #data
  end
  res:write(n)
end)
]]

local function head(path, framing)
  return "POST " .. path .. " HTTP/1.1\r\nHost: x\r\n" .. framing .. "\r\n"
end
local CL = function(n) return "Content-Length: " .. n .. "\r\n" end
local CHUNKED = "Transfer-Encoding: chunked\r\n"

-- Waits up to `timeout` s for `text` in the server's log.
local function log_has(srv, text, timeout)
  local deadline = H.now() + (timeout or 2)
  repeat
    if srv:logtext():find(text, 1, true) then return true end
    H.sleep(0.05)
  until H.now() > deadline
  return false
end

local function frames(srv, scenario)
  local out, ok = sh(string.format("timeout 20 %s %s %s %d", PY, q(FRAMES), scenario, srv.port))
  assert(ok, out)
  local kv = {}
  for k, v in out:gmatch("([^\n=]+)=([^\n]*)") do kv[k] = v end
  return kv, out
end

describe("body_timeout", function()
  local srv
  setup(function()
    srv = H.start(H.script(APP), { flags = { "--body-timeout", "1" } })
  end)
  teardown(function() srv:stop() end)

  -- { what, request bytes (the body never completes), what the handler heard }
  local stalled = {
    { "a Content-Length body stalled after 2 bytes", head("/echo", CL(100000)) .. "ab",
      "echo heard timeout" },
    { "a Content-Length body that never starts", head("/echo", CL(10)), "echo heard timeout" },
    { "a chunked body stalled inside a chunk", head("/echo", CHUNKED) .. "5\r\nab",
      "echo heard timeout" },
    { "a chunked body stalled between chunks, read in pieces",
      head("/stream", CHUNKED) .. "2\r\nab\r\n", "stream heard timeout" },
  }

  it("answers 408 and closes within body_timeout when a body stalls", function()
    -- all rows at once: each is cut 1 s after its last byte
    local conns, t0 = {}, H.now()
    for i, row in ipairs(stalled) do
      conns[i] = srv:connect()
      assert(conns[i]:send(row[2]))
    end
    for i, row in ipairs(stalled) do
      local res = assert(conns[i]:read_response(), row[1])
      local dt = H.now() - t0
      assert.equal(408, res.status, row[1])
      assert.equal("close", res.headers["connection"], row[1])
      assert.truthy(res.body:find("request body stopped coming", 1, true), row[1])
      assert.is_true(dt > 0.8 and dt < 1.8, row[1] .. ": answered after " .. dt .. " s")
      assert.is_true(conns[i]:closed_by_peer(2), row[1] .. ": still open")
      conns[i]:close()
    end
    local log = srv:logtext()
    for _, row in ipairs(stalled) do
      assert.truthy(log:find(row[3], 1, true), row[1] .. "\n" .. log)
    end
    assert.truthy(log:find("body timeout: no request body bytes for 1 s (2 received); 408", 1, true), log)
    assert.falsy(log:find("[error]", 1, true), log) -- the client's fault, not the server's
    assert.equal("hello", assert(srv:get("/hello")).body)
  end)

  it("closes the connection when the response is under way", function()
    local c = srv:connect()
    local t0 = H.now()
    assert(c:send(head("/answer-first", CL(1000)) .. "abc"))
    assert.equal("HTTP/1.1 200 OK", c:read_line())
    assert.is_true(c:closed_by_peer(3))
    local dt = H.now() - t0
    assert.is_true(dt > 0.8 and dt < 1.8, "closed after " .. dt .. " s")
    assert.truthy(log_has(srv, "answer-first heard timeout"), srv:logtext())
    assert.truthy(srv:logtext():find("(3 received); response under way: closing", 1, true))
  end)

  it("never cuts a slow but steady upload", function()
    local len, chunked = srv:connect(), srv:connect()
    assert(len:send(head("/echo", CL(6))))
    assert(chunked:send(head("/stream", CHUNKED)))
    for _ = 1, 6 do -- one byte every 0.5 s: 3 s in all
      H.sleep(0.5)
      assert(len:send("x"))
      assert(chunked:send("1\r\ny\r\n"))
    end
    assert(chunked:send("0\r\n\r\n"))
    local res = assert(len:read_response())
    assert.equal(200, res.status)
    assert.equal("6", res.body)
    res = assert(chunked:read_response())
    assert.equal(200, res.status)
    assert.equal("6", res.body)
    len:close(); chunked:close()
  end)

  it("does not count the time the handler is not reading (the server holds the client back)", function()
    -- /late reads 2.5 s from now; its body comes at 2 s, twice body_timeout
    local late = srv:connect()
    assert(late:send(head("/late", CL(10))))
    H.sleep(2)
    assert(late:send("0123456789"))
    local res = assert(late:read_response())
    assert.equal(200, res.status)
    assert.equal("10", res.body)
    late:close()
  end)

  it("HTTP/2: resets a stalled stream while the connection's other streams go on", function()
    local kv, out = frames(srv, "body_stall")
    -- stream 1 waited in req:body(): 408, then RST_STREAM NO_ERROR for the side left open
    assert.equal("408", kv["status.1"], out)
    assert.equal("NO_ERROR", kv["rst.1"], out)
    -- stream 3's handler was not reading: the stream is reset
    assert.equal("CANCEL", kv["rst.3"], out)
    assert.is_nil(kv["status.3"], out)
    -- stream 5 sent a byte every 0.4 s for 2.4 s; stream 7 came after the cuts
    assert.equal("200", kv["status.5"], out)
    assert.equal("6", kv["body.5"], out)
    assert.equal("hello", kv["body.7"], out)
    assert.is_nil(kv.goaway, out)
    for _, key in ipairs({ "at.status.1", "at.rst.3" }) do
      local at = tonumber(kv[key])
      assert.is_true(at and at > 0.8 and at < 1.8, key .. " " .. tostring(kv[key]))
    end
    assert.truthy(log_has(srv, "busy heard timeout", 3), srv:logtext())
    local log = srv:logtext()
    assert.truthy(log:find("stream 1: body timeout: no request body bytes for 1 s (2 received); 408",
      1, true), log)
    assert.truthy(log:find("stream 3: body timeout: no request body bytes for 1 s (2 received); " ..
      "RST_STREAM", 1, true), log)
  end)

  it("HTTP/2: a client held back by flow control is not late", function()
    -- the handler reads 2.5 s after the client filled the stream's window
    local kv, out = frames(srv, "body_window")
    assert.equal("200", kv["status.1"], out)
    assert.equal("65545", kv["body.1"], out)
    assert.is_nil(kv["rst.1"], out)
  end)
end)

describe("body_timeout settings", function()
  it("is on by default (60 s) and listed in --help", function()
    local _, help = H.run({ "--help" })
    assert.truthy(help:find("%-%-body%-timeout[^\n]*%(default 60s%)"), help)
  end)

  it("rejects a bad value", function()
    local script = H.script(APP)
    local code, out = H.run({ "--body-timeout", "-1", "--check", script })
    assert.equal(2, code)
    assert.truthy(out:find("body_timeout: -1 is out of range", 1, true), out)
    code, out = H.run({ "--body-timeout", "soon", "--check", script })
    assert.equal(2, code)
    assert.truthy(out:find('body_timeout: "soon" is not a duration', 1, true), out)
  end)

  it("0 turns it off", function()
    local srv = H.start(H.script(APP), { flags = { "--body-timeout", "0" } })
    finally(function() srv:stop() end)
    local c = srv:connect(1.6)
    assert(c:send(head("/echo", CL(10)) .. "ab"))
    local res, err = c:read_response()
    assert.is_nil(res)
    assert.equal("timeout", err) -- ours: the server still waits
    assert(c:send("cdefghij"))
    c:settimeout(3)
    assert.equal("10", assert(c:read_response()).body)
  end)
end)
