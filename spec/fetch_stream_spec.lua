-- http.fetch with a streamed request body (issue 37): `body` as a function
-- returning pieces or as a `req` whose body is passed on as it arrives
-- (with its Content-Length, or chunked), one piece in flight at a time so
-- memory stays flat. An upstream moonhttp reports what it received; a front
-- moonhttp forwards uploads to it with `body = req`.
local H = require "helper"

local UPSTREAM = [[
local http = require "moonhttp"
-- what arrived: framing headers, length and digest (or only the length for /count)
http.handle("POST /echo", function(req, res)
  local b = assert(req:body())
  res:write(string.format("%s %s %d %s", req:header("content-length") or "-",
    req:header("transfer-encoding") or "-", #b, http.hex.encode(http.crypto.sha256(b))))
end, { max_body = "20m" })
http.handle("POST /count", function(req, res)
  local n = 0
  while true do
    local piece = req:read(65536)
    if not piece then break end
    n = n + #piece
  end
  res:write(tostring(n))
end, { max_body = "200m" })
]]

local FRONT = [[
local http = require "moonhttp"
local UP = %q
http.handle("POST /{path}", function(req, res)
  local r, err, detail = http.fetch(UP .. "/" .. req:pathvalue("path"), { method = "POST", body = req, timeout = 0 })
  if not r then return res:write(err .. " " .. detail, 502) end
  res:write(r:body())
end, { max_body = "200m" })
]]

-- the server's peak RSS in kB (with --workers 1 it is one process)
local function vm_hwm(pid)
  local f = io.open("/proc/" .. pid .. "/status")
  local kb = f:read("a"):match("VmHWM:%s*(%d+)")
  f:close()
  return tonumber(kb)
end


describe("http.fetch streamed request bodies", function()
  local up, front, base
  setup(function()
    up = H.start(UPSTREAM)
    base = "http://127.0.0.1:" .. up.port
    front = H.start(string.format(FRONT, base))
  end)
  teardown(function()
    if front then front:stop() end
    if up then up:stop() end
  end)

  it("sends a function's pieces chunked; a failing function fails the fetch", function()
    local s = H.run_kv(nil, [[
local pieces = { "hello ", "", "streamed ", "world" }
local i = 0
local r = assert(http.fetch(arg[1] .. "/echo", { method = "POST", body = function()
  i = i + 1
  return pieces[i]
end }))
print("echo", r:body())
print("want", http.hex.encode(http.crypto.sha256("hello streamed world")))
local n = 0
print("fail", select(2, http.fetch(arg[1] .. "/echo", { method = "POST", body = function()
  n = n + 1
  if n < 3 then return "x" end
  return nil, "source broke"
end })))
print("misuse", select(2, pcall(http.fetch, arg[1] .. "/echo", { method = "POST", body = 42 })))
]], base)
    assert.equal("- chunked 20 " .. s.want, s.echo)
    assert.equal("body\tsource broke", s.fail)
    assert.truthy(s.misuse:find("opts.body must be a string, a function or a req", 1, true), s.misuse)
  end)

  it("passes a req's body on with its Content-Length, or chunked when it came chunked", function()
    local body = string.rep("0123456789abcdef", 65536) -- 1 MiB
    local r = front:request("POST", "/echo", { ["Content-Type"] = "application/octet-stream" }, body)
    assert.equal(200, r.status, r.body)
    local cl, te, n = r.body:match("^(%S+) (%S+) (%d+) ")
    assert.equal(tostring(#body), cl)
    assert.equal("-", te)
    assert.equal(#body, tonumber(n))
    -- a chunked upload stays chunked
    local c = H.connect(front.port)
    assert(c:send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      .. "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"))
    local resp = c:read_response()
    c:close()
    assert.equal(200, resp.status)
    assert.truthy(resp.body:match("^%- chunked 11 "), resp.body)
  end)

  it("streams 64 MiB through with flat memory", function()
    local before = vm_hwm(front.pid)
    local c = H.connect(front.port, 30)
    local size = 64 * 1024 * 1024
    assert(c:send("POST /count HTTP/1.1\r\nHost: x\r\nContent-Length: " .. size .. "\r\n\r\n"))
    local piece = string.rep("z", 1024 * 1024)
    for _ = 1, 64 do assert(c:send(piece)) end
    local resp = c:read_response()
    c:close()
    assert.equal(200, resp.status, resp.body)
    assert.equal(tostring(size), resp.body)
    local grew = vm_hwm(front.pid) - before
    if not H.sanitized(front.pid) then assert.is_true(grew < 16 * 1024, "front grew by " .. grew .. " kB") end
  end)
end)
