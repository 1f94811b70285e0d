-- http.tcp(): sockets against a real peer (spec/servers/echo.py), the
-- project's own HTTPS listener, and moonhttp handlers.
local H = require "helper"
local certs = require "helpers.certs"

-- Runs `source` as a `moonhttp run` script with PORT and UNIX set, returns its output.
local function run(source, port, unix)
  local code, out = H.run_lua(string.format("local PORT, UNIX = %d, %q\n", port, unix or "")
    .. source)
  assert.equal(0, code, out)
  return out
end

describe("http.tcp()", function()
  local echo, unix

  setup(function()
    unix = H.tmpname(".sock")
    echo = H.echo_server(unix)
  end)
  teardown(function()
    echo:stop()
    os.remove(unix)
  end)

  it("connects, sends and receives lines and byte counts", function()
    local out = run([[
      local s = http.tcp()
      print(s:connect("127.0.0.1", PORT))
      print(s:send("hello\r\n"))
      print(s:receive())
      s:send({ "wor", "ld\n" })
      print(s:receive("l"))
      s:send("12345\n")
      print(s:receive(3), s:receive(3))
      s:close()
      print(s:send("x"))
    ]], echo.port)
    assert.equal("true\n7\nhello\nworld\n123\t45\n\nnil\tclosed\n", out)
  end)

  it("assembles answers from partial reads", function()
    local out = run([[
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT))
      s:send("split\n")
      print(s:receive(4))
      print(s:receive() == "")
      s:send("split\n")
      print(s:receive("l"))
    ]], echo.port)
    assert.equal("abcd\ntrue\nabcd\n", out)
  end)

  it("returns nil, err, partial when the peer closes early", function()
    local out = run([[
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT))
      s:send("big 3\nclose\n")
      print(s:receive(10))
      print(s:receive())
      local t = http.tcp()
      assert(t:connect("127.0.0.1", PORT))
      t:send("big 5\nclose\n")
      print(t:receive("a"))
    ]], echo.port)
    assert.equal("nil\tclosed\txxx\nnil\tclosed\t\nxxxxx\n", out)
  end)

  it("takes what has arrived with receiveany, waiting only while nothing has", function()
    local out = run([[
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT))
      s:send("split\n")
      print(s:receiveany(100)) -- "ab" now; "cd" comes 0.1 s later
      print(s:receiveany(1), s:receiveany(100))
      s:settimeouts(1, 1, 0.1)
      print(s:receiveany(10))
      s:send("big 3\nclose\n")
      print(s:receiveany(10))
      print(s:receiveany(10))
      local ok, err = pcall(function() return s:receiveany(0) end)
      print(ok, (err:gsub("^.-:%d+: ", "")))
    ]], echo.port)
    assert.equal("ab\nc\td\n\nnil\ttimeout\t\nxxx\nnil\tclosed\t\n"
      .. "false\tbad argument #1 to 'receiveany' (must be a positive count)\n", out)
  end)

  it("times out a silent peer and stays usable", function()
    local out = run([[
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT))
      s:settimeouts(1, 1, 0.1)
      s:send("big 2\nsilent\n")
      local t0 = http.now()
      print(s:receive(5))
      print(http.now() - t0 >= 0.09)
      s:send("again\n")
      print(s:receive())
    ]], echo.port)
    assert.equal("nil\ttimeout\txx\ntrue\nagain\n", out)
  end)

  it("reports refused connections and unknown hosts as fixed strings", function()
    local probe = require("socket").bind("127.0.0.1", 0)
    local _, free = probe:getsockname()
    probe:close()
    local out = run([[
      print(http.tcp():connect("127.0.0.1", PORT))
      print(http.tcp():connect("no-such-host.invalid", 80))
      print(http.tcp():connect("unix:/nonexistent/mh.sock"))
    ]], free)
    assert.equal("nil\tconnection refused\nnil\thost not found\nnil\tsocket error\n", out)
  end)

  it("iterates over delimited input with receive_until", function()
    local out = run([[
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT))
      s:send("a--b----c\n")
      local next_part = s:receive_until("--")
      print(next_part(), next_part(), next_part())
      print(s:receive())
    ]], echo.port)
    assert.equal("a\tb\t\nc\n", out)
  end)

  it("pools connections with keepalive and counts reuse", function()
    local out = run([[
      for i = 1, 3 do
        local s = http.tcp()
        assert(s:connect("127.0.0.1", PORT))
        s:send("ping\n")
        assert(s:receive() == "ping")
        io.write(s:reused(), " ")
        assert(s:keepalive(10, 4))
      end
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT, { pool = "other" }))
      io.write(s:reused(), " ")
      s:send("conns\n")
      print(s:receive())
    ]], echo.port)
    local first, total = out:match("^0 1 2 0 (%d+)\n$")
    assert.truthy(first, out)
  end)

  it("closes instead of pooling a socket with unread bytes", function()
    local out = run([[
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT, { pool = "unread" }))
      s:send("big 4\n")
      print(s:receive(2))
      http.sleep(0.05)
      s:receive(1)
      print(s:keepalive())
      local t = http.tcp()
      assert(t:connect("127.0.0.1", PORT, { pool = "unread" }))
      print(t:reused())
    ]], echo.port)
    assert.equal("xx\nnil\tunread data\n0\n", out)
  end)

  it("drops a pooled connection the peer closed", function()
    local out = run([[
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT, { pool = "p" }))
      s:send("ping\n"); s:receive()
      assert(s:keepalive())
      -- the peer closes this one: a second connection asks it to
      local ctl = http.tcp()
      assert(ctl:connect("127.0.0.1", PORT, { pool = "p" }))
      print(ctl:reused())
      ctl:send("close\n")
      http.sleep(0.1)
      local t = http.tcp()
      assert(t:connect("127.0.0.1", PORT, { pool = "p" }))
      print(t:reused())
    ]], echo.port)
    assert.equal("1\n0\n", out)
  end)

  it("talks over a unix socket", function()
    local out = run([[
      local s = http.tcp()
      print(s:connect("unix:" .. UNIX))
      s:send("over unix\n")
      print(s:receive())
    ]], echo.port, unix)
    assert.equal("true\nover unix\n", out)
  end)

  it("waits inside the user's own coroutines", function()
    local out = run([[
      local s = http.tcp()
      assert(s:connect("127.0.0.1", PORT))
      local lines = coroutine.wrap(function()
        for i = 1, 3 do
          s:send("line " .. i .. "\n")
          coroutine.yield(s:receive())
        end
      end)
      print(lines(), lines(), lines())
      -- nested: a generator inside a generator, with a sleep in the inner one
      local outer = coroutine.wrap(function()
        local inner = coroutine.wrap(function()
          http.sleep(0.01)
          s:send("deep\n")
          coroutine.yield(s:receive())
        end)
        coroutine.yield(inner() .. "!")
      end)
      print(outer())
      local co = coroutine.create(function(x) s:send(x .. "\n"); return s:receive() end)
      print(coroutine.resume(co, "resumed"))
      print(coroutine.status(co))
    ]], echo.port)
    assert.equal("line 1\tline 2\tline 3\ndeep!\ntrue\tresumed\ndead\n", out)
  end)

  it("raises for misuse", function()
    local code, out = H.run_lua([[
      print(pcall(function() http.tcp():receive("x") end))
      print(pcall(function() http.tcp():connect("127.0.0.1", 0) end))
      print(pcall(function() table.sort({ 1, 2 }, function() http.tcp():connect("127.0.0.1", 1) end) end))
    ]])
    assert.equal(0, code, out)
    assert.matches("false\t[^\n]*expected a byte count", out)
    assert.matches("false\t[^\n]*port must be 1..65535", out)
    assert.matches("false\t[^\n]*cannot wait here", out)
  end)

  it("cannot connect while a script loads", function()
    local srv_script = H.script([[
      local http = require "moonhttp"
      http.tcp():connect("127.0.0.1", 1)
    ]])
    local code, out = H.run({ "--check", srv_script })
    assert.are_not.equal(0, code)
    assert.matches("must be called from a handler", out)
  end)

  it("closes a handler's socket when the handler returns", function()
    local srv = H.start(string.format([[
      local http = require "moonhttp"
      local kept
      http.handle("/open", function(req, res)
        kept = http.tcp()
        assert(kept:connect("127.0.0.1", %d))
        kept:send("ping\n")
        res:write(kept:receive())
      end)
      http.handle("/after", function(req, res)
        res:write(tostring(kept), " ", select(2, kept:send("x")))
      end)
    ]], echo.port))
    assert.equal("ping", srv:get("/open").body)
    assert.equal("moonhttp.Socket (closed) closed", srv:get("/after").body)
    srv:stop()
  end)
