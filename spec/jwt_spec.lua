-- http.crypto.jwt_sign / jwt_verify through the real binary. Keys come from
-- the openssl CLI; tokens made by outside tools (python3's hmac, `openssl
-- dgst -sign`) must verify, and ours must verify with them. Cases are data:
-- each row is signed and/or verified by one `moonhttp run` of DRIVER.
local H = require "helper"
local cjson = require "cjson"

local SECRET = "0123456789abcdef0123456789abcdef-spec"

-- Runs every case in one process; a case is { token | sign = {claims, key, alg}
-- | raw = {header, payload, secret}, key, opts } and answers { token, claims,
-- err, raised }.
local DRIVER = [[
local http = require "moonhttp"
local cjson = require "cjson"
local c, b64 = http.crypto, http.base64
local cases = cjson.decode(io.open(arg[1]):read("a"))
local out = {}
for i, case in ipairs(cases) do
  local r = {}
  local ok, e = pcall(function()
    local tok = case.token
    if case.sign then tok = c.jwt_sign(case.sign.claims, case.sign.key, case.sign.alg) end
    if case.raw then
      tok = b64.encode_url(case.raw.header) .. "." .. b64.encode_url(case.raw.payload)
      tok = tok .. "." .. (case.raw.secret and b64.encode_url(c.hmac_sha256(case.raw.secret, tok)) or "")
    end
    r.token = tok
    if case.opts then r.claims, r.err = c.jwt_verify(tok, case.key, case.opts) end
  end)
  if not ok then r.raised = tostring(e) end
  out[i] = r
end
local f = io.open(arg[2], "w"); f:write(cjson.encode(out)); f:close()
]]

local function run(cases)
  local input, output = H.tmpname(".json"), H.tmpname(".json")
  H.write_file(input, cjson.encode(cases))
  local path = H.script(DRIVER)
  local code, out = H.run({ "run", path, input, output })
  os.remove(path); os.remove(input)
  assert(code == 0, "driver failed: " .. out)
  local text = assert(H.read_file(output), out)
  local res = cjson.decode(text)
  os.remove(output)
  return res
end

local dir, priv, pub, p384
local function keyfile(name) return H.read_file(dir .. "/" .. name) end

setup(function()
  dir = H.tmpname(".jwt")
  H.must("mkdir -p " .. dir)
  H.must("openssl ecparam -name prime256v1 -genkey -noout -out " .. dir .. "/ec.pem")
  H.must("openssl ec -in " .. dir .. "/ec.pem -pubout -out " .. dir .. "/ecpub.pem")
  H.must("openssl ecparam -name secp384r1 -genkey -noout -out " .. dir .. "/p384.pem")
  priv, pub, p384 = keyfile("ec.pem"), keyfile("ecpub.pem"), keyfile("p384.pem")
end)

teardown(function() H.sh("rm -rf " .. dir) end)

-- python3 helpers: base64url, DER <-> raw r||s for ES256.
local PY = [[
import base64, hashlib, hmac, json, subprocess, sys, time
def b64(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
def unb64(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
def der_to_raw(der):
    assert der[0] == 0x30
    i = 2 if der[1] < 0x80 else 3
    out = b""
    for _ in range(2):
        assert der[i] == 0x02
        n = der[i + 1]
        out += der[i + 2:i + 2 + n].lstrip(b"\0").rjust(32, b"\0")
        i += 2 + n
    return out
def raw_to_der(raw):
    def integer(b):
        b = b.lstrip(b"\0") or b"\0"
        if b[0] & 0x80: b = b"\0" + b
        return bytes([2, len(b)]) + b
    body = integer(raw[:32]) + integer(raw[32:])
    return bytes([0x30, len(body)]) + body
]]

local function python(code)
  local path = H.write_file(H.tmpname(".py"), PY .. code)
  local out, ok = H.sh("cd " .. dir .. " && python3 " .. path)
  os.remove(path)
  assert(ok, out)
  return (out:gsub("%s+$", ""))
end

describe("jwt_sign / jwt_verify", function()
  it("round-trips HS256 and ES256 claims", function()
    local claims = { sub = "u1", n = 42, roles = { "a", "b" }, exp = os.time() + 300 }
    local r = run({
      { sign = { claims = claims, key = SECRET, alg = "HS256" }, key = SECRET, opts = { alg = "HS256" } },
      { sign = { claims = claims, key = priv, alg = "ES256" }, key = pub, opts = { alg = "ES256" } },
      { sign = { claims = claims, key = priv, alg = "ES256" }, key = priv, opts = { alg = "ES256" } },
    })
    for i = 1, 3 do
      assert.is_nil(r[i].err); assert.is_nil(r[i].raised)
      assert.same(claims, r[i].claims)
    end
    -- Three parts, base64url without padding; the header names alg and typ.
    local h = python(("print(unb64(%q.split('.')[0]).decode())"):format(r[2].token))
    assert.same({ alg = "ES256", typ = "JWT" }, cjson.decode(h))
    assert.is_nil(r[1].token:find("[=+/]"))
  end)

  it("verifies tokens made by python3 and openssl, and they verify ours", function()
    local exp = os.time() + 300
    local tokens = python(([[
secret = %q.encode()
h = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
p = b64(json.dumps({"sub": "py", "exp": %d}).encode())
print(h + "." + p + "." + b64(hmac.new(secret, (h + "." + p).encode(), hashlib.sha256).digest()))
h = b64(json.dumps({"alg": "ES256"}).encode())
p = b64(json.dumps({"sub": "openssl", "exp": %d}).encode())
der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", "ec.pem"], input=(h + "." + p).encode(),
                     capture_output=True, check=True).stdout
print(h + "." + p + "." + b64(der_to_raw(der)))
]]):format(SECRET, exp, exp))
    local hs, es = tokens:match("^(%S+)\n(%S+)$")
    local r = run({
      { token = hs, key = SECRET, opts = { alg = "HS256" } },
      { token = es, key = pub, opts = { alg = "ES256" } },
      { sign = { claims = { sub = "mine" }, key = SECRET, alg = "HS256" } },
      { sign = { claims = { sub = "mine" }, key = priv, alg = "ES256" } },
    })
    assert.equal("py", r[1].claims and r[1].claims.sub, r[1].err)
    assert.equal("openssl", r[2].claims and r[2].claims.sub, r[2].err)
    local checked = python(([[
secret = %q.encode()
h, p, s = %q.split(".")
assert hmac.compare_digest(unb64(s), hmac.new(secret, (h + "." + p).encode(), hashlib.sha256).digest())
h, p, s = %q.split(".")
open("sig.der", "wb").write(raw_to_der(unb64(s)))
out = subprocess.run(["openssl", "dgst", "-sha256", "-verify", "ecpub.pem", "-signature", "sig.der"],
                     input=(h + "." + p).encode(), capture_output=True)
print(out.stdout.decode().strip(), json.loads(unb64(p))["sub"])
]]):format(SECRET, r[3].token, r[4].token))
    assert.equal("Verified OK mine", checked)
  end)

  it("pins the algorithm: none, others and confusion are refused", function()
    local hs = { sign = { claims = { sub = "x" }, key = SECRET, alg = "HS256" } }
    -- The classic confusion: an HS256 token whose HMAC key is the server's public key.
    local forged = { header = '{"alg":"HS256","typ":"JWT"}', payload = '{"sub":"admin"}', secret = pub }
    local rows = {
      { raw = { header = '{"alg":"none"}', payload = '{"sub":"x"}' }, key = SECRET, opts = { alg = "HS256" } },
      { raw = { header = '{"alg":"none"}', payload = '{"sub":"x"}', secret = SECRET }, key = SECRET, opts = { alg = "HS256" } },
      { raw = { header = '{"alg":"HS512"}', payload = '{"sub":"x"}', secret = SECRET }, key = SECRET, opts = { alg = "HS256" } },
      { raw = { header = '{"alg":["HS256"]}', payload = '{"sub":"x"}', secret = SECRET }, key = SECRET, opts = { alg = "HS256" } },
      { sign = hs.sign, key = pub, opts = { alg = "ES256" } },
      { raw = forged, key = pub, opts = { alg = "ES256" } },
      { sign = { claims = { sub = "x" }, key = priv, alg = "ES256" }, key = SECRET, opts = { alg = "HS256" } },
    }
    for i, r in ipairs(run(rows)) do
      assert.is_nil(r.raised, "row " .. i)
      assert.equal("algorithm not allowed", r.err, "row " .. i)
      assert.is_nil(r.claims)
    end
  end)

  it("raises on misuse", function()
    local tok = { sign = { claims = { sub = "x" }, key = SECRET, alg = "HS256" } }
    local rows = {
      { "opts.alg is required", { sign = tok.sign, key = SECRET, opts = {} } },
      { 'alg "none" is not supported', { sign = tok.sign, key = SECRET, opts = { alg = "none" } } },
      { 'unknown option "audience"', { sign = tok.sign, key = SECRET, opts = { alg = "HS256", audience = "x" } } },
      { "at least 32 bytes", { sign = { claims = {}, key = "short", alg = "HS256" } } },
      { "at least 32 bytes", { sign = tok.sign, key = "short", opts = { alg = "HS256" } } },
      { "not a PEM key", { sign = tok.sign, key = pub, opts = { alg = "HS256" } } },
      { "PEM P-256 private key", { sign = { claims = {}, key = pub, alg = "ES256" } } },
      { "PEM P-256 private key", { sign = { claims = {}, key = p384, alg = "ES256" } } },
      { "PEM P-256 public or private key", { sign = tok.sign, key = SECRET, opts = { alg = "ES256" } } },
      { 'alg "RS256" is not supported', { sign = { claims = {}, key = SECRET, alg = "RS256" } } },
      { "opts.leeway must be", { sign = tok.sign, key = SECRET, opts = { alg = "HS256", leeway = -1 } } },
    }
    local cases = {}
    for i, row in ipairs(rows) do cases[i] = row[2] end
    for i, r in ipairs(run(cases)) do
      assert.truthy(r.raised and r.raised:find(rows[i][1], 1, true), "row " .. i .. ": " .. tostring(r.raised))
    end
  end)

  it("checks exp, nbf, aud and iss after the signature", function()
    local now = os.time()
    local rows = {
      -- claims, opts, expected error (nil = valid)
      { { exp = now + 60 }, {}, nil },
      { { exp = now - 5 }, {}, "token expired" },
      { { exp = now }, {}, "token expired" },
      { { exp = now - 5 }, { leeway = 30 }, nil },
      { { exp = now - 60 }, { leeway = 30 }, "token expired" },
      { { exp = "tomorrow" }, {}, "malformed token" },
      { { nbf = now + 60 }, {}, "token not yet valid" },
      { { nbf = now + 10 }, { leeway = 30 }, nil },
      { { nbf = now - 1 }, {}, nil },
      { { nbf = true }, {}, "malformed token" },
      { { aud = "api" }, { aud = "api" }, nil },
      { { aud = { "web", "api" } }, { aud = "api" }, nil },
      { { aud = { "web" } }, { aud = "api" }, "wrong audience" },
      { { aud = "apix" }, { aud = "api" }, "wrong audience" },
      { {}, { aud = "api" }, "wrong audience" },
      { { aud = "api" }, {}, "wrong audience" },
      { { iss = "me" }, { iss = "me" }, nil },
      { { iss = "you" }, { iss = "me" }, "wrong issuer" },
      { {}, { iss = "me" }, "wrong issuer" },
      { { exp = now + 60, nbf = now - 60, aud = "api", iss = "me" }, { aud = "api", iss = "me" }, nil },
    }
    local cases = {}
    for i, row in ipairs(rows) do
      local opts = { alg = "HS256" }
      for k, v in pairs(row[2]) do opts[k] = v end
      row[1].sub = "row" .. i
      cases[i] = { sign = { claims = row[1], key = SECRET, alg = "HS256" }, key = SECRET, opts = opts }
    end
    for i, r in ipairs(run(cases)) do
      assert.is_nil(r.raised, "row " .. i)
      assert.equal(rows[i][3], r.err, "row " .. i)
      if not rows[i][3] then assert.equal("row" .. i, r.claims.sub) end
    end
  end)

  it("answers bad signature for tampering and malformed token for garbage", function()
    local made = run({
      { sign = { claims = { sub = "alice", admin = false }, key = SECRET, alg = "HS256" } },
      { sign = { claims = { sub = "alice", admin = false }, key = priv, alg = "ES256" } },
    })
    local hs, es = made[1].token, made[2].token
    local function swap_payload(tok, json)
      local h, _, s = tok:match("^([^.]+)%.([^.]+)%.([^.]+)$")
      local p = python(("print(b64(%q.encode()))"):format(json))
      return h .. "." .. p .. "." .. s
    end
    local good = { header = '{"alg":"HS256"}', payload = '{"sub":"x"}' }
    local rows = {
      { swap_payload(hs, '{"sub":"alice","admin":true}'), "HS256", "bad signature" },
      { swap_payload(es, '{"sub":"alice","admin":true}'), "ES256", "bad signature" },
      { hs:gsub("%.([^.])([^.]+)$", function(c, rest) return "." .. (c == "A" and "B" or "A") .. rest end), "HS256", "bad signature" },
      { hs:gsub("[^.]+$", ""), "HS256", "bad signature" },
      { es:gsub("%.[^.]+$", "." .. hs:match("[^.]+$")), "ES256", "bad signature" },
      { { header = good.header, payload = good.payload, secret = SECRET .. "x" }, "HS256", "bad signature" },
      { "", "HS256", "malformed token" },
      { "abc", "HS256", "malformed token" },
      { "a.b", "HS256", "malformed token" },
      { hs .. ".x", "HS256", "malformed token" },
      { hs:gsub("^([^.]+)", "%1="), "HS256", "malformed token" },
      { hs .. "=", "HS256", "malformed token" },
      { hs:gsub("^[^.]+", "!!!"), "HS256", "malformed token" },
      { { header = "not json", payload = good.payload, secret = SECRET }, "HS256", "malformed token" },
      { { header = '["HS256"]', payload = good.payload, secret = SECRET }, "HS256", "malformed token" },
      { { header = '{"typ":"JWT"}', payload = good.payload, secret = SECRET }, "HS256", "malformed token" },
      { { header = '{"alg":"HS256","crit":["b64"]}', payload = good.payload, secret = SECRET }, "HS256", "malformed token" },
      { { header = good.header, payload = "not json", secret = SECRET }, "HS256", "malformed token" },
      { { header = good.header, payload = "[1,2]", secret = SECRET }, "HS256", "malformed token" },
      { { header = good.header, payload = "", secret = SECRET }, "HS256", "malformed token" },
      { hs:gsub("%.", "." .. string.rep("A", 20000), 1), "HS256", "malformed token" },
    }
    local cases = {}
    for i, row in ipairs(rows) do
      local tok, raw = row[1], nil
      if type(tok) == "table" then tok, raw = nil, row[1] end
      cases[i] = { token = tok, raw = raw, key = row[2] == "ES256" and pub or SECRET, opts = { alg = row[2] } }
    end
    for i, r in ipairs(run(cases)) do
      assert.is_nil(r.raised, "row " .. i)
      assert.equal(rows[i][3], r.err, "row " .. i)
      assert.is_nil(r.claims, "row " .. i)
    end
  end)

  it("answers every mutated token with one of its fixed errors, never a raise", function()
    local path = H.write_file(dir .. "/fuzz.lua", ([[
local http = require "moonhttp"
local c = http.crypto
local priv, pub, secret = io.open(%q):read("a"), io.open(%q):read("a"), %q
local known = { ["malformed token"] = true, ["algorithm not allowed"] = true, ["bad signature"] = true,
  ["token expired"] = true, ["token not yet valid"] = true, ["wrong audience"] = true }
local alphabet = "ABCabc019-_.=+/ {}\"\0\255"
local good = { HS256 = c.jwt_sign({ sub = "x", aud = { "a" }, exp = 1e10 }, secret, "HS256"),
               ES256 = c.jwt_sign({ sub = "x", aud = { "a" }, exp = 1e10 }, priv, "ES256") }
local n, bad = 0, {}
math.randomseed(7)
for alg, tok in pairs(good) do
  for _ = 1, 1500 do
    local t, i = tok, math.random(#tok)
    local op = math.random(3)
    local ch = alphabet:sub(math.random(#alphabet)):sub(1, 1)
    if op == 1 then t = t:sub(1, i - 1) .. ch .. t:sub(i + 1)
    elseif op == 2 then t = t:sub(1, i)
    else t = t:sub(1, i) .. ch .. t:sub(i + 1) end
    local ok, claims, err = pcall(c.jwt_verify, t, alg == "HS256" and secret or pub, { alg = alg, aud = "a" })
    if not ok or (claims == nil and not known[err]) or (claims and t ~= tok) then
      bad[#bad + 1] = tostring(claims) .. " " .. tostring(err)
    end
    n = n + 1
  end
end
print("tried", n)
print("bad", #bad, bad[1] or "")
]]):format(dir .. "/ec.pem", dir .. "/ecpub.pem", SECRET))
    local code, out = H.run({ "run", path })
    assert.equal(0, code, out)
    assert.truthy(out:find("tried\t3000", 1, true), out)
    assert.truthy(out:find("bad\t0", 1, true), out)
  end)
end)
