-- http.fetch's timeouts split as nginx splits them (issue 37): connect_timeout,
-- send_timeout (between two writes), read_timeout (between two reads), and
-- the total timeout. Against spec/servers/upstream.lua (/drip sends a body
-- byte every 0.1 s, /hang and /hangbody stall before and in the body), a
-- silent listener of this process (never accepts, never reads) and a full
-- accept queue (a connect that never completes). T is 1 s.
local H = require "helper"
local socket = require "socket"


local function backlog_full()
  local l = socket.tcp()
  assert(l:bind("127.0.0.1", 0))
  assert(l:listen(0))
  local _, port = l:getsockname()
  local held = { l }
  for _ = 1, 4 do
    local c = socket.tcp()
    c:settimeout(0.2)
    local ok = c:connect("127.0.0.1", port)
    held[#held + 1] = c
    if not ok then break end
  end
  return held, tonumber(port)
end

-- Each line: name, kind, detail, seconds taken.
local SCRIPT = [[
local http = require "moonhttp"
local BASE, SILENT, FULL = arg[1], arg[2], arg[3]
local function timed(name, fn)
  local t0 = http.clock()
  local a, b, c = fn()
  print(name, tostring(a), tostring(b), tostring(c), string.format("%.2f", http.clock() - t0))
end
local function body(url, opts)
  return function()
    local r, err, detail = http.fetch(url, opts)
    if not r then return nil, err, detail end
    local b, berr, bdetail = r:body()
    if not b then return nil, berr, bdetail end
    return #b
  end
end
-- a body that keeps coming is not cut by read_timeout, however long it takes
timed("drip", body(BASE .. "/drip", { read_timeout = 1 })) -- 2 s in all, a byte every 0.1 s
-- a stall is
timed("stall_body", body(BASE .. "/hangbody", { read_timeout = 1 }))
timed("stall_head", body(BASE .. "/hang", { read_timeout = 1 }))
-- a reader that pauses is not a stalled server: the read clock stops while the buffer is full
timed("slow_reader", function()
  local r = assert(http.fetch(BASE .. "/big", { read_timeout = 0.3 }))
  local first = assert(r:read(1000))
  http.sleep(1)
  local rest, err, detail = r:body()
  if not rest then return nil, err, detail end
  return #first + #rest
end)
-- the total stays a deadline over everything
timed("total", body(BASE .. "/drip", { read_timeout = 1, timeout = 1 }))
timed("send", function()
  -- no total timeout: only send_timeout can end it
  return http.fetch(SILENT, { method = "POST", body = string.rep("x", 32 * 1024 * 1024), send_timeout = 1, timeout = 0 })
end)
timed("connect", function() return http.fetch(FULL, { connect_timeout = 1 }) end)
print("bad", select(2, pcall(http.fetch, BASE, { read_timeout = -1 })))
]]

describe("http.fetch timeouts", function()
  local up, s
  setup(function()
    up = H.upstream()
    local silent = assert(socket.bind("127.0.0.1", 0))
    local _, sport = silent:getsockname()
    local held, fport = backlog_full()
    local ok, err = pcall(function()
      s = H.run_kv(nil, SCRIPT, up.base, "http://127.0.0.1:" .. sport .. "/",
        "http://127.0.0.1:" .. fport .. "/")
    end)
    silent:close()
    for _, c in ipairs(held) do c:close() end
    assert(ok, err)
  end)
  teardown(function() up:stop() end)

  local function row(name)
    local kind, detail, a3, took = s[name]:match("^(%S+)\t([^\t]*)\t([^\t]*)\t(%S+)$")
    return kind, detail, a3, tonumber(took)
  end

  it("read_timeout lets a slow-dripping body through", function()
    local n, kind, detail, took = row("drip")
    assert.equal("20", n, tostring(kind) .. " " .. tostring(detail))
    assert.is_true(took >= 1.9, took)
  end)

  it("read_timeout cuts a stall in the body and before the head", function()
    local _, kind, detail, took = row("stall_body")
    assert.equal("timeout", kind)
    assert.equal("timeout reading the body", detail)
    assert.is_true(took >= 0.95 and took < 1.3, took)
    _, kind, detail, took = row("stall_head")
    assert.equal("timeout", kind)
    assert.equal("timeout waiting for the response", detail)
    assert.is_true(took >= 0.95 and took < 1.3, took)
  end)

  it("read_timeout does not count a reader that pauses", function()
    assert.equal("1048576", (row("slow_reader")))
  end)

  it("the total timeout still bounds everything", function()
    local _, kind, _, took = row("total")
    assert.equal("timeout", kind)
    -- the deadline counts from the loop's cached time, which a slow (sanitizer) build leaves behind
    assert.is_true(took >= 0.8 and took < 1.3, took)
  end)

  it("send_timeout cuts a peer that stops reading the request", function()
    local _, kind, detail, took = row("send")
    assert.equal("timeout", kind)
    assert.equal("timeout sending the request", detail)
    -- the kernel takes bytes for a while (its buffers grow) before the stall the clock measures
    assert.is_true(took >= 0.95 and took < 6, took)
  end)

  it("connect_timeout per fetch", function()
    local _, kind, detail, took = row("connect")
    assert.equal("timeout", kind)
    assert.equal("connect timeout", detail)
    assert.is_true(took >= 0.95 and took < 1.3, took)
  end)

  it("raises for a negative timeout", function()
    assert.truthy(s.bad:find("http.fetch: read_timeout must be a number of seconds >= 0", 1, true), s.bad)
  end)
end)
