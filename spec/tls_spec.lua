-- HTTPS: certificates made here with the openssl CLI, clients are curl,
-- openssl s_client and raw sockets for the bad input.
local H = require "helper"
local certs = require "helpers.certs"
local socket = require "socket"

local q = H.shell_quote

local sh = H.sh

local dir
local function path(name) return dir .. "/" .. name end

-- A CA and leaf certificates signed by it: a.test (SAN a.test, localhost)
-- and b.test (SAN b.test, *.b.test).
local function make_certs()
  dir = certs.dir("-tls")
  certs.self_signed(dir, "ca", "/CN=moonhttp-test-ca")
  local leaves = { a = "DNS:a.test,DNS:localhost", b = "DNS:b.test,DNS:*.b.test" }
  for name, san in pairs(leaves) do
    certs.leaf(dir, name, "/CN=" .. name .. ".test", { ext = "subjectAltName=" .. san })
  end
end

local APP = [[
local http = require "moonhttp"
http.server{ read_header_timeout = 1, tls = {
  { cert = %q, key = %q },
  { cert = %q, key = %q },
} }
http.handle("GET /hello", function(req, res) res:write("hello tls") end)
http.handle("GET /big", function(req, res) res:write(string.rep("0123456789", 30000)) end)
http.handle("POST /echo", function(req, res) res:write(req:body()) end)
http.handle("GET /slow", function(req, res) http.sleep(0.1); res:write("slow") end)
http.handle("GET /ws", function(req, res)
  local ws = assert(req:websocket())
  while true do
    local data, kind = ws:receive()
    if not data then return end
    ws:send(data, kind)
  end
end)
]]

