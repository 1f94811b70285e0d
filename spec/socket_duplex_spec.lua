-- http.tcp() in full duplex: one task receives while another sends on the
-- same socket (plain and TLS), against spec/servers/duplex_peer.py.
local H = require "helper"
local certs = require "helpers.certs"

local function run(source, port, ...)
  local code, out = H.run_lua(string.format("local PORT = %d\n", port) .. source, ...)
  assert.equal(0, code, out)
  return out
end

-- Sends 4 MiB of numbered lines while a second task reads the echo: with one
-- task at a time neither side could finish (the peer stops reading while
-- its answers are not taken, so the send waits for the receive).
local RELAY = [[
  local CONNECT = ...
  local s = http.tcp()
  s:settimeouts(3, 5, 5)
  assert(s:connect("%s", PORT, CONNECT))
  assert(s:send("echo\n"))
  local parts = {}
  for i = 1, 40000 do parts[i] = string.format("%%08d%%092d\n", i, 0) end
  local want = table.concat(parts)
  local reader = http.spawn(function()
    local got = {}
    local n = 0
    while n < #want do
      local data, err, partial = s:receive(math.min(65536, #want - n))
      if not data then return "receive: " .. err .. " after " .. (n + #partial) end
      got[#got + 1] = data
      n = n + #data
    end
    return table.concat(got) == want and "same" or "different"
  end)
  http.sleep(0.05) -- the reader waits in receive before the first send
  local sent = 0
  for i = 1, #want, 262144 do
    local n, err = s:send(want:sub(i, i + 262143))
    if not n then print("send", err) break end
    sent = sent + n
  end
  print("sent", sent, #want)
  print("read", select(2, reader:join(10)))
  s:close()
]]

local function connect_opts(tls)
  return tls and string.format("{ tls = { ca = %q } }", tls) or "nil"
end

local function relay(port, host, tls)
  local src = RELAY:gsub("local CONNECT = %.%.%.", "local CONNECT = " .. connect_opts(tls))
  return run(string.format(src, host), port)
end

describe("http.tcp() in full duplex", function()
  local peer
  setup(function()
    peer = H.service("/usr/bin/python3 spec/servers/duplex_peer.py", function(text)
      return text:match("port (%d+)")
    end)
  end)
  teardown(function() peer:stop() end)

  it("relays 4 MiB: one task sends while another receives, no byte lost", function()
    local out = relay(peer.port, "127.0.0.1")
    assert.equal("sent\t4040000\t4040000\nread\tsame\n", out)
  end)

  it("keeps two receives or two sends at once an error", function()
    local out = run([[
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT))
      assert(s:send("stall 3\n"))
      local r = http.spawn(function() return s:receive() end)
      local w = http.spawn(function() return s:send(string.rep("x", 16 * 1024 * 1024)) end)
      http.sleep(0.2)
      print(pcall(s.receive, s))
      print(pcall(s.send, s, "y"))
      print(pcall(s.connect, s, "127.0.0.1", PORT))
      s:close()
      print(r:join(2))
      print(w:join(2))
    ]], peer.port)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.truthy(lines[1]:find("^false\t.*sock:receive: socket busy %(another task is receiving on it%)"), out)
    assert.truthy(lines[2]:find("^false\t.*sock:send: socket busy %(another task is sending on it%)"), out)
    assert.truthy(lines[3]:find("^false\t.*sock:connect: socket busy"), out)
    assert.equal("true\tnil\tclosed\t", lines[4])
    assert.equal("true\tnil\tclosed", lines[5])
  end)

  it("wakes both the receiving and the sending task when either side closes", function()
    local out = run([[
      -- our side: a third task closes the socket under a receive and a blocked send
      local big = string.rep("x", 16 * 1024 * 1024) -- more than loopback buffers hold
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT))
      assert(s:send("stall 5\n"))
      local t0 = http.now()
      local r = http.spawn(function() return s:receive() end)
      local w = http.spawn(function() return s:send(big) end)
      http.sleep(0.3)
      s:close()
      print("local", select(2, r:join(2)), select(2, w:join(2)), http.now() - t0 < 1)
      -- the peer's side: it closes with our bytes unread
      local p = http.tcp()
      assert(p:connect("127.0.0.1", PORT))
      assert(p:send("stall 0.3\n"))
      t0 = http.now()
      r = http.spawn(function() return p:receive() end)
      w = http.spawn(function() return p:send(big) end)
      local _, rd, rerr = r:join(3)
      local _, wd, werr = w:join(3)
      print("peer", rd, wd, http.now() - t0 < 1.5)
      print("errors", rerr, werr)
    ]], peer.port)
    local lines = {}
    for l in out:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.equal("local\tnil\tnil\ttrue", lines[1], out)
    assert.equal("peer\tnil\tnil\ttrue", lines[2], out)
    local rerr, werr = lines[3]:match("^errors\t(.-)\t(.-)$")
    assert.truthy(rerr == "closed" or rerr == "connection reset", out)
    assert.truthy(werr == "closed" or werr == "connection reset", out)
  end)
end)

describe("http.tcp() in full duplex over TLS", function()
  local dir, peer
  setup(function()
    dir = certs.ca_and_server("-duplex-tls", "/CN=mh-duplex-ca")
    peer = H.service(string.format("/usr/bin/python3 spec/servers/duplex_peer.py %s/srv.pem %s/srv.key",
      dir, dir), function(text) return text:match("port (%d+)") end)
  end)
  teardown(function()
    peer:stop()
    os.execute("rm -rf " .. dir)
  end)

  it("relays 4 MiB through TLS with a reader and a writer task", function()
    local out = relay(peer.port, "localhost", dir .. "/ca.pem")
    assert.equal("sent\t4040000\t4040000\nread\tsame\n", out)
  end)
end)
