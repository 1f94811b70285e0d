-- An upstream that answers before the request body is all sent (a 413 or a 401
-- during an upload): http.proxy relays that answer, as nginx and Go's
-- ReverseProxy do, instead of a 502, and http.fetch returns it as the
-- response. The upstream is spec/servers/early_peer.py; the client sends
-- 5 MiB in 64 KiB pieces every 50 ms, so the whole upload would take ~4 s:
-- an answer within ~1 s is the early one.
local H = require "helper"
local socket = require "socket"

local FRONT = [[
local http = require "moonhttp"
local UP = %q
http.handle("/p/", function(req, res)
  return http.proxy(req, res, UP, { request = function(up) up.path = up.path:gsub("^/p", "") end })
end)
-- http.fetch with a function body: 80 pieces of 64 KiB, one every 50 ms (/f/), or
-- as fast as they are written (/ff/: the upstream's close meets a write)
local function fetch_early(req, res)
  local n = 0
  local t0 = http.now()
  local fast = req.path:match("^/ff")
  local resp, kind, detail = http.fetch(UP .. req.path:gsub("^/ff?", ""), { method = "POST", body = function()
    n = n + 1
    if n > 80 then return nil end
    if n > 1 and not fast then http.sleep(0.05) end
    return string.rep("x", 65536)
  end })
  if not resp then return res:write("error ", kind, " ", detail) end
  local body = assert(resp:body())
  res:write(string.format("%%d %%s pieces=%%d in=%%.2f", resp.status, body, n, http.now() - t0))
end
http.handle("GET /f/", fetch_early)
http.handle("GET /ff/", fetch_early)
]]

local MIB5 = 5 * 1024 * 1024

-- POSTs 5 MiB to `path` in 64 KiB pieces every 50 ms while watching for the answer;
-- returns the answer's text (until the response is complete or the connection closes),
-- the seconds it took, and how many bytes were sent by then.
local function slow_upload(port, path)
  local c = socket.tcp()
  c:settimeout(5)
  assert(c:connect("127.0.0.1", port))
  assert(c:send("POST " .. path .. " HTTP/1.1\r\nHost: x\r\nContent-Length: " .. MIB5 .. "\r\n\r\n"))
  local t0, sent, got = socket.gettime(), 0, {}
  local piece = string.rep("y", 65536)
  c:settimeout(0)
  while socket.gettime() - t0 < 6 do
    if sent < MIB5 then
      local n, _, partial = c:send(piece)
      sent = sent + (n or partial or 0)
    end
    local data, err, partial = c:receive(65536)
    local bytes = data or partial
    if bytes and #bytes > 0 then got[#got + 1] = bytes end
    local text = table.concat(got)
    local head, body = text:match("^(.-\r\n)\r\n(.*)$")
    local len = head and tonumber(head:match("[Cc]ontent%-[Ll]ength: *(%d+)"))
    if (len and #body >= len) or err == "closed" then
      c:close()
      return text, socket.gettime() - t0, sent
    end
    socket.select(nil, nil, 0.05)
  end
  c:close()
  return table.concat(got), socket.gettime() - t0, sent
end

local function get(port, path)
  local c = socket.tcp()
  c:settimeout(5)
  assert(c:connect("127.0.0.1", port))
  assert(c:send("GET " .. path .. " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
  local data, _, partial = c:receive("*a")
  c:close()
  return data or partial
end

describe("an upstream answering before the request body is in", function()
  local up, front
  setup(function()
    up = H.service("/usr/bin/python3 spec/servers/early_peer.py", function(text)
      return text:match("port (%d+)")
    end)
    front = H.start(string.format(FRONT, "http://127.0.0.1:" .. up.port),
      { flags = { "--max-body-bytes", "100m" } })
  end)
  teardown(function()
    if front then front:stop() end
    if up then up:stop() end
  end)

  for _, case in ipairs({
    { path = "/close", status = "413", body = "too big, says the upstream\n" },
    { path = "/keep", status = "401", body = "who are you\n" },
  }) do
    it("http.proxy relays the early " .. case.status .. " (" .. case.path .. ") within a second", function()
      local text, took, sent = slow_upload(front.port, "/p" .. case.path)
      assert.truthy(text:match("^HTTP/1.1 " .. case.status .. " "), text)
      local head, body = text:match("^(.-\r\n)\r\n(.*)$")
      assert.equal(case.body, body)
      assert.is_true(took < 1.5, "took " .. took)
      assert.is_true(sent < MIB5, "sent " .. sent)
      -- the rest of a 5 MiB body is not drained: the front says it closes
      assert.truthy(head:lower():match("\r\nconnection: close"), head)
      -- and keeps serving
      assert.truthy(get(front.port, "/p/next"):match("\r\n\r\nok /next\n$"))
    end)
  end

  it("http.fetch returns the early answer as the response (a function body)", function()
    for _, case in ipairs({ { "/close", "413 too big, says the upstream\n" }, { "/keep", "401 who are you\n" } }) do
      local text = get(front.port, "/f" .. case[1])
      local body = text:match("\r\n\r\n(.*)$")
      assert.equal(case[2], body:match("^(.-) pieces="), text)
      local pieces, took = body:match("pieces=(%d+) in=([%d.]+)")
      assert.is_true(tonumber(pieces) < 80, body)
      assert.is_true(tonumber(took) < 1.5, body)
    end
    assert.truthy(get(front.port, "/p/again"):match("\r\n\r\nok /again\n$"))
  end)

  it("http.fetch reads the answer of an upstream that closed while a write was under way", function()
    for _ = 1, 5 do
      local text = get(front.port, "/ff/close")
      assert.equal("413 too big, says the upstream\n", text:match("\r\n\r\n(.-) pieces="), text)
    end
  end)
end)
