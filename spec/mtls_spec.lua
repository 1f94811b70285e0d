-- Mutual TLS on a listener (tls = { client_ca =, client_auth = }) and
-- req:tls(): certificates made here with the openssl CLI, clients are curl
-- (--cert/--key) over HTTP/1.1 and HTTP/2.
local H = require "helper"
local certs = require "helpers.certs"

local q = H.shell_quote
local sh = H.sh

local dir
local function path(name) return dir .. "/" .. name end

-- ca signs the server (localhost), the client "client-one" and "expired" (in 2020);
-- other-ca signs "intruder".
local function make_certs()
  dir = certs.dir("-mtls")
  for _, ca in ipairs({ "ca", "other-ca" }) do certs.self_signed(dir, ca, "/CN=" .. ca) end
  local leaves = {
    { "server", "ca", "/CN=localhost", "subjectAltName=DNS:localhost" },
    { "client", "ca", "/O=moonhttp/CN=client-one",
      "subjectAltName=DNS:client.test,IP:10.1.2.3,email:one@client.test\nextendedKeyUsage=clientAuth" },
    { "intruder", "other-ca", "/CN=intruder", "extendedKeyUsage=clientAuth" },
  }
  for _, l in ipairs(leaves) do
    certs.leaf(dir, l[1], l[3], { ca = l[2], ext = l[4], serial = 4660 })
  end
  certs.expired(dir, "expired", "/CN=expired")
end

-- The alerts that end a refused client's connection, as openssl s_client -msg shows them
-- ("<<< TLS 1.3, Alert [length 0002], fatal unknown_ca"), and the server's log line:
-- { client certificate (false: none), s_client version flag, alert, log reason }.
local REFUSALS = {
  { "intruder", "-tls1_3", "fatal unknown_ca", "certificate from an unknown CA (TLS 1.3" },
  { "intruder", "-tls1_2", "fatal unknown_ca", "certificate from an unknown CA (TLS 1.2" },
  { "expired", "-tls1_3", "fatal certificate_expired", "certificate expired (TLS 1.3" },
  { "expired", "-tls1_2", "fatal certificate_expired", "certificate expired (TLS 1.2" },
  { false, "-tls1_3", "fatal certificate_required", "no client certificate (TLS 1.3" },
  { false, "-tls1_2", "fatal handshake_failure", "no client certificate (TLS 1.2" },
}

