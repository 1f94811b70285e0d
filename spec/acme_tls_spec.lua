-- The server's side of ACME challenges through the real binary: a listener
-- with tls = { acme = {...} } and no certificate starts; the shared zone
-- "moonhttp.acme" exists and Lua writes the answers into it (as the ACME
-- client does); HTTP-01 is answered in C on the plain listener before
-- routing; TLS-ALPN-01 (ALPN acme-tls/1) gets the validation certificate
-- from the zone and the connection ends with the handshake; other
-- handshakes before a certificate exists end with an alert. Checked with
-- curl and openssl s_client.
local H = require "helper"
local q = H.shell_quote

local function ports(srv)
  local list = {}
  for p in srv:logtext():gmatch("listening on [^\n]* %(port (%d+)%)") do list[#list + 1] = tonumber(p) end
  return list
end

-- /put writes a key of the zone as the ACME client would; /alpn stores a
-- validation certificate made by core.acme.alpn_cert and answers its PEM.
-- Every other path is the app's catch-all, which says it ran.
local APP = [[
local http = require "moonhttp"
local acme = require("moonhttp.core").acme
-- a CA that is not there (the client's retries wait a minute): only this spec's installs happen
http.server{ listen = { "127.0.0.1:0", { addr = "127.0.0.1:0", tls = { acme = { domains = { "a.test" },
  directory = "https://127.0.0.1:1/dir", storage = "]] .. H.tmpname("-acme") .. [[" } } } } }
http.handle("GET /{path...}", function(req, res) res:header("X-App", "yes"); res:write("app " .. req.path) end)
http.handle("POST /put", function(req, res)
  assert(http.shared["moonhttp.acme"]:set(req:arg("k"), req:body()))
  res:write("ok")
end)
http.handle("POST /alpn", function(req, res)
  local cert, key = assert(acme.alpn_cert(req:arg("name"), req:arg("ka")))
  assert(http.shared["moonhttp.acme"]:set("alpn:" .. req:arg("name"), cert .. key))
  res:write(cert)
end)
]]

local function s_client(port, args)
  -- A request follows the handshake: a validation connection must not answer it.
  return H.sh(string.format("(printf 'GET / HTTP/1.1\\r\\nHost: a.test\\r\\n\\r\\n' | "
    .. "timeout 10 openssl s_client -connect 127.0.0.1:%d %s -showcerts -ign_eof 2>&1; echo \"exit=$?\")", port, args))
end

local function fingerprint(pem)
  local f = H.tmpname(".pem")
  H.write_file(f, pem)
  local out = H.sh("openssl x509 -noout -fingerprint -sha256 -in " .. q(f))
  os.remove(f)
  return out:match("Fingerprint=([%x:]+)")
end

describe("ACME challenges on the listeners", function()
  local srv, plain, tls
  setup(function()
    srv = H.start(APP, { no_listen = true })
    local p = ports(srv)
    plain, tls = p[1], p[2]
    assert(plain and tls, srv:logtext())
  end)
  teardown(function() srv:stop() end)

  local function put(k, v)
    local res = H.request(plain, "POST", "/put?k=" .. k, nil, v)
    assert.equal(200, res.status)
  end

  it("HTTP-01: answers a stored token in C, 404 for an unknown one; the app's catch-all sees neither", function()
    put("http01:tok-A_1", "tok-A_1.thumbprint")
    -- { path, status, body (nil: any), whether the app answered }
    local rows = {
      { "/.well-known/acme-challenge/tok-A_1", 200, "tok-A_1.thumbprint", false },
      { "/.well-known/acme-challenge/tok-A_1?x=1", 200, "tok-A_1.thumbprint", false },
      { "/.well-known/acme-challenge/unknown", 404, nil, false },
      { "/.well-known/acme-challenge/", 404, nil, false },
      { "/.well-known/acme-challenge/bad%2Ftoken", 404, nil, false },
      { "/.well-known/acme-challenge/tok-A_1/more", 404, nil, false },
      { "/.well-known/other", 200, "app /.well-known/other", true },
      { "/hello", 200, "app /hello", true },
    }
    for _, row in ipairs(rows) do
      local res = H.request(plain, "GET", row[1])
      assert.equal(row[2], res.status, row[1])
      if row[3] then assert.equal(row[3], res.body, row[1]) end
      assert.equal(row[4], res.headers["x-app"] == "yes", row[1])
      if row[2] == 200 and not row[4] then assert.equal("text/plain", res.headers["content-type"]) end
    end
    local head = H.request(plain, "HEAD", "/.well-known/acme-challenge/tok-A_1")
    assert.equal(200, head.status)
    local post = H.request(plain, "POST", "/.well-known/acme-challenge/tok-A_1", nil, "")
    assert.equal(405, post.status)
  end)

  it("refuses an ordinary handshake with an alert while no certificate is installed", function()
    for _, v in ipairs({ "-tls1_3", "-tls1_2" }) do
      local out = s_client(tls, v .. " -servername a.test")
      assert.truthy(out:find("alert handshake failure", 1, true), out)
      assert.falsy(out:find("exit=124", 1, true), out)
    end
    local out, ok = H.sh(string.format("curl -sS -k --max-time 10 https://127.0.0.1:%d/ 2>&1", tls))
    assert.is_false(ok, out)
    assert.truthy(srv:alive())
  end)

  it("TLS-ALPN-01: serves the stored validation certificate, agrees acme-tls/1, closes after the handshake", function()
    local res = H.request(plain, "POST", "/alpn?name=a.test&ka=tok.thumb", nil, "")
    assert.equal(200, res.status)
    local stored = res.body
    -- P-521 first: a key share the server does not take, so TLS 1.3 goes through a
    -- HelloRetryRequest and a second ClientHello.
    for _, v in ipairs({ "-tls1_3", "-tls1_2", "-tls1_3 -groups P-521:P-256" }) do
      local out = s_client(tls, v .. " -servername a.test -alpn acme-tls/1")
      assert.truthy(out:find("ALPN protocol: acme-tls/1", 1, true), out)
      local served = out:match("(%-%-%-%-%-BEGIN CERTIFICATE%-%-%-%-%-.-%-%-%-%-%-END CERTIFICATE%-%-%-%-%-)")
      assert(served, out)
      assert.equal(fingerprint(stored), fingerprint(served))
      -- No answer to the request, and the server closed (s_client did not wait for its timeout).
      assert.falsy(out:find("HTTP/1.1", 1, true), out)
      assert.falsy(out:find("exit=124", 1, true), out)
    end
  end)

  it("TLS-ALPN-01: no validation certificate for the name (or no SNI) is an alert", function()
    for _, args in ipairs({ "-servername b.test -alpn acme-tls/1", "-noservername -alpn acme-tls/1" }) do
      local out = s_client(tls, args)
      assert.truthy(out:find("unrecognized name", 1, true), out)
      assert.falsy(out:find("ALPN protocol: acme-tls/1", 1, true), out)
    end
    assert.truthy(srv:alive())
  end)
end)

describe("a server without ACME", function()
  it("routes /.well-known/acme-challenge/ to the app and does not offer acme-tls/1", function()
    local certs = require "helpers.certs"
    local dir = certs.ca_and_server("-noacme")
    local srv = H.start(string.format([[
local http = require "moonhttp"
http.server{ listen = { "127.0.0.1:0", { addr = "127.0.0.1:0", tls = { cert = %q, key = %q } } } }
http.handle("GET /{path...}", function(req, res) res:write("app " .. req.path) end)
]], dir .. "/srv.pem", dir .. "/srv.key"), { no_listen = true })
    finally(function()
      srv:stop()
      os.execute("rm -rf " .. q(dir))
    end)
    local p = ports(srv)
    local res = H.request(p[1], "GET", "/.well-known/acme-challenge/tok")
    assert.equal(200, res.status)
    assert.equal("app /.well-known/acme-challenge/tok", res.body)
    local out = s_client(p[2], "-servername localhost -alpn acme-tls/1")
    assert.truthy(out:find("no application protocol", 1, true), out)
  end)
end)

describe("tls.acme settings", function()
  -- { tls table, error text (nil: starts) }
  local rows = {
    { [[{ acme = "yes" }]], "tls.acme: expected a table" },
    { [[{ acm = {} }]], 'did you mean "acme"' },
    -- acme.lua checks the options inside (spec/acme_options_spec.lua); these start
    { [[{ acme = { domains = { "a.test" }, challenge = "tls-alpn-01" } }]], nil },
  }
  for _, row in ipairs(rows) do
    it("tls = " .. row[1], function()
      local path = H.script("local http = require 'moonhttp'\nhttp.server{ listen = { { addr = '127.0.0.1:0', tls = "
        .. row[1] .. " } } }\nhttp.handle('GET /', function(req, res) res:write('x') end)\n")
      local code, out = H.run({ "--check", path })
      if row[2] then
        assert.are_not.equal(0, code)
        assert.truthy(out:find(row[2], 1, true), out)
      else
        assert.equal(0, code, out)
      end
    end)
  end
end)

describe("core.acme.install", function()
  local certs = require "helpers.certs"
  local srv, plain, tls, dir
  setup(function()
    dir = certs.dir("-install")
    certs.self_signed(dir, "ca", "/CN=install spec CA")
    certs.leaf(dir, "one", "/CN=a.test", { ext = "subjectAltName=DNS:a.test", serial = 4097 })
    certs.leaf(dir, "two", "/CN=a.test", { ext = "subjectAltName=DNS:a.test", serial = 8194 })
    srv = H.start([[
local http = require "moonhttp"
local acme = require("moonhttp.core").acme
-- a CA that is not there (the client's retries wait a minute): only this spec's installs happen
http.server{ listen = { "127.0.0.1:0", { addr = "127.0.0.1:0", tls = { acme = { domains = { "a.test" },
  directory = "https://127.0.0.1:1/dir", storage = "]] .. dir .. [[/acme" } } } } }
http.handle("GET /", function(req, res) res:write("hello") end)
http.handle("POST /install", function(req, res)
  local ok, err = acme.install(tonumber(req:arg("n")), req:arg("cert"), req:arg("key"))
  res:write(tostring(ok) .. " " .. tostring(err))
end)
]], { no_listen = true })
    local p = ports(srv)
    plain, tls = p[1], p[2]
  end)
  teardown(function()
    srv:stop()
    os.execute("rm -rf " .. q(dir))
  end)

  local function install(n, name)
    local res = H.request(plain, "POST", string.format("/install?n=%d&cert=%s/%s.pem&key=%s/%s.key", n, dir, name, dir, name), nil, "")
    assert.equal(200, res.status)
    return res.body
  end

  local function served_serial()
    local out = H.sh(string.format("echo | timeout 10 openssl s_client -connect 127.0.0.1:%d -servername a.test 2>/dev/null"
      .. " | openssl x509 -noout -serial", tls))
    return out:match("serial=(%x+)")
  end

  local function curl_cmd()
    return string.format("curl -s -o /dev/null -w '%%{http_code}\\n' --max-time 10 --cacert %s --resolve a.test:%d:127.0.0.1 https://a.test:%d/",
      q(dir .. "/ca.pem"), tls, tls)
  end

  it("serves the installed certificate, refuses bad calls without changing it, keeps it over a reload", function()
    assert.equal("true nil", install(2, "one"))
    assert.equal("1001", served_serial())
    assert.equal("200\n", (H.sh(curl_cmd())))
    -- { listener, cert name, error }
    local bad = {
      { 1, "one", "is not a TLS listener with acme" },
      { 3, "one", "no listener 3 (there are 2)" },
      { 0, "one", "listener index must be 1 or more" },
      { 2, "missing", "missing.pem" },
    }
    for _, row in ipairs(bad) do
      local body = install(row[1], row[2])
      assert.truthy(body:find("^nil "), body)
      assert.truthy(body:find(row[3], 1, true), body)
    end
    assert.equal("1001", served_serial())
    assert.equal("true nil", install(2, "two"))
    assert.equal("2002", served_serial())
    srv:signal("HUP")
    srv:wait_log("reloaded", 10)
    assert.equal("2002", served_serial())
  end)

  it("swaps certificates under a loop of handshakes without one failing", function()
    local out = H.tmpname(".loop")
    local done = out .. ".done"
    os.execute(string.format("(for i in $(seq 150); do %s; done > %s; touch %s) >/dev/null 2>&1 &", curl_cmd(), out, done))
    local swaps = 0
    while not H.read_file(done) do
      assert.equal("true nil", install(2, swaps % 2 == 0 and "one" or "two"))
      swaps = swaps + 1
      H.sleep(0.02)
    end
    local codes = H.read_file(out)
    local n, failed = 0, {}
    for code in codes:gmatch("[^\n]+") do
      n = n + 1
      if code ~= "200" then failed[#failed + 1] = code end
    end
    assert.equal(150, n)
    assert.same({}, failed)
    assert.is_true(swaps >= 10, "only " .. swaps .. " swaps")
    os.remove(out); os.remove(done)
  end)
end)
