-- The client side's TLS options (issue 31): tls.min_version on http.client,
-- http.tcp():connect / :tls_handshake, moonhttp.redis and moonhttp.pg, each
-- against a peer that speaks only TLS 1.2 (openssl s_server -tls1_2,
-- redis-server --tls-protocols, PostgreSQL's ssl_max_protocol_version);
-- and the Lua socket pool key, which carries the TLS options so two
-- connects with different client certificates never share a connection.
local H = require "helper"
local certs = require "helpers.certs"
local P = require "pg_helper"

local q = H.shell_quote

local dir
local function path(name) return dir .. "/" .. name end

-- ca signs the server (localhost, 127.0.0.1) and two client certificates.
local function make_certs()
  dir = certs.dir("-tlsopts")
  certs.self_signed(dir, "ca", "/CN=ca")
  for _, l in ipairs({
    { "server", "/CN=localhost", "subjectAltName=DNS:localhost,IP:127.0.0.1" },
    { "one", "/CN=client-one", "extendedKeyUsage=clientAuth" },
    { "two", "/CN=client-two", "extendedKeyUsage=clientAuth" },
  }) do
    certs.leaf(dir, l[1], l[2], { ext = l[3], serial = #l[1] })
  end
end

-- moonhttp with an optional client certificate: /who answers with its subject and the version.
local APP = [[
local http = require "moonhttp"
http.server{ tls = { cert = %q, key = %q, client_ca = %q, client_auth = "optional" } }
http.handle("GET /who", function(req, res)
  local t = req:tls()
  res:write((t.client_cert and t.client_cert.subject or "none") .. "|" .. t.version)
end)
]]

local function kv(source, ...)
  return H.run_kv(nil, source, ...)
end

describe("client TLS options", function()
  local srv, old, old_port -- moonhttp (TLS 1.3 and 1.2), openssl s_server -tls1_2
  setup(function()
    make_certs()
    srv = H.start(H.script(string.format(APP, path("server.pem"), path("server.key"), path("ca.pem"))),
      { no_listen = true, flags = { "--listen", "https://127.0.0.1:0" } })
    old_port = P.free_port()
    old = H.service(string.format("openssl s_server -accept 127.0.0.1:%d -tls1_2 -www -cert %s -key %s",
      old_port, q(path("server.pem")), q(path("server.key"))), function(text)
        if text:find("ACCEPT", 1, true) then return true end
      end)
  end)
  teardown(function()
    if old then old:stop() end
    if srv then srv:stop() end
    os.execute("rm -rf " .. q(dir))
  end)

  it("min_version = \"1.3\" refuses a TLS 1.2 server on fetch, connect and tls_handshake", function()
    -- s_server serves one connection at a time: each check closes its own.
    local s = kv([[
local ca, new, old = arg[1], tonumber(arg[2]), tonumber(arg[3])
local function fetch(port, v)
  local c = http.client{ tls = { ca = ca, min_version = v }, max_idle = 0 }
  local r, e, detail = c:fetch("https://localhost:" .. port .. "/who")
  if not r then return "error", e, detail end
  local b = r:body()
  return r.status, b:match("Protocol *: *(%S+)") or b:match("TLSv1%.%d")
end
local function connect(port, v)
  local s = http.tcp()
  local ok, e = s:connect("localhost", port, { tls = { ca = ca, min_version = v } })
  s:close()
  if ok then return "ok" end
  return "error", e
end
local function handshake(port, v)
  local s = http.tcp()
  assert(s:connect("127.0.0.1", port))
  local ok, e = s:tls_handshake({ ca = ca, server_name = "localhost", min_version = v })
  s:close()
  if ok then return "ok" end
  return "error", e
end
print("fetch_new13", fetch(new, "1.3"))
print("fetch_old13", fetch(old, "1.3"))
print("fetch_old12", fetch(old, "1.2"))
print("fetch_old", fetch(old, nil))
print("connect_old13", connect(old, "1.3"))
print("connect_old", connect(old, nil))
print("connect_new13", connect(new, "1.3"))
print("handshake_old13", handshake(old, "1.3"))
print("handshake_old12", handshake(old, "1.2"))
]], path("ca.pem"), tostring(srv.port), tostring(old_port))
    assert.equal("200\tTLSv1.3", s.fetch_new13)
    assert.matches("^error\ttls\ttls: ", s.fetch_old13) -- the kind, then the detail
    assert.equal("200\tTLSv1.2", s.fetch_old12)
    assert.equal("200\tTLSv1.2", s.fetch_old)
    assert.matches("^error\ttls: ", s.connect_old13)
    assert.equal("ok", s.connect_old)
    assert.equal("ok", s.connect_new13)
    assert.matches("^error\ttls: ", s.handshake_old13)
    assert.equal("ok", s.handshake_old12)
  end)

  it("names a bad min_version", function()
    local s = kv([[
print("client", select(2, pcall(http.client, { tls = { min_version = "1.1" } })))
local ok, e = pcall(function() return http.tcp():connect("localhost", 1, { tls = { min_version = 1.3 } }) end)
print("connect", e)
local redis = require "moonhttp.redis"
print("redis", select(2, pcall(redis.connect, { tls = { min_version = "TLSv1.3" } })))
local pg = require "moonhttp.pg"
print("pg", select(2, pcall(pg.pool, { host = "localhost", user = "u", tls = { min_version = "1.0" } })))
]])
    assert.matches('http.client: tls.min_version: expected "1.2" or "1.3"$', s.client)
    assert.matches('sock:connect: tls.min_version: expected "1.2" or "1.3"$', s.connect)
    assert.matches('redis.connect: tls.min_version: expected "1.2" or "1.3"$', s.redis)
    assert.matches('pg.pool: tls.min_version: expected "1.2" or "1.3"$', s.pg)
  end)

  it("never hands a pooled connection to a connect with another client certificate", function()
    local s = kv([[
local ca, port, dir = arg[1], tonumber(arg[2]), arg[3]
local function who(name)
  local s = http.tcp()
  local mine = name and { ca = ca, cert = dir .. "/" .. name .. ".pem", key = dir .. "/" .. name .. ".key" }
    or { ca = ca }
  assert(s:connect("localhost", port, { tls = mine }))
  assert(s:send("GET /who HTTP/1.1\r\nHost: localhost\r\n\r\n"))
  local len
  repeat
    local line = assert(s:receive("l"))
    len = len or tonumber(line:lower():match("^content%-length: *(%d+)"))
  until line == ""
  local body = assert(s:receive(len))
  local reused = s:reused()
  assert(s:keepalive())
  return body:match("^[^|]*"), reused
end
print("one", who("one"))
print("two", who("two"))
print("two_again", who("two"))
print("none", who(nil))
print("one_again", who("one"))
-- http.client: a pool per client, so per certificate
for _, name in ipairs({ "one", "two" }) do
  local c = http.client{ tls = { ca = ca, cert = dir .. "/" .. name .. ".pem", key = dir .. "/" .. name .. ".key" } }
  print("fetch_" .. name, (assert(c:fetch("https://localhost:" .. port .. "/who")):body():match("^[^|]*")))
end
]], path("ca.pem"), tostring(srv.port), dir)
    assert.equal("CN=client-one\t0", s.one)
    assert.equal("CN=client-two\t0", s.two)
    assert.equal("CN=client-two\t1", s.two_again)
    assert.equal("none\t0", s.none)
    assert.equal("CN=client-one\t1", s.one_again)
    assert.equal("CN=client-one", s.fetch_one)
    assert.equal("CN=client-two", s.fetch_two)
  end)

  it("moonhttp.redis over TLS: tls.min_version against a TLS 1.2 redis-server", function()
    local port = P.free_port()
    local rs = H.redis(string.format("--tls-port %d --tls-cert-file %s --tls-key-file %s "
      .. "--tls-ca-cert-file %s --tls-auth-clients no --tls-protocols TLSv1.2", port,
      q(path("server.pem")), q(path("server.key")), q(path("ca.pem"))))
    local ok, err = pcall(function()
      local s = kv([[
local redis = require "moonhttp.redis"
local port, ca = tonumber(arg[1]), arg[2]
local function ping(tls)
  local r, e = redis.connect{ port = port, tls = tls, timeout = 2 }
  if not r then return "error", e end
  local pong, pe = r:ping()
  if not pong then return "error", pe end
  r:keepalive()
  return pong
end
print("tls12", ping({ ca = ca, server_name = "localhost" }))
print("tls13", ping({ ca = ca, server_name = "localhost", min_version = "1.3" }))
print("plain", ping(nil))
]], tostring(port), path("ca.pem"))
      assert.equal("PONG", s.tls12)
      assert.matches("^error\ttls: ", s.tls13)
      assert.matches("^error\t", s.plain)
    end)
    rs:stop()
    assert(ok, err)
  end)

  it("moonhttp.pg: tls.min_version against PostgreSQL with ssl_max_protocol_version", function()
    local cluster = P.start()
    local ok, err = pcall(function()
      local function try()
        return kv(string.format([==[
local pg = require "moonhttp.pg"
local OPTS = %s
local function try(v)
  OPTS.tls = { ca = %q, server_name = "localhost", min_version = v }
  local r, e = pg.pool(OPTS):query("select version from pg_stat_ssl where pid = pg_backend_pid()")
  if not r then return "error", tostring(e) end
  return r[1].version
end
print("v13", try("1.3"))
print("v12", try("1.2"))
]==], cluster:pool_opts("tls"), cluster.cert))
      end
      local s = try()
      assert.equal("TLSv1.3", s.v13)
      assert.equal("TLSv1.3", s.v12)
      cluster:psql("ALTER SYSTEM SET ssl_max_protocol_version = 'TLSv1.2'")
      cluster:psql("SELECT pg_reload_conf()")
      s = try()
      assert.matches("^error\t", s.v13)
      assert.equal("TLSv1.2", s.v12)
    end)
    cluster:stop()
    assert(ok, err)
  end)
end)
