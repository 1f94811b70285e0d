-- http.fetch("https://127.0.0.1:PORT/") checks the certificate's iPAddress
-- subjectAltName, as Go and curl do (mbedTLS 2.28 alone matches DNS names
-- only). Certificates are made here with the openssl CLI; the servers are
-- moonhttp's own HTTPS listeners.
local H = require "helper"
local certs = require "helpers.certs"

local sh = H.must

local SERVER = [[
local http = require "moonhttp"
http.handle("GET /", function(req, res) res:write("hello over tls") end)
]]

local FETCH = [[
local http = require "moonhttp"
local c = arg[2] and http.client{ tls = { ca = arg[2] } } or http.client{}
local r, err, detail = c:fetch(arg[1], { timeout = 5 })
if r then print("status", r.status) print("body", r:body()) else print("err", err, detail) end
]]

describe("http.fetch to an IP address over TLS", function()
  local dir, servers, ca = nil, {}, nil

  local function cert(name, san)
    local pem, key = certs.leaf(dir, name, "/CN=" .. name, { ext = "subjectAltName=" .. san })
    local srv = H.start(SERVER, { no_listen = true, flags = { "--listen", "https://127.0.0.1:0",
      "--tls-cert", pem, "--tls-key", key } })
    servers[name] = srv
    return srv
  end

  local function fetch(url, no_ca)
    local path = H.script(FETCH)
    local code, out = H.run({ "run", path, url, not no_ca and ca or nil })
    os.remove(path)
    assert.equal(0, code, out)
    return out
  end

  setup(function()
    dir = certs.dir(".pki")
    ca = certs.self_signed(dir, "ca", "/CN=moonhttp ip test CA")
    cert("ip", "IP:127.0.0.1,DNS:localhost")
    cert("dnsonly", "DNS:localhost,DNS:127.0.0.1") -- an address written as a DNS name does not count
    cert("otherip", "IP:127.0.0.2")
  end)

  teardown(function()
    for _, srv in pairs(servers) do srv:stop() end
    if dir then os.execute("rm -rf " .. dir) end
  end)

  local function url(name) return "https://127.0.0.1:" .. servers[name].port .. "/" end

  it("accepts a certificate with the address in an iPAddress SAN", function()
    local out = fetch(url("ip"))
    assert.truthy(out:find("status\t200", 1, true), out)
    assert.truthy(out:find("body\thello over tls", 1, true), out)
  end)

  it("refuses a certificate with only DNS names", function()
    local out = fetch(url("dnsonly"))
    assert.truthy(out:find("err\ttls\ttls: certificate hostname mismatch", 1, true), out)
  end)

  it("refuses a certificate for another address", function()
    local out = fetch(url("otherip"))
    assert.truthy(out:find("err\ttls\ttls: certificate hostname mismatch", 1, true), out)
  end)

  it("still checks DNS names for a name", function()
    local out = fetch("https://localhost:" .. servers.dnsonly.port .. "/")
    assert.truthy(out:find("status\t200", 1, true), out)
  end)

  it("still checks the chain for an address", function()
    -- no CA given: the system bundle does not know the test CA
    local out = fetch(url("ip"), true)
    assert.truthy(out:find("err\ttls\ttls: certificate signed by unknown authority", 1, true), out)
  end)
end)
