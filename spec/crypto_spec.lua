-- http.crypto, http.base64, http.hex through the real binary; random bytes
-- from two forked workers must differ (the DRBG is seeded after fork).
local H = require "helper"
local socket = require "socket"

local app = [[
local http = require "moonhttp"
local c, b64, hex = http.crypto, http.base64, http.hex
c.random(8) -- a draw while the script loads: in the master, before workers fork
http.handle("GET /vectors", function(req, res)
  res:json({
    sha_abc = hex.encode(c.sha256("abc")),
    sha_empty = hex.encode(c.sha256("")),
    hmac = hex.encode(c.hmac_sha256("key", "The quick brown fox jumps over the lazy dog")),
    eq = c.equal("secret", "secret"), ne = c.equal("secret", "secreT"), ne_len = c.equal("a", "ab"),
    b64 = b64.encode("foobar"), b64url = b64.encode_url("\251\255"),
    unb64 = b64.decode("Zm9vYg=="), unb64url = b64.decode_url("-_8") == "\251\255",
    hex_rt = hex.decode("00ABff") == "\0\171\255",
  })
end)
http.handle("GET /bad", function(req, res)
  local a, aerr = http.base64.decode(req:arg("s"))
  local h, herr = http.hex.decode(req:arg("s"))
  res:json({ b64 = aerr or a, hex = herr or h })
end)
http.handle("GET /random", function(req, res)
  -- ?busy=S keeps this worker from accepting for S seconds (no yield), so
  -- the spec's next connection must go to the other worker.
  local busy = tonumber(req:arg("busy") or "0")
  local t0 = os.clock()
  while os.clock() - t0 < busy do end
  local pid = io.open("/proc/self/stat"):read("n")
  res:write(http.hex.encode(http.crypto.random(16)), " ", tostring(http.crypto.random(0) == ""), " ", pid)
end)
]]

describe("crypto and encodings", function()
  local srv
  setup(function() srv = H.start(app) end)
  teardown(function() srv:stop() end)

  it("matches the published test vectors", function()
    local v = require("cjson").decode(srv:get("/vectors").body)
    assert.equal("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", v.sha_abc)
    assert.equal("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", v.sha_empty)
    assert.equal("f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8", v.hmac)
    assert.is_true(v.eq); assert.is_false(v.ne); assert.is_false(v.ne_len)
    assert.equal("Zm9vYmFy", v.b64); assert.equal("-_8", v.b64url); assert.equal("foob", v.unb64)
    assert.is_true(v.unb64url); assert.is_true(v.hex_rt)
  end)

  it("answers nil, err for malformed base64 and hex from a client", function()
    local res = srv:get("/bad?s=%21%21%21")
    assert.equal(200, res.status)
    assert.same({ b64 = "malformed base64", hex = "malformed hex" }, require("cjson").decode(res.body))
  end)
end)

describe("crypto.random", function()
  it("gives different bytes in two workers forked from one master", function()
    -- Each worker accepts on its own socket (reuseport), which the kernel
    -- picks by a hash of the connection: new connections are asked until both
    -- workers have answered, every answer's bytes different from all others.
    local srv = H.start(app, { flags = { "--workers", "2" } })
    finally(function() srv:stop() end)
    local seen, pids, npids = {}, {}, 0
    for i = 1, 40 do
      local c = srv:connect()
      c:send("GET /random HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
      local r = c:read_response()
      c:close()
      local bytes, empty, pid = r.body:match("^(%x+) (%a+) (%d+)$")
      assert.equal(32, #bytes); assert.equal("true", empty)
      assert.is_nil(seen[bytes], "the same 16 random bytes twice")
      seen[bytes] = true
      if not pids[pid] then pids[pid], npids = true, npids + 1 end
      if npids == 2 and i >= 10 then break end
    end
    assert.equal(2, npids, "one worker answered all 40 connections")
  end)
end)
