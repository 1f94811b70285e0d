-- Automatic HTTPS without a CA: a listener's tls.acme options are checked
-- while the script loads (a typo fails `moonhttp --check` at the script's
-- line, with the name meant), and the parts of the protocol that read what a
-- CA answers (RFC 9773 renewal windows, Retry-After) on recorded answers:
-- Debian's pebble 2.4 has no renewalInfo, so ARI is proved here.
local H = require "helper"

local function check(acme_src, settings)
  local path = H.script(string.format([[
local http = require "moonhttp"
http.server%s
]], settings or string.format('{ listen = { "127.0.0.1:0", { addr = "127.0.0.1:0", tls = { acme = %s } } } }',
    acme_src)))
  local code, out = H.run({ "--check", path })
  os.remove(path)
  return code, out
end

-- { the acme table, the message }
local BAD = {
  { [[{ domians = { "a.test" } }]], 'listen[2].tls.acme: unknown option "domians" (did you mean "domains"?)' },
  { [[{ domains = { "a.test" }, renew_befor = 3600 }]],
    'listen[2].tls.acme: unknown option "renew_befor" (did you mean "renew_before"?)' },
  { [[{ domains = { "a.test" }, zebra = 1 }]], 'listen[2].tls.acme: unknown option "zebra" (known: domains,' },
  { [[{ domains = { "a.test" }, eab = { kid = "k", hmca = "x" } }]],
    'listen[2].tls.acme.eab: unknown option "hmca" (did you mean "hmac"?)' },
  { [[{ domains = {} }]], 'listen[2].tls.acme.domains: expected a list of names' },
  { [[{ domains = { "a.test", "bad name" } }]], 'listen[2].tls.acme.domains[2]: bad name is not a DNS name' },
  { [[{ domains = { "*.a.test" } }]],
    'listen[2].tls.acme.domains[1]: *.a.test: a wildcard needs the DNS-01 challenge, which is not supported' },
  { [[{ domains = { "a.test", "A.test" } }]], 'listen[2].tls.acme.domains[2]: a.test is there twice' },
  { [[{ domains = { "a.test" }, challenge = "dns-01" }]],
    'listen[2].tls.acme.challenge: expected "http-01" or "tls-alpn-01", got dns-01' },
  { [[{ domains = { "a.test" }, renew_before = "a week" }]],
    'listen[2].tls.acme: renew_before must be a number of seconds >= 0' },
  { [[{ domains = { "a.test" }, directory = "acme.test/dir" }]],
    "listen[2].tls.acme.directory: expected the URL of the CA's ACME directory" },
  { [[{ domains = { "a.test" }, storage = 7 }]], 'listen[2].tls.acme.storage: expected a string' },
  { [["yes"]], 'listen[2].tls.acme: expected a table of options' },
}

-- Where acme may be: { the settings, the message }
local PLACES = {
  { [[{ listen = "127.0.0.1:0", tls = { acme = { domains = { "a.test" } } } }]],
    'tls.acme: put acme in the tls of a listen entry' },
  { [[{ listen = { { addr = "127.0.0.1:0", tls = { acme = { domains = { "a.test" } } } } } }]],
    'listen[1].tls.acme: challenge "http-01" needs a plain HTTP listener' },
}

describe("tls.acme options", function()
  for _, row in ipairs(BAD) do
    it("are refused at the script's line: " .. row[1], function()
      local code, out = check(row[1])
      assert.equal(1, code, out)
      assert.truthy(out:find(":2: " .. row[2], 1, true), out)
    end)
  end
  for _, row in ipairs(PLACES) do
    it("are refused where they cannot work: " .. row[1], function()
      local code, out = check(nil, row[1])
      assert.equal(1, code, out)
      assert.truthy(out:find(":2: " .. row[2], 1, true), out)
    end)
  end

  it("pass --check when they are right, tls-alpn-01 without a plain listener", function()
    local code, out = check(nil, [[{ listen = { { addr = "127.0.0.1:0", tls = { acme = { domains = { "a.test", "www.a.test" },
      challenge = "tls-alpn-01", email = "me@a.test", renew_before = 86400, eab = { kid = "k", hmac = "aGk" } } } } } }]])
    assert.equal(0, code, out)
  end)
end)

-- Run in `moonhttp run`: moonhttp.acme.proto's readers of CA answers.
local function run(source)
  local kv, out = H.run_kv("local proto = require 'moonhttp.acme.proto'\nlocal http = require 'moonhttp'\n", source)
  return kv, out
end

