-- The default slow-client protection is a no-progress timeout (send_timeout,
-- like nginx's): a slow but steady reader of a long download is never cut;
-- one that stops reading is. The spec lowers send_timeout to 0.5 s so that
-- the 50 MB download below (read at a steady ~25 MB/s, about 2 s) outlasts
-- it several times over.
local H = require "helper"
local socket = require "socket"

local SIZE = 50 * 1024 * 1024

local APP = [[
local http = require "moonhttp"
local chunk = string.rep("x", 65536)
http.handle("GET /download", function(req, res)
  res:header("Content-Length", tostring(]] .. SIZE .. [[))
  for _ = 1, ]] .. SIZE // 65536 .. [[ do
    local ok, err = res:write(chunk)
    if not ok then http.log("info", "download ended: " .. err) return end
  end
  http.log("info", "download complete")
end)
]]

-- Sends the request and reads the response head; returns the socket.
local function start_download(port)
  local s = assert(socket.tcp())
  s:settimeout(5)
  assert(s:connect("127.0.0.1", port))
  -- a small receive buffer, so the server's writes depend on this reader's pace
  s:setoption("tcp-nodelay", true)
  assert(s:send("GET /download HTTP/1.1\r\nHost: x\r\n\r\n"))
  local head = {}
  while true do
    local line = assert(s:receive("*l"))
    if line == "" then break end
    head[#head + 1] = line
  end
  assert.equal("HTTP/1.1 200 OK", head[1])
  return s
end

-- Reads up to `budget` bytes without waiting; returns how many came, and
-- whether the connection ended.
local function read_some(s, budget)
  s:settimeout(0)
  local got = 0
  while got < budget do
    local data, err, partial = s:receive(math.min(65536, budget - got))
    local piece = data or partial
    if piece then got = got + #piece end
    if err == "closed" then return got, true end
    if not data then break end
  end
  return got, false
end

describe("send_timeout (no progress)", function()
  local srv
  setup(function()
    srv = H.start(H.script(APP), { flags = { "--send-timeout", "0.5" } })
  end)
  teardown(function() srv:stop() end)

  it("does not cut a slow but steady reader of a 50 MB download", function()
    local s = start_download(srv.port)
    local total, t0 = 0, H.now()
    while total < SIZE do
      local n, ended = read_some(s, 512 * 1024) -- 512 KiB every 20 ms: ~25 MB/s
      total = total + n
      if ended then break end
      H.sleep(0.02)
    end
    local took = H.now() - t0
    s:close()
    assert.equal(SIZE, total)
    assert.is_true(took > 1.0, "the download should outlast send_timeout; it took " .. took)
    assert.truthy(srv:logtext():find("download complete", 1, true), srv:logtext())
  end)

  it("cuts a client that stops reading", function()
    local s = start_download(srv.port)
    local total = read_some(s, 1024 * 1024)
    H.sleep(1.5) -- stop reading for three times send_timeout
    local ended = false
    local deadline = H.now() + 5
    while not ended and H.now() < deadline do
      local n
      n, ended = read_some(s, SIZE)
      total = total + n
      if not ended then socket.select({ s }, nil, 0.2) end
    end
    s:close()
    assert.is_true(ended, "the server should have closed the connection")
    assert.is_true(total < SIZE, "got " .. total)
    local log = srv:logtext()
    assert.truthy(log:find("send timeout: the client read nothing for 0.5 s", 1, true), log)
    assert.truthy(log:find("download ended: connection closed", 1, true), log)
  end)

  it("is the default protection; the total deadline (write_timeout) is opt-in", function()
    local _, help = H.run({ "--help" })
    assert.truthy(help:find("%-%-send%-timeout[^\n]*%(default 30s%)"), help)
    assert.truthy(help:find("%-%-write%-timeout[^\n]*%(default 0s%)"), help)
  end)
end)
