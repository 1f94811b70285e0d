-- At the file-descriptor limit: every accepted connection is served or
-- answered 503 with Connection: close, none is closed unanswered, and the
-- log says so once per episode, with counts (net/listener.c, shed()).
local H = require "helper"

-- The server runs under prlimit with this many descriptors, soft and hard.
local LIMIT = 128

local APP = [[
local http = require "moonhttp"
local held = {}
http.handle("GET /hello", function(req, res) res:write("hello") end)
-- Opens files until the process has none left, and keeps them: the next
-- accept() then fails with EMFILE and only the reserve descriptor can answer.
http.handle("GET /hog", function(req, res)
  while true do
    local f = io.open("/dev/null")
    if not f then break end
    held[#held + 1] = f
  end
  res:write(#held)
end)
http.handle("GET /free", function(req, res)
  for i = #held, 1, -1 do held[i]:close(); held[i] = nil end
  res:write("freed")
end)
]]

local function count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

-- Opens n connections, each sending one GET, and reads every answer.
-- Returns the count per status, and how many closed with no answer.
local function flood(srv, n)
  local conns, got = {}, { [200] = 0, [503] = 0, none = 0, other = 0 }
  for i = 1, n do
    local c = srv:connect(3)
    conns[i] = c
    c:send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
  end
  for _, c in ipairs(conns) do
    local res = c:read_response()
    if not res then
      got.none = got.none + 1
    elseif res.status == 503 then
      assert.equal("close", res.headers["connection"])
      assert.equal("1", res.headers["retry-after"])
      assert.equal("server out of file descriptors; try again\n", res.body)
      -- typed and sized as every body the server writes (http/req_policy.c)
      assert.equal("text/plain; charset=utf-8", res.headers["content-type"])
      assert.equal(tostring(#res.body), res.headers["content-length"])
      assert.equal("moonhttp", res.headers["server"])
      assert.is_true(c:closed_by_peer(2), "a 503 connection stayed open")
      got[503] = got[503] + 1
    else
      got[res.status] = (got[res.status] or 0) + 1
    end
  end
  return conns, got
end

local function close_all(conns)
  for _, c in ipairs(conns) do c:close() end
end

describe("at the file descriptor limit", function()
  local srv
  setup(function()
    srv = H.start(APP, { env = "prlimit --nofile=" .. LIMIT .. ":" .. LIMIT })
  end)
  teardown(function() srv:stop() end)

  it("serves what it can and answers every other connection 503, logging once", function()
    local conns, got = flood(srv, 2 * LIMIT)
    assert.equal(0, got.none, "connections closed with no answer")
    assert.equal(0, got.other)
    assert.is_true(got[200] > 0 and got[200] < LIMIT, got[200] .. " served")
    assert.equal(2 * LIMIT, got[200] + got[503])
    close_all(conns)
    local shed = srv:wait_log("available again after [%d.]+ s; (%d+) connection%(s%) answered 503", 5)
    assert.equal(got[503], tonumber(shed))
    assert.equal(1, count(srv:logtext(), "out of file descriptors"))
    assert.equal(200, srv:get("/hello").status)
  end)

  it("answers 503 on the reserve descriptor when handlers hold every descriptor", function()
    local keep = srv:connect()
    assert(keep:send("GET /hog HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert.equal(200, assert(keep:read_response()).status)
    local before = count(srv:logtext(), "out of file descriptors")
    local conns, got = flood(srv, 8)
    assert.equal(0, got.none, "connections closed with no answer")
    assert.equal(8, got[503])
    close_all(conns)
    assert.equal(before + 1, count(srv:logtext(), "out of file descriptors"), srv:logtext())
    local shed = srv:wait_log("available again after [%d.]+ s; %d+ connection%(s%) answered 503 "
      .. "%(0 near the limit of %d+, (%d+) past it%)", 5)
    assert.equal(8, tonumber(shed))
    assert(keep:send("GET /free HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert.equal("freed", assert(keep:read_response()).body)
    assert.equal(200, srv:get("/hello").status)
  end)
end)