-- RFC 9773 §4.2 answers: { the JSON, start, end } (nil: the answer is unusable, renew_before rules).
local ARI = {
  { [[{"suggestedWindow":{"start":"2025-01-02T04:00:00Z","end":"2025-01-03T04:00:00Z"},
      "explanationURL":"https://acme.example.com/docs/ari"}]], 1735790400, 1735876800 },
  { [[{"suggestedWindow":{"start":"2025-01-02T06:00:00+02:00","end":"2025-01-02T23:30:00-04:30"}}]],
    1735790400, 1735876800 },
  { [[{"suggestedWindow":{"start":"2025-01-02T04:00:00.5Z","end":"2025-01-03T04:00:00Z"}}]], 1735790400.5, 1735876800 },
  { [[{"suggestedWindow":{"start":"2025-01-03T04:00:00Z","end":"2025-01-02T04:00:00Z"}}]] },
  { [[{"suggestedWindow":{"start":"yesterday","end":"2025-01-02T04:00:00Z"}}]] },
  { [[{"explanationURL":"https://acme.example.com/docs/ari"}]] },
  { [=[[1, 2]]=] },
}

describe("ACME Renewal Information answers", function()
  for i, row in ipairs(ARI) do
    it("row " .. i .. " reads as " .. (row[2] and "a window" or "no window"), function()
      local kv = run(string.format([[
local w = proto.parse_renewal_info(http.json.decode(%q), 30)
print("start", w and string.format("%%.1f", w.start) or "none")
print("end", w and w["end"] or "none")
print("retry", w and w.retry_after or "none")
]], row[1]))
      if row[2] then
        assert.equal(row[2], kv.start)
        assert.equal(row[3], kv["end"])
        assert.equal(30, kv.retry)
      else
        assert.equal("none", kv.start)
      end
    end)
  end
end)

-- Retry-After (RFC 9110 §10.2.3): { the header, seconds from now = 1735790400 }
local RETRY = {
  { "120", 120 }, { "0", 0 }, { "Thu, 02 Jan 2025 04:10:00 GMT", 600 },
  { "Thu, 02 Jan 2025 03:00:00 GMT", 0 }, { "soon", "none" }, { "-5", "none" },
}

describe("Retry-After from a CA", function()
  for _, row in ipairs(RETRY) do
    it(row[1] .. " waits " .. tostring(row[2]), function()
      local kv = run(string.format('print("wait", proto.retry_after(%q, 1735790400) or "none")', row[1]))
      assert.equal(row[2], kv.wait)
    end)
  end
end)

describe("the ARI certificate identifier", function()
  it("is RFC 9773's example for its AKI and serial", function()
    -- §4.1: keyIdentifier 69:88:5B:6B:..., serial 0x87654321 (DER 00 87 65 43 21)
    local certs = require "helpers.certs"
    local dir = certs.dir("-ari")
    H.must(string.format("cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 "
      .. "-subj /CN=ca -addext subjectKeyIdentifier=69:88:5B:6B:87:46:40:41:E1:B3:7B:84:7B:A0:AE:2C:DE:01:C8:D4 "
      .. "-keyout ca.key -out ca.pem", dir))
    certs.leaf(dir, "leaf", "/CN=a.test", { serial = "0x87654321",
      ext = "subjectAltName=DNS:a.test\nauthorityKeyIdentifier=keyid" })
    local kv = run(string.format([[
local f = assert(io.open(%q)); local pem = f:read("a"); f:close()
print("id", proto.cert_id(require("moonhttp.core").acme.cert_info(pem)))
]], dir .. "/leaf.pem"))
    os.execute("rm -rf " .. H.shell_quote(dir))
    assert.equal("aYhba4dGQEHhs3uEe6CuLN4ByNQ.AIdlQyE", kv.id)
  end)
end)

-- The wait after the n-th failure in a row: { n, Retry-After, lowest, highest } with
-- retry_min 60 and retry_max 86400 (the defaults): doubled, its upper half at random,
-- never before the CA's Retry-After, never past retry_max.
local BACKOFF = {
  { 1, nil, 30, 60 }, { 3, nil, 120, 240 }, { 20, nil, 43200, 86400 },
  { 1, 3600, 3600, 3600 }, { 12, 60, 43200, 86400 }, { 1, 1e9, 86400, 86400 },
}

describe("the wait after a failed order", function()
  for _, row in ipairs(BACKOFF) do
    it(string.format("after failure %d with Retry-After %s is %d to %d s", row[1], tostring(row[2]), row[3], row[4]),
      function()
        local kv = run(string.format([[
local acme = require "moonhttp.acme"
local lo, hi = math.huge, 0
for _ = 1, 200 do
  local d = acme._backoff({ retry_min = 60, retry_max = 86400 }, %d, %s)
  lo, hi = math.min(lo, d), math.max(hi, d)
end
print("lo", lo)
print("hi", hi)
]], row[1], tostring(row[2])))
        assert.truthy(kv.lo >= row[3] and kv.hi <= row[4], kv.lo .. " .. " .. kv.hi)
        -- the jitter spreads the waits (none when the bounds meet)
        if row[3] < row[4] then assert.truthy(kv.hi - kv.lo > (row[4] - row[3]) / 4, kv.lo .. " .. " .. kv.hi) end
      end)
  end
end)