local function ports(srv)
  local list = {}
  for p in srv:logtext():gmatch("listening on [^\n]* %(port (%d+)%)") do list[#list + 1] = tonumber(p) end
  return list
end

local function curl(port, args)
  return sh(string.format("curl -sS --max-time 10 --cacert %s %s", q(path("ca.pem")),
    args:gsub("PORT", tostring(port))))
end

local function s_client(port, args, input)
  local inp = H.write_file(H.tmpname(".in"), input or "")
  local out, ok = sh(string.format("timeout 10 openssl s_client -connect 127.0.0.1:%d -CAfile %s %s <%s",
    port, q(path("ca.pem")), args or "", q(inp)))
  os.remove(inp)
  return out, ok
end

describe("https", function()
  local srv
  setup(function()
    make_certs()
    srv = H.start(H.script(string.format(APP, path("a.pem"), path("a.key"), path("b.pem"),
      path("b.key"))), { flags = { "--log-level", "debug" } })
  end)
  teardown(function()
    srv:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  it("serves curl over TLS 1.3 (preferred) and TLS 1.2, with ALPN http/1.1 on both", function()
    -- --http1.1: curl offers only http/1.1 (h2 is offered first by default: spec/h2_spec.lua)
    local out, ok = curl(srv.port, "-v --http1.1 https://localhost:PORT/hello")
    assert(ok, out)
    assert.truthy(out:find("hello tls", 1, true))
    assert.truthy(out:find("SSL connection using TLSv1.3 / TLS_AES_", 1, true), out)
    assert.truthy(out:find("ALPN: server accepted http/1.1", 1, true), out)
    out, ok = curl(srv.port, "-v --http1.1 --tls-max 1.2 https://localhost:PORT/hello")
    assert(ok, out)
    assert.truthy(out:find("hello tls", 1, true))
    assert.truthy(out:find("TLSv1.2 / ECDHE-ECDSA-", 1, true), out)
    assert.truthy(out:find("ALPN: server accepted http/1.1", 1, true), out)
  end)

  it("agrees X25519 and P-256 key shares", function()
    -- offered: X25519 with P-256 after it (a TLS 1.2 client must name its ECDSA
    -- certificate's curve, RFC 4492 §5.1), then P-256 alone
    for _, row in ipairs({ { "X25519:P-256", "Server Temp Key: X25519" },
      { "P-256", "Server Temp Key: ECDH, prime256v1" } }) do
      for _, v in ipairs({ "-tls1_3", "-tls1_2" }) do
        local out = s_client(srv.port, v .. " -groups " .. row[1])
        assert.truthy(out:find(row[2], 1, true), v .. " " .. row[1] .. ": " .. out)
        assert.truthy(out:find("Verify return code: 0 (ok)", 1, true), out)
      end
    end
  end)

  it("carries a WebSocket over TLS (wss, python3-websockets checking the certificate)", function()
    local out = sh(string.format("/usr/bin/python3 spec/clients/ws_client.py wss://127.0.0.1:%d/ws wss %s a.test 2>&1",
      ports(srv)[1], q(path("ca.pem"))))
    assert.equal("str 8 True\nbytes 100000 True\n", out)
  end)

  it("keeps a TLS connection alive across requests", function()
    local out, ok = curl(srv.port, "-v https://localhost:PORT/hello https://localhost:PORT/hello")
    assert(ok, out)
    assert.equal(2, select(2, out:gsub("hello tls", "")))
    assert.truthy(out:find("Re%-using existing connection"), out)
  end)

  it("answers pipelined requests over TLS in order", function()
    local req = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n" ..
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" ..
        "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    local out = s_client(srv.port, "-quiet -ign_eof", req)
    local a, b, c = out:find("slow", 1, true), out:find("\r\n\r\nhello", 1, true), out:find("hello tls", 1, true)
    assert.truthy(a and b and c, out)
    assert.truthy(a < b and b < c, out)
    assert.equal(3, select(2, out:gsub("HTTP/1.1 200 OK", "")))
  end)

  it("moves large bodies both ways (many records, buffered plaintext)", function()
    local body = H.write_file(H.tmpname(".bin"), string.rep("abcdefghijklmnopqrstuvwxyz\n", 30000))
    local out, ok = curl(srv.port, "-o /dev/null -w '%{size_download}' --data-binary @" .. q(body) ..
      " https://localhost:PORT/echo")
    assert(ok, out)
    assert.equal(tostring(27 * 30000), out)
    out, ok = curl(srv.port, "-o /dev/null -o /dev/null -w '%{size_download}' https://localhost:PORT/big https://localhost:PORT/big")
    assert(ok, out)
    assert.equal("300000300000", out)
    os.remove(body)
  end)

  it("chooses the certificate by SNI (SAN, wildcard, CN), else the first", function()
    local cases = { ["a.test"] = "a.test", ["b.test"] = "b.test", ["x.b.test"] = "b.test",
      ["y.x.b.test"] = "a.test", ["other.example"] = "a.test" }
    for name, cn in pairs(cases) do
      local out = s_client(srv.port, "-servername " .. name)
      assert.truthy(out:find("subject=CN = " .. cn, 1, true), name .. ": " .. out)
    end
    local out = s_client(srv.port, "-noservername")
    assert.truthy(out:find("subject=CN = a.test", 1, true), out)
    assert.truthy(out:find("Verify return code: 0 (ok)", 1, true), out)
  end)

  it("resumes sessions with tickets, TLS 1.3 and TLS 1.2", function()
    for _, v in ipairs({ "1.3", "1.2" }) do
      local sess = H.tmpname(".sess")
      local flag = "-tls" .. v:gsub("%.", "_")
      -- 1.3 tickets come after the handshake: a request and its answer make s_client wait for them
      local out = s_client(srv.port, flag .. " -ign_eof -sess_out " .. q(sess),
        "GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
      assert.truthy(out:find("\nNew, TLSv" .. v, 1, true), out)
      out = s_client(srv.port, flag .. " -sess_in " .. q(sess))
      assert.truthy(out:find("\nReused, TLSv" .. v, 1, true), out)
      os.remove(sess)
    end
  end)

  it("refuses TLS 1.1 and non-ECDHE/non-AEAD suites", function()
    for _, args in ipairs({ "-tls1_1", "-tls1_2 -cipher AES128-GCM-SHA256",
      "-tls1_2 -cipher ECDHE-ECDSA-AES128-SHA" }) do
      local out = s_client(srv.port, args)
      assert.falsy(out:find("Cipher is ECDHE", 1, true), args .. ": " .. out)
    end
    assert.equal("hello tls", (curl(srv.port, "https://localhost:PORT/hello")))
  end)

  it("closes on plain HTTP sent to the TLS port, with a log line", function()
    local c = srv:connect()
    assert(c:send("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert.is_true(c:closed_by_peer(2))
    assert.falsy(c.buf:find("HTTP/1.1", 1, true))
    c:close()
    assert.truthy(srv:wait_log("plain HTTP sent to a TLS port"))
  end)

  it("closes on garbage", function()
    local c = srv:connect()
    local junk = {}
    for i = 1, 512 do junk[i] = string.char(math.random(0, 255)) end
    junk[1] = "\22" -- a handshake record type, so the garbage reaches the parser
    c:send(table.concat(junk))
    assert.is_true(c:closed_by_peer(2))
    c:close()
    assert.truthy(srv:wait_log("TLS handshake failed"))
  end)

  it("closes truncated handshakes: peer gone, and peer stalled (header timeout)", function()
    local hello = "\22\3\1\0\200\1\0\0\196\3\3" .. string.rep("\1", 32)
    local c = srv:connect()
    c:send(hello)
    c:close()
    assert.truthy(srv:wait_log("TLS handshake truncated"))
    c = srv:connect()
    c:send(hello)
    local t0 = H.now()
    assert.is_true(c:closed_by_peer(4))
    assert.is_true(H.now() - t0 < 3)
    c:close()
    assert.truthy(srv:wait_log("closed before the TLS handshake completed"))
  end)

  -- RFC 9113 §3.2: over TLS, HTTP/2 is chosen by ALPN alone. A connection preface (then an
  -- empty SETTINGS and a PING on stream 1, an h2 protocol error) is HTTP/1.1 bytes without
  -- ALPN or with http/1.1; with h2 it starts HTTP/2 (GOAWAY: the PING's stream is wrong).
  local H2_BYTES = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" .. "\0\0\0\4\0\0\0\0\0" ..
      "\0\0\8\6\0\0\0\0\1" .. "12345678"
  local GOAWAY_FRAME = "\7\0\0\0\0\0"
  for _, row in ipairs({
    { "without ALPN", "", "HTTP/1.1 400" },
    { "with ALPN http/1.1", "-alpn http/1.1", "HTTP/1.1 400" },
    { "with ALPN h2", "-alpn h2", false },
  }) do
    it("answers a connection preface " .. row[1] .. (row[3] and " with HTTP/1.1" or " with HTTP/2"), function()
      local out = s_client(srv.port, "-quiet -ign_eof " .. row[2], H2_BYTES)
      if row[3] then
        assert.truthy(out:find(row[3], 1, true), out)
      else
        assert.falsy(out:find("HTTP/1.1", 1, true), out)
        assert.truthy(out:find(GOAWAY_FRAME, 1, true), out)
      end
    end)
  end

  it("still serves curl --http1.1 and curl --http2 after them", function()
    local out = curl(srv.port, "-sv --http1.1 https://localhost:PORT/hello 2>&1")
    assert.truthy(out:find("ALPN: server accepted http/1.1", 1, true), out)
    assert.truthy(out:find("hello tls", 1, true), out)
    out = curl(srv.port, "-sv --http2 https://localhost:PORT/hello 2>&1")
    assert.truthy(out:find("ALPN: server accepted h2", 1, true), out)
    assert.truthy(out:find("hello tls", 1, true), out)
  end)

  it("refuses renegotiation without harm", function()
    local out = s_client(srv.port, "", "R\n")
    assert.truthy(out:find("RENEGOTIATING", 1, true), out)
    assert.is_true(srv:alive())
    assert.equal("hello tls", (curl(srv.port, "https://localhost:PORT/hello")))
  end)
end)

describe("https next to http", function()
  setup(make_certs)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("serves HTTP and HTTPS listeners side by side (--listen https://)", function()
    local srv = H.start(H.script(string.format(APP, path("a.pem"), path("a.key"), path("b.pem"),
      path("b.key"))), { flags = { "--listen", "https://127.0.0.1:0" } })
    local p = ports(srv)
    assert.equal(2, #p)
    -- the log names each listener with its scheme
    local log = srv:logtext()
    assert.truthy(log:find("listening on http://127.0.0.1:0 (port " .. p[1] .. ")", 1, true), log)
    assert.truthy(log:find("listening on https://127.0.0.1:0 (port " .. p[2] .. ")", 1, true), log)
    local res = assert(H.request(p[1], "GET", "/hello"))
    assert.equal("hello tls", res.body)
    local out, ok = curl(p[2], "https://localhost:PORT/hello")
    assert(ok, out)
    assert.equal("hello tls", out)
    srv:stop()
  end)

  it("takes listen entries with their own certificates from the script", function()
    local srv = H.start(H.script(string.format([[
      local http = require "moonhttp"
      http.server{ listen = { "127.0.0.1:0", { addr = "127.0.0.1:0", tls = { cert = %q, key = %q } } } }
      http.handle("GET /hello", function(req, res) res:write("hi") end)
    ]], path("b.pem"), path("b.key"))), { no_listen = true })
    local p = ports(srv)
    assert.equal(2, #p)
    assert.equal("hi", assert(H.request(p[1], "GET", "/hello")).body)
    local out = s_client(p[2], "-servername a.test")
    assert.truthy(out:find("subject=CN = b.test", 1, true), out)
    srv:stop()
  end)

  it("reports configuration errors", function()
    local app = H.script('require("moonhttp").handle("GET /", function() end)')
    local code, out = H.run({ "--tls-cert", path("a.pem"), app })
    assert.equal(1, code)
    assert.truthy(out:find("--tls-cert and --tls-key go together", 1, true), out)
    code, out = H.run({ "--listen", "127.0.0.1:0", "--tls-cert", path("a.pem"), "--tls-key", path("b.key"), app })
    assert.equal(1, code)
    assert.truthy(out:find("does not match", 1, true), out)
    code, out = H.run({ "--listen", "127.0.0.1:0", "--tls-cert", path("nope.pem"), "--tls-key", path("a.key"), app })
    assert.equal(1, code)
    assert.truthy(out:find("nope.pem", 1, true), out)
    code, out = H.run({ "--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--tls-cert", path("a.pem"),
      "--tls-key", path("a.key"), app })
    assert.equal(1, code)
    assert.truthy(out:find("no listener uses the certificates", 1, true), out)
    code, out = H.run({ "--listen", "https://127.0.0.1:0", app })
    assert.equal(1, code)
    assert.truthy(out:find("no tls certificates", 1, true), out)
  end)

  it("takes min_version = \"1.3\": TLS 1.2 refused, 1.3 served; \"1.2\" serves both", function()
    local srv = H.start(H.script(string.format([[
      local http = require "moonhttp"
      http.server{ listen = { { addr = "127.0.0.1:0", tls = { cert = %q, key = %q, min_version = "1.3" } },
        { addr = "127.0.0.1:0", tls = { { cert = %q, key = %q }, min_version = "1.2" } } } }
      http.handle("GET /hello", function(req, res) res:write("hi") end)
    ]], path("a.pem"), path("a.key"), path("a.pem"), path("a.key"))), { no_listen = true })
    local p = ports(srv)
    local out, ok = curl(p[1], "-v --tls-max 1.2 https://localhost:PORT/hello")
    assert.falsy(ok, out)
    assert.falsy(out:find("\nhi", 1, true), out)
    out = s_client(p[1], "-tls1_2")
    assert.falsy(out:find("Cipher is ECDHE", 1, true), out)
    out, ok = curl(p[1], "-v --tlsv1.3 https://localhost:PORT/hello")
    assert(ok, out)
    assert.truthy(out:find("SSL connection using TLSv1.3", 1, true), out)
    for _, v in ipairs({ "1.2", "1.3" }) do
      out, ok = curl(p[2], "-v --tls-max " .. v .. " https://localhost:PORT/hello")
      assert(ok, out)
      assert.truthy(out:find("SSL connection using TLSv" .. v, 1, true), out)
    end
    srv:stop()
  end)

  it("names the choices for a mistyped min_version or option", function()
    for _, row in ipairs({
      { 'tls = { cert = %q, key = %q, min_version = "1.1" }', 'tls.min_version: expected "1.2" or "1.3"' },
      { 'tls = { cert = %q, key = %q, min_version = 1.3 }', 'tls.min_version: expected "1.2" or "1.3"' },
      { 'tls = { { cert = %q, key = %q }, min_versoin = "1.3" }', "min_version" },
      { 'listen = { { addr = "127.0.0.1:0", tls = { cert = %q, key = %q, min_version = "TLS1.3" } } }',
        'listen[1].tls.min_version: expected "1.2" or "1.3"' },
    }) do
      local app = H.script(string.format('local http = require "moonhttp"\nhttp.server{ ' .. row[1] .. ' }\n',
        path("a.pem"), path("a.key")))
      local code, out = H.run({ app })
      assert.equal(1, code, out)
      assert.truthy(out:find(row[2], 1, true), row[1] .. ": " .. out)
    end
  end)
end)

describe("certificate reload", function()
  setup(make_certs)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  local function subject(port)
    local out = s_client(port, "-servername a.test", "")
    return out:match("subject=[^\n]*CN%s*=%s*([%w%.%-]+)")
  end

  it("serves new certificates after SIGHUP, without dropping open connections", function()
    local function cp(from, to) assert(os.execute("cp " .. q(path(from)) .. " " .. q(path(to)))) end
    cp("a.pem", "live.pem")
    cp("a.key", "live.key")
    local app = H.script('local http = require "moonhttp"\n'
      .. 'http.handle("GET /hello", function(req, res) res:write("hello") end)\n')
    local srv = H.start(app, { no_listen = true, flags = { "--listen", "https://127.0.0.1:0",
      "--tls-cert", path("live.pem"), "--tls-key", path("live.key") } })
    local port = ports(srv)[1]
    assert.equal("a.test", subject(port))
    -- a keep-alive connection opened before the reload keeps working after it
    local inp = H.tmpname(".fifo")
    local out = H.tmpname(".out")
    assert(os.execute("mkfifo " .. q(inp)))
    local client = io.popen(string.format(
      "(printf 'GET /hello HTTP/1.1\\r\\nHost: a.test\\r\\n\\r\\n'; sleep 1; printf 'GET /hello HTTP/1.1\\r\\nHost: a.test\\r\\nConnection: close\\r\\n\\r\\n'; sleep 1) | "
      .. "timeout 10 openssl s_client -quiet -connect 127.0.0.1:%d -CAfile %s -servername a.test >%s 2>&1",
      port, q(path("ca.pem")), q(out)))
    H.sleep(0.5)
    cp("b.pem", "live.pem")
    cp("b.key", "live.key")
    srv:signal("HUP")
    assert.truthy(srv:wait_log("reloaded", 3), srv:logtext())
    client:close()
    local text = H.read_file(out) or ""
    local _, n = text:gsub("HTTP/1.1 200 OK", "")
    assert.equal(2, n, text)
    assert.equal("b.test", subject(port))
    os.remove(inp)
    srv:stop()
  end)
end)