end)

describe("http.tcp() over TLS, against moonhttp's own HTTPS listener", function()
  local dir, srv
  local function path(name) return dir .. "/" .. name end

  setup(function()
    dir = certs.ca_and_server("-tls", "/CN=mh-sock-ca")
    local app = H.script('local http = require "moonhttp"\n'
      .. 'http.handle("GET /hello", function(req, res) res:write("hello over tls") end)\n'
      .. 'http.handle("GET /sni", function(req, res) res:write(req:tls().sni or "none") end)\n')
    srv = H.start(app, { no_listen = true, flags = { "--listen", "https://127.0.0.1:0",
      "--tls-cert", path("srv.pem"), "--tls-key", path("srv.key") } })
  end)
  teardown(function()
    srv:stop()
    os.execute("rm -rf " .. dir)
  end)

  local function get(connect_args)
    return run(string.format([[
      local CA = %q
      local s = http.tcp()
      s:settimeouts(2, 2, 2)
      local ok, err = s:connect(%s)
      if not ok then print(nil, err) return end
      s:send("GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
      local all = s:receive("a")
      print(all:match("^HTTP/1.1 (%%d+)"), all:match("\r\n\r\n(.*)$"))
    ]], path("ca.pem"), connect_args), srv.port)
  end

  it("verifies the certificate against opts.tls.ca and talks HTTP", function()
    assert.equal("200\thello over tls\n", get('"localhost", PORT, { tls = { ca = CA } }'))
  end)

  it("verifies by default and refuses an unknown authority", function()
    assert.equal("nil\ttls: certificate signed by unknown authority\n",
      get('"localhost", PORT, { tls = true }'))
  end)

  it("checks the name: server_name must match the certificate", function()
    assert.equal("nil\ttls: certificate hostname mismatch\n",
      get('"127.0.0.1", PORT, { tls = { ca = CA, server_name = "other.test" } }'))
    assert.equal("200\thello over tls\n",
      get('"127.0.0.1", PORT, { tls = { ca = CA, server_name = "localhost" } }'))
  end)

  it("skips verification only when asked", function()
    assert.equal("200\thello over tls\n", get('"localhost", PORT, { tls = { verify = false } }'))
  end)

  it("resumes the saved TLS session on the next handshake to the same host and port", function()
    local out = run(string.format([[
      local CA = %q
      local function once()
        local s = http.tcp()
        assert(s:connect("localhost", PORT, { tls = { ca = CA } }))
        s:send("GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        local all = s:receive("a")
        local resumed = s:tls_resumed()
        s:close()
        return resumed, all:match("\r\n\r\n(.*)$")
      end
      print(once())
      print(once())
      print(once())
      local plain = http.tcp()
      assert(plain:connect("localhost", PORT))
      print(plain:tls_resumed())
    ]], path("ca.pem")), srv.port)
    assert.equal("false\thello over tls\ntrue\thello over tls\ntrue\thello over tls\nfalse\n", out)
  end)

  -- The name sent (SNI) and checked is the host connect was given, whatever
  -- the pool is named: the handshake once read it back out of the pool key.
  for _, row in ipairs({
    { "host:port pool", '"localhost", PORT', "localhost" },
    { "a custom pool name", '"localhost", PORT, { pool = "custom" }', "localhost" },
    { "a custom pool name with a colon", '"localhost", PORT, { pool = "db:replica" }', "localhost" },
    { "an explicit server_name", '"127.0.0.1", PORT, { pool = "custom" }', "localhost",
      ', server_name = "localhost"' },
  }) do
    it("tls_handshake sends the connect host as SNI with " .. row[1], function()
      local out = run(string.format([[
        local s = http.tcp()
        s:settimeouts(2, 2, 2)
        assert(s:connect(%s))
        print(s:tls_handshake({ ca = %q%s }))
        s:send("GET /sni HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        print((s:receive("a") or ""):match("\r\n\r\n(.*)$"))
      ]], row[2], path("ca.pem"), row[4] or ""), srv.port)
      assert.equal("true\n" .. row[3] .. "\n", out)
    end)
  end

  it("upgrades a plain connection with tls_handshake", function()
    local out = run(string.format([[
      local s = http.tcp()
      assert(s:connect("localhost", PORT))
      print(s:tls_handshake({ ca = %q }))
      s:send("GET /hello HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
      print(s:receive())
      print(pcall(s.tls_handshake, s, { ca = "x" }))
    ]], path("ca.pem")), srv.port)
    assert.matches("^true\nHTTP/1.1 200 OK\nfalse\t[^\n]*already uses TLS\n$", out)
  end)
end)
