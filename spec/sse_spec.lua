-- res:sse(): server-sent events over a real socket, and a client that leaves.
local H = require "helper"

local app = [[
local http = require "moonhttp"
http.handle("GET /events", function(req, res)
  local sse = res:sse()
  assert(sse:comment("hi"))
  assert(sse:send{ event = "greet", id = req:header("Last-Event-ID") or "1", retry = 500,
                   data = "line one\nline two\r\nline three\rend" })
  assert(sse:send("plain"))
  local n, ok, err = 0, true, nil
  while ok do
    n = n + 1
    ok, err = sse:send{ data = ("tick %d"):format(n) }
    http.sleep(0.02)
  end
  http.log("info", "sse loop ended: " .. tostring(err))
end)
http.handle("GET /bad", function(req, res)
  local sse = res:sse()
  local what = req:arg("f")
  local ok, e = pcall(sse.send, sse, { [what] = "a\nb", data = "x" })
  sse:send{ event = "result", data = ok and "accepted" or tostring(e) }
end)
]]

describe("server-sent events", function()
  local srv
  setup(function() srv = H.start(app) end)
  teardown(function() srv:stop() end)

  it("streams events with split data lines, and ends with nil, 'closed' when the client goes", function()
    local c = srv:connect()
    c:send("GET /events HTTP/1.1\r\nHost: a\r\nLast-Event-ID: 41\r\n\r\n")
    local head = {}
    repeat local l = c:read_line(); head[#head + 1] = l until l == ""
    local text = table.concat(head, "\n")
    assert.matches("\nContent%-Type: text/event%-stream; charset=utf%-8", text)
    assert.matches("\nCache%-Control: no%-cache", text)
    assert.matches("\nTransfer%-Encoding: chunked", text)
    -- read (chunked) until a tick arrived
    local got = ""
    while not got:find("data: tick 2\n\n", 1, true) do
      assert(c:fill(), "stream ended early")
      got = c.buf
    end
    assert.matches(": hi\n\n", got, 1, true)
    assert.matches("event: greet\nid: 41\nretry: 500\ndata: line one\ndata: line two\ndata: line three\ndata: end\n\n", got, 1, true)
    assert.matches("\ndata: plain\n\n", got, 1, true)
    c:close()
    local deadline = H.now() + 5
    while not srv:logtext():find("sse loop ended: closed", 1, true) and H.now() < deadline do H.sleep(0.05) end
    assert.matches("sse loop ended: closed", srv:logtext(), 1, true)
  end)

  for _, field in ipairs({ "event", "id" }) do
    it("raises on a newline in " .. field, function()
      local r = srv:get("/bad?f=" .. field)
      assert.matches("data: [^\n]*" .. field .. " must not contain CR, LF or NUL", r.body)
    end)
  end
end)