-- What the server's records said to s_client: its alerts ("<<< ... Alert") and whether an
-- HTTP answer came; s_client's own alerts (">>>", e.g. bad_record_mac) are returned apart.
local function s_client(port, who, version)
  local cert = who and string.format(" -cert %s -key %s", q(path(who .. ".pem")), q(path(who .. ".key"))) or ""
  local out = sh(string.format("printf 'GET /who HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' | "
    .. "timeout 10 openssl s_client -connect 127.0.0.1:%d %s%s -msg -ign_eof 2>&1", port, version, cert))
  local got, sent = {}, {}
  for dir, alert in out:gmatch("\n(...) TLS 1%.%d, Alert %[length 0002%], (%a+ [%a_]+)") do
    if dir == "<<<" then got[#got + 1] = alert else sent[#sent + 1] = alert end
  end
  return table.concat(got, ","), table.concat(sent, ","), out
end

-- Answers with req:tls()'s fields, "|"-separated ("plain" without TLS).
local APP = [[
local http = require "moonhttp"
http.server{ read_header_timeout = 2, listen = {
  { addr = "127.0.0.1:0", tls = { cert = %q, key = %q, client_ca = %q } },
  { addr = "127.0.0.1:0", tls = { cert = %q, key = %q, client_ca = %q, client_auth = "optional" } },
  "127.0.0.1:0",
} }
http.handle("GET /who", function(req, res)
  local t = req:tls()
  if not t then return res:write("plain") end
  local c = t.client_cert
  res:write(table.concat({ req.proto, t.version, t.cipher, t.alpn or "-", t.sni or "-",
    c and c.subject or "none", c and c.issuer or "-", c and c.serial or "-", c and c.not_after or "-",
    c and table.concat(c.sans, ",") or "-",
    c and (c.pem:sub(1, 28) == "-----BEGIN CERTIFICATE-----\n" and "pem" or "bad pem") or "-" }, "|"))
end)
]]

local function ports(srv)
  local list = {}
  for p in srv:logtext():gmatch("listening on [^\n]* %(port (%d+)%)") do list[#list + 1] = tonumber(p) end
  return list
end

local function curl(port, args, who)
  local cert = who and string.format("--cert %s --key %s ", q(path(who .. ".pem")), q(path(who .. ".key"))) or ""
  return sh(string.format("curl -sS --max-time 10 --cacert %s %s%s https://localhost:%d/who",
    q(path("ca.pem")), cert, args, port))
end

describe("mutual TLS", function()
  local srv, p
  setup(function()
    make_certs()
    srv = H.start(H.script(string.format(APP, path("server.pem"), path("server.key"), path("ca.pem"),
      path("server.pem"), path("server.key"), path("ca.pem"))), { no_listen = true })
    p = ports(srv)
    assert.equal(3, #p)
  end)
  teardown(function()
    srv:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  it("require: serves a client with a certificate from client_ca and shows it to the handler", function()
    for _, row in ipairs({ { "--http1.1", "HTTP/1.1", "http/1.1" }, { "--http2", "HTTP/2.0", "h2" } }) do
      local out, ok = curl(p[1], row[1], "client")
      assert(ok, out)
      local f = {}
      for v in (out .. "|"):gmatch("([^|]*)|") do f[#f + 1] = v end
      assert.equal(row[2], f[1], out)
      assert.equal("TLSv1.3", f[2], out)
      assert.matches("^TLS1%-3%-", f[3], out)
      assert.equal(row[3], f[4], out)
      assert.equal("localhost", f[5], out)
      assert.equal("O=moonhttp, CN=client-one", f[6], out)
      assert.equal("CN=ca", f[7], out)
      assert.equal("12:34", f[8], out)
      assert.matches("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%dZ$", f[9], out)
      assert.equal("DNS:client.test,IP:10.1.2.3,email:one@client.test", f[10], out)
      assert.equal("pem", f[11], out)
    end
    -- and over TLS 1.2
    local out, ok = curl(p[1], "--http1.1 --tls-max 1.2", "client")
    assert(ok, out)
    assert.truthy(out:find("|TLSv1.2|", 1, true) and out:find("CN=client-one", 1, true), out)
  end)

  it("require: refuses a client without a certificate, or with one from another CA", function()
    for _, who in ipairs({ false, "intruder" }) do
      for _, v in ipairs({ "", "--tls-max 1.2" }) do
        local out, ok = curl(p[1], "--http1.1 " .. v, who or nil)
        assert.falsy(ok, out)
        assert.falsy(out:find("TLSv1", 1, true), out)
      end
    end
    assert.is_true(srv:alive())
  end)

  it("require: a refused client reads why, in an alert it can decrypt; the server logs it at info", function()
    for _, row in ipairs(REFUSALS) do
      local who, version, alert, reason = table.unpack(row)
      local got, sent, out = s_client(p[1], who, version)
      local name = (who or "no certificate") .. " " .. version
      assert.equal(alert, got, name .. ": " .. out)
      assert.equal("", sent, name .. " (s_client could not read the server's records): " .. out)
      assert.falsy(out:find("HTTP/1.1 200", 1, true), name .. ": " .. out)
      local line = "%[info%] %d+: TLS client refused: " .. reason:gsub("%p", "%%%0") .. ", peer 127%.0%.0%.1:%d+%)"
      local deadline = H.now() + 5
      while not srv:logtext():find(line) and H.now() < deadline do H.sleep(0.05) end
      assert.truthy(srv:logtext():find(line), name .. ": " .. srv:logtext())
    end
    -- the accepted client, for contrast: an answer and a close_notify, no fatal alert
    local got, _, out = s_client(p[1], "client", "-tls1_3")
    assert.truthy(out:find("HTTP/1.1 200", 1, true), out)
    assert.falsy(got:find("fatal", 1, true), out)
  end)

  it("optional: serves a client without a certificate (client_cert nil), refuses a bad one", function()
    local out, ok = curl(p[2], "--http1.1")
    assert(ok, out)
    assert.truthy(out:find("|none|", 1, true), out)
    out, ok = curl(p[2], "--http1.1", "client")
    assert(ok, out)
    assert.truthy(out:find("|O=moonhttp, CN=client-one|", 1, true), out)
    out, ok = curl(p[2], "--http1.1", "intruder")
    assert.falsy(ok, out)
  end)

  it("req:tls() is nil on a plain connection", function()
    local res = assert(H.request(p[3], "GET", "/who"))
    assert.equal("plain", res.body)
  end)

  -- moonhttp as the client: http.client{ tls = { cert, key } } and http.tcp():connect / tls_handshake
  local CLIENT = [[
local ca, port, cert, key = arg[1], tonumber(arg[2]), arg[3], arg[4]
local mine = cert ~= "" and { cert = cert, key = key } or {}
local c = http.client{ tls = { ca = ca, cert = mine.cert, key = mine.key } }
local res, err = c:fetch("https://localhost:" .. port .. "/who")
print("fetch", res and res.status, res and res:body() or err)
local s = http.tcp()
local ok, e = s:connect("localhost", port, { tls = { ca = ca, cert = mine.cert, key = mine.key } })
if ok then
  s:send("GET /who HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
  local all = s:receive("a")
  print("tcp", (all or ""):match("\r\n\r\n(.*)$"))
else
  print("tcp", e)
end
s = http.tcp()
assert(s:connect("localhost", port))
ok, e = s:tls_handshake({ ca = ca, cert = mine.cert, key = mine.key })
if ok then
  s:send("GET /who HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
  print("handshake", (s:receive("a") or ""):match("\r\n\r\n(.*)$"))
else
  print("handshake", e)
end
]]

  it("moonhttp's client presents tls.cert/tls.key: fetch, tcp connect and tls_handshake", function()
    local code, out = H.run_lua(CLIENT, path("ca.pem"), tostring(p[1]), path("client.pem"), path("client.key"))
    assert.equal(0, code, out)
    for _, what in ipairs({ "fetch\t200\t", "tcp\t", "handshake\t" }) do
      local line = out:match(what .. "[^\n]*")
      assert.truthy(line, out)
      assert.truthy(line:find("|TLSv1.3|", 1, true) and line:find("|O=moonhttp, CN=client-one|", 1, true), line)
    end
    -- without a certificate the same server refuses all three (in TLS 1.3 the client's
    -- handshake ends before the server has judged its certificate: the refusal
    -- arrives as an alert on the first read or write, not as a handshake error)
    code, out = H.run_lua(CLIENT, path("ca.pem"), tostring(p[1]), "", "")
    assert.equal(0, code, out)
    assert.falsy(out:find("client-one", 1, true), out)
    assert.falsy(out:find("TLSv1", 1, true), out)
    assert.truthy(out:find("fetch\tnil\t", 1, true), out)
  end)

  it("moonhttp's client reports a client certificate it cannot use", function()
    local code, out = H.run_lua([[
local ok, err = pcall(http.client, { tls = { cert = arg[1] } })
print("half", err)
local c = http.client{ tls = { ca = arg[3], cert = arg[1], key = arg[2] } }
local res, e, detail = c:fetch("https://localhost:" .. arg[4] .. "/who")
print("mismatch", e, detail)
]], path("client.pem"), path("intruder.key"), path("ca.pem"), tostring(p[1]))
    assert.equal(0, code, out)
    assert.truthy(out:find("tls.cert and tls.key go together", 1, true), out)
    assert.truthy(out:find("mismatch\ttls\ttls: client key does not match its certificate", 1, true), out)
  end)

  it("reports bad client_auth settings", function()
    for _, row in ipairs({
      { 'client_ca = %q, client_auth = "required"', 'tls.client_auth: expected "require" or "optional"' },
      { 'client_auth = "optional"', "tls.client_auth: needs client_ca" },
      { 'client_ca = true', "tls.client_ca: expected a PEM file name" },
      { 'client_ca = %q', "client_ca" },
    }) do
      local opt = string.format(row[1], row[2] == "client_ca" and path("nope.pem") or path("ca.pem"))
      local app = H.script(string.format('local http = require "moonhttp"\n' ..
        'http.server{ tls = { cert = %q, key = %q, %s } }\n', path("server.pem"), path("server.key"), opt))
      local code, out = H.run({ "--listen", "https://127.0.0.1:0", app })
      assert.equal(1, code, out)
      assert.truthy(out:find(row[2], 1, true), opt .. ": " .. out)
    end
  end)
end)
