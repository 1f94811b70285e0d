-- A request body the handler leaves unread (issue 43): the server reads and
-- drops at most discard_body_bytes of it, then closes, and its answer says
-- Connection: close whenever it will close (h1_conn.c drainable, conn.c's
-- lingering close). Bytes read are the server process's own count
-- (/proc/PID/io rchar: what its read calls returned).
local H = require "helper"

local APP = [[
local http = require "moonhttp"
http.handle("POST /ignore", function(req, res) res:write("ignored") end)
http.handle("GET /hello", function(req, res) res:write("hello") end)
]]

local BOUND = 256 * 1024   -- discard_body_bytes' default
local READ_BUFFER = 16384  -- one read of the connection's buffer (MH_BUF_CHUNK)
local BIG = 500 * 1024 * 1024

local function rchar(pid)
  local io_text = assert(H.read_file("/proc/" .. pid .. "/io"))
  return tonumber(io_text:match("rchar:%s*(%d+)"))
end

-- Sends `head`, then body blocks until BIG bytes went or the server stopped
-- taking them for a second (or closed); returns the bytes sent.
local function upload(c, head, block)
  assert(c:send(head))
  c.sock:settimeout(0.2)
  local sent, stalled_since = 0, nil
  while sent < BIG do
    local n, err, last = c.sock:send(block)
    local took = n or last or 0
    sent = sent + took
    if err == "closed" or (err and err ~= "timeout") then break end
    if took > 0 then
      stalled_since = nil
    else
      stalled_since = stalled_since or H.now()
      if H.now() - stalled_since > 1 then break end
    end
  end
  c:settimeout(5)
  return sent
end

local CHUNK = string.rep("x", 65536)

-- { name, head, body block }: 500 MiB to a handler that reads none of it
local big_rows = {
  { "Content-Length", "POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: " .. BIG .. "\r\n\r\n", CHUNK },
  { "chunked", "POST /ignore HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
    "10000\r\n" .. CHUNK .. "\r\n" },
}

-- { name, bytes, statuses, whether the connection stays }: bodies the server can drop
local small_rows = {
  { "a chunked body that has all arrived",
    "POST /ignore HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
      .. "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", { 200, 200 }, true },
  { "a declared length within the bound",
    "POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" .. string.rep("y", 100000)
      .. "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", { 200, 200 }, true },
  { "a chunked body whose end has not come",
    "POST /ignore HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
    { 200 }, false },
  { "a declared length past the bound",
    "POST /ignore HTTP/1.1\r\nHost: x\r\nContent-Length: " .. (BOUND + 1) .. "\r\n\r\nabc", { 200 }, false },
}

describe("a request body left unread", function()
  local srv
  setup(function() srv = H.start(APP) end)
  teardown(function() srv:stop() end)

  for _, row in ipairs(big_rows) do
    it("is read at most discard_body_bytes, then closed: 500 MiB, " .. row[1], function()
      local before = rchar(srv.pid)
      local c = srv:connect(5)
      local sent = upload(c, row[2], row[3])
      local res = c:read_response()
      local read = rchar(srv.pid) - before
      c:close()
      assert.truthy(res, "no answer")
      assert.equal(200, res.status)
      assert.equal("close", res.headers["connection"])
      assert.is_true(read <= BOUND + READ_BUFFER + #row[2] + 4096,
        string.format("the server read %d bytes (the client sent %d)", read, sent))
      assert.equal(200, srv:get("/hello").status)
    end)
  end

  for _, row in ipairs(small_rows) do
    it(row[1] .. (row[4] and ": dropped, the connection stays" or ": Connection: close"), function()
      local c = srv:connect(3)
      assert(c:send(row[2]))
      for _, status in ipairs(row[3]) do
        local res = assert(c:read_response())
        assert.equal(status, res.status)
        assert.equal(not row[4] and "close" or nil, res.headers["connection"])
      end
      assert.equal(not row[4], c:closed_by_peer(0.5))
      c:close()
    end)
  end
end)
