-- core.acme's cryptography (src/lua/lua_acme.c) through the real binary
-- (`moonhttp run`), each result checked by the openssl command line: the JWS
-- signature verified, the CSR parsed and its self-signature verified, the
-- TLS-ALPN-01 certificate's critical acmeIdentifier extension read back,
-- cert_info compared with what openssl says of the same certificate.
local H = require "helper"

local function sh_ok(cmd)
  local out, ok = H.sh(cmd)
  assert(ok, "failed: " .. cmd .. "\n" .. out)
  return out
end

local function b64url_decode(s)
  local f = H.tmpname(".b64")
  local padded = s:gsub("-", "+"):gsub("_", "/")
  padded = padded .. string.rep("=", (4 - #padded % 4) % 4)
  H.write_file(f, padded .. "\n")
  local out = sh_ok("openssl base64 -d -A -in " .. f .. " | od -An -v -tx1 | tr -d ' \\n'")
  os.remove(f)
  return out
end

local function sha256_hex_of(path)
  return sh_ok("openssl dgst -sha256 -r " .. path):match("^(%x+)")
end

-- DER ECDSA-Sig-Value from JWS's raw r||s (openssl dgst verifies DER).
local function der_integer(bytes)
  bytes = bytes:gsub("^%z+", "")
  if bytes == "" or bytes:byte(1) >= 0x80 then bytes = "\0" .. bytes end
  return "\2" .. string.char(#bytes) .. bytes
end
local function raw_to_der(hex)
  local raw = hex:gsub("%x%x", function(h) return string.char(tonumber(h, 16)) end)
  local body = der_integer(raw:sub(1, 32)) .. der_integer(raw:sub(33, 64))
  return "\48" .. string.char(#body) .. body
end

-- Runs Lua with `acme` bound to core.acme in a `moonhttp run` script; dir is
-- a fresh directory the script writes its results into.
local function run_acme(source)
  local dir = H.tmpname(".d")
  assert(os.execute("mkdir -p " .. dir))
  local prelude = "local acme = require('moonhttp.core').acme\nlocal dir = " .. string.format("%q", dir) ..
      "\nlocal function put(name, s) local f = assert(io.open(dir .. '/' .. name, 'wb')); f:write(s); f:close() end\n"
  local kv = H.run_kv(prelude, source)
  return dir, kv
end

describe("core.acme crypto", function()
  it("makes a P-256 key whose JWK and thumbprint match openssl's public key", function()
    local dir, kv = run_acme([[
      local key = assert(acme.key_new())
      put("key.pem", key)
      local jwk, thumb = acme.jwk(key)
      put("jwk.json", jwk)
      print("thumb " .. thumb)
      print("other " .. tostring(acme.key_new() ~= key))
    ]])
    assert.equal("true", kv.other)
    local text = sh_ok("openssl pkey -in " .. dir .. "/key.pem -noout -text")
    assert.truthy(text:find("prime256v1", 1, true) or text:find("P-256", 1, true), text)
    local jwk = H.read_file(dir .. "/jwk.json")
    local x, y = jwk:match('^{"crv":"P%-256","kty":"EC","x":"([%w_-]+)","y":"([%w_-]+)"}$')
    assert(x and #x == 43 and #y == 43, "not RFC 7638's canonical form: " .. jwk)
    -- The last 65 bytes of the SubjectPublicKeyInfo are 04 || x || y.
    local spki = sh_ok("openssl pkey -in " .. dir .. "/key.pem -pubout -outform DER | od -An -v -tx1 | tr -d ' \\n'")
    assert.equal("04" .. b64url_decode(x) .. b64url_decode(y), spki:sub(-130))
    -- The thumbprint is base64url(SHA-256(the JSON exactly as given)).
    assert.equal(sha256_hex_of(dir .. "/jwk.json"), b64url_decode(kv.thumb))
  end)

  it("signs ES256 as raw r||s that openssl verifies, and a changed input does not", function()
    local dir, kv = run_acme([[
      local key = assert(acme.key_new())
      put("key.pem", key)
      local input = "eyJhbGciOiJFUzI1NiJ9.eyJoZWxsbyI6IndvcmxkIn0"
      put("input", input)
      put("changed", input .. "x")
      local sig = acme.sign_es256(key, input)
      print("sig " .. sig)
    ]])
    assert.truthy(kv.sig:match("^[%w_-]+$"), "not base64url without padding: " .. kv.sig)
    assert.equal(86, #kv.sig) -- 64 bytes
    local hex = b64url_decode(kv.sig)
    assert.equal(128, #hex)
    H.write_file(dir .. "/sig.der", raw_to_der(hex))
    sh_ok("openssl pkey -in " .. dir .. "/key.pem -pubout -out " .. dir .. "/pub.pem")
    local verify = "openssl dgst -sha256 -verify " .. dir .. "/pub.pem -signature " .. dir .. "/sig.der "
    assert.truthy(sh_ok(verify .. dir .. "/input"):find("Verified OK", 1, true))
    local out, ok = H.sh(verify .. dir .. "/changed")
    assert.is_false(ok, out)
  end)

  it("writes a CSR openssl parses: signed by the key, CN = first name, SAN = every name", function()
    local dir = run_acme([[
      local key = assert(acme.key_new())
      put("key.pem", key)
      put("csr.der", assert(acme.csr(key, { "a.test", "www.a.test", "*.b.test" })))
      local long = string.rep("l", 63) .. ".test"
      put("long.der", assert(acme.csr(key, { long })))
    ]])
    local text = sh_ok("openssl req -inform DER -in " .. dir .. "/csr.der -noout -text -verify 2>&1")
    assert.truthy(text:find("verify OK", 1, true), text)
    assert.truthy(text:find("Subject: CN = a.test", 1, true), text)
    assert.truthy(text:find("DNS:a.test, DNS:www.a.test, DNS:*.b.test", 1, true), text)
    assert.truthy(text:find("ecdsa-with-SHA256", 1, true), text)
    local csr_pub = sh_ok("openssl req -inform DER -in " .. dir .. "/csr.der -noout -pubkey")
    local key_pub = sh_ok("openssl pkey -in " .. dir .. "/key.pem -pubout")
    assert.equal(key_pub, csr_pub)
    -- A first name longer than a commonName may be is in the SAN only.
    local long = sh_ok("openssl req -inform DER -in " .. dir .. "/long.der -noout -text -verify 2>&1")
    assert.truthy(long:find("verify OK", 1, true), long)
    assert.falsy(long:find("CN =", 1, true), long)
    assert.truthy(long:find("DNS:" .. string.rep("l", 63) .. ".test", 1, true), long)
  end)

  it("makes the RFC 8737 validation certificate: critical acmeIdentifier = SHA-256(key authorization)", function()
    local dir = run_acme([[
      local cert, key = assert(acme.alpn_cert("alpn.test", "tok-123.thumbprint"))
      put("cert.pem", cert)
      put("key.pem", key)
      put("keyauth", "tok-123.thumbprint")
    ]])
    local cert = dir .. "/cert.pem"
    local text = sh_ok("openssl x509 -in " .. cert .. " -noout -text")
    assert.truthy(text:find("1.3.6.1.5.5.7.1.31: critical", 1, true), text)
    assert.truthy(text:find("DNS:alpn.test", 1, true), text)
    assert.truthy(text:find("Issuer: CN = alpn.test", 1, true), text)
    local asn1 = sh_ok("openssl asn1parse -in " .. cert)
    local ext = asn1:match(":1%.3%.6%.1%.5%.5%.7%.1%.31\n[^\n]*BOOLEAN%s*:255\n[^\n]*OCTET STRING%s*%[HEX DUMP%]:(%x+)")
    assert(ext, "no critical acmeIdentifier extension:\n" .. asn1)
    assert.equal("0420" .. sha256_hex_of(dir .. "/keyauth"), ext:lower())
    -- The key returned is the certificate's.
    assert.equal(sh_ok("openssl pkey -in " .. dir .. "/key.pem -pubout"),
      sh_ok("openssl x509 -in " .. cert .. " -noout -pubkey"))
    -- Valid now: openssl checks the signature and dates, but not the unknown critical extension here.
    local now = os.time()
    local function epoch(s) return tonumber(sh_ok("date -u -d " .. H.shell_quote(s) .. " +%s")) end
    local dates = sh_ok("openssl x509 -in " .. cert .. " -noout -startdate -enddate")
    assert.is_true(epoch(dates:match("notBefore=([^\n]+)")) < now)
    assert.is_true(epoch(dates:match("notAfter=([^\n]+)")) > now)
  end)

  it("reads not_before, not_after, names, serial and aki of a chain's leaf as openssl does", function()
    local dir = H.tmpname(".d")
    sh_ok("mkdir -p " .. dir)
    -- A CA and a leaf it signs, with a serial whose top bit is set (DER adds a 00 byte).
    sh_ok(("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -subj /CN=ca.test -days 30 2>&1"):format(dir))
    sh_ok(("cd %s && openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout leaf.key -out leaf.csr -subj /CN=leaf.test 2>&1"):format(dir))
    H.write_file(dir .. "/ext", "subjectAltName=DNS:leaf.test,DNS:www.leaf.test,IP:127.0.0.1\nauthorityKeyIdentifier=keyid\n")
    sh_ok(("cd %s && openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -set_serial 0x80aabbccdd -days 10 -extfile ext -out leaf.pem 2>&1"):format(dir))
    H.write_file(dir .. "/chain.pem", H.read_file(dir .. "/leaf.pem") .. H.read_file(dir .. "/ca.pem"))
    local kv = H.run_kv("local acme = require('moonhttp.core').acme\n", ([[
      local info = assert(acme.cert_info(io.open(%q):read("a")))
      print("not_before " .. info.not_before)
      print("not_after " .. info.not_after)
      print("names " .. table.concat(info.names, ","))
      print("serial " .. info.serial)
      print("aki " .. info.aki)
      local ca = assert(acme.cert_info(io.open(%q):read("a")))
      print("ca_names " .. table.concat(ca.names, ","))
    ]]):format(dir .. "/chain.pem", dir .. "/ca.pem"))
    local function epoch(s) return tonumber(sh_ok("date -u -d " .. H.shell_quote(s) .. " +%s")) end
    local dates = sh_ok("openssl x509 -in " .. dir .. "/leaf.pem -noout -startdate -enddate")
    assert.equal(epoch(dates:match("notBefore=([^\n]+)")), kv.not_before)
    assert.equal(epoch(dates:match("notAfter=([^\n]+)")), kv.not_after)
    assert.equal("leaf.test,www.leaf.test", kv.names)
    assert.equal("0080aabbccdd", b64url_decode(kv.serial))
    local aki = sh_ok("openssl x509 -in " .. dir .. "/leaf.pem -noout -ext authorityKeyIdentifier")
    local hex = aki:match("keyid:([%x:]+)") or aki:match("\n%s+([%x:]+)%s*\n")
    assert(hex, aki)
    assert.equal(hex:gsub(":", ""):lower(), b64url_decode(kv.aki))
    assert.equal("ca.test", kv.ca_names) -- no SAN: the subject's CN
  end)

  -- Bad data answers nil, message; nothing raises and nothing crashes.
  local bad = {
    { "cert_info of garbage", "acme.cert_info('not a certificate')", "bad certificate PEM" },
    { "cert_info of a truncated PEM", "acme.cert_info('-----BEGIN CERTIFICATE-----\\nMIIB\\n-----END CERTIFICATE-----\\n')", "bad certificate PEM" },
    { "jwk of garbage", "acme.jwk('nope')", "bad key PEM" },
    { "sign with garbage", "acme.sign_es256('nope', 'a.b')", "bad key PEM" },
    { "csr without names", "acme.csr(acme.key_new(), {})", "no names" },
    { "csr with a comma", "acme.csr(acme.key_new(), { 'a.test', 'x,CN=evil' })", "names[2] is not a DNS name" },
    { "csr with an empty label", "acme.csr(acme.key_new(), { 'a..test' })", "names[1] is not a DNS name" },
    { "csr with a number", "acme.csr(acme.key_new(), { 12 })", "names[1] is not a DNS name" },
    { "csr with 101 names", "local t = {} for i = 1, 101 do t[i] = 'n' .. i .. '.test' end return acme.csr(acme.key_new(), t)", "101 names: at most 100" },
    { "alpn_cert of a wildcard", "acme.alpn_cert('*.a.test', 'k')", "not a DNS name" },
    { "jwk of a P-384 key", "acme.jwk(P384)", "the key is not an ECDSA P-256 key" },
  }
  for _, row in ipairs(bad) do
    it("answers nil, message: " .. row[1], function()
      local p384 = H.sh("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 2>/dev/null")
      local call = row[2]:find("return", 1, true) and row[2] or ("return " .. row[2])
      local kv = H.run_kv("local acme = require('moonhttp.core').acme\nlocal P384 = " .. string.format("%q", p384) .. "\n",
        "local v, err = (function() " .. call .. " end)()\nprint('v ' .. tostring(v))\nprint('err ' .. tostring(err))\n")
      assert.equal("nil", kv.v)
      assert.truthy(kv.err:find(row[3], 1, true), kv.err)
    end)
  end
end)
