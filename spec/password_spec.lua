-- Password hashing (http.crypto.password_hash / password_verify /
-- needs_rehash): Argon2id strings, Django PBKDF2 hashes to migrate from, and
-- hashing that runs on the worker's thread pool, not on its event loop.
local H = require "helper"
local socket = require "socket"

local APP = [[
local http = require "moonhttp"
local c = http.crypto
http.handle("GET /hash", function(req, res)
  local h = assert(c.password_hash("pw" .. req:arg("i")))
  res:write(tostring(c.password_verify("pw" .. req:arg("i"), h)))
end)
http.handle("GET /health", function(req, res) res:write("ok") end)
]]

describe("password hashing", function()
  it("hashes with Argon2id at OWASP's parameters, verifies, and says when to rehash", function()
    local kv = H.run_kv(nil, [[
local c = http.crypto
local h = assert(c.password_hash("correct horse battery staple"))
print("hash", h)
print("other", assert(c.password_hash("correct horse battery staple")) ~= h)
print("right", c.password_verify("correct horse battery staple", h))
print("wrong", c.password_verify("correct horse battery stapler", h))
print("empty", c.password_verify("", assert(c.password_hash(""))))
print("malformed", select(2, c.password_verify("x", "$argon2id$v=19$m=abc")))
print("unknown", select(2, c.password_verify("x", "md5$abc")))
print("rehash_same", c.needs_rehash(h))
print("rehash_more", c.needs_rehash(h, { memory_kib = 65536 }))
print("rehash_pbkdf2", c.needs_rehash("pbkdf2_sha256$1000$s$aaaa"))
local small = assert(c.password_hash("x", { memory_kib = 1024, time_cost = 1 }))
print("small", small:match("^%$argon2id%$v=19%$m=1024,t=1,p=1%$") ~= nil, c.password_verify("x", small))
print("typo", select(2, pcall(c.password_hash, "x", { memroy_kib = 1 })))
print("range", select(2, pcall(c.password_hash, "x", { time_cost = 0 })))
]])
    assert.truthy(kv.hash:match("^%$argon2id%$v=19%$m=19456,t=2,p=1%$[%w+/]+%$[%w+/]+$"), kv.hash)
    assert.equal("true", kv.other) -- a new salt each time
    assert.equal("true", kv.right)
    assert.equal("false", kv.wrong)
    assert.equal("true", kv.empty)
    assert.equal("malformed hash", kv.malformed)
    assert.equal("malformed hash", kv.unknown)
    assert.equal("false", kv.rehash_same)
    assert.equal("true", kv.rehash_more)
    assert.equal("true", kv.rehash_pbkdf2)
    assert.equal("true\ttrue", kv.small)
    assert.truthy(kv.typo:find([[unknown option "memroy_kib" (did you mean "memory_kib"?)]], 1, true), kv.typo)
    assert.truthy(kv.range:find("time_cost must be an integer from 1", 1, true), kv.range)
  end)

  it("verifies Django's pbkdf2_sha256 hashes (made here by Python's hashlib)", function()
    local made = H.sh([[/usr/bin/python3 -c "
import base64, hashlib
key = hashlib.pbkdf2_hmac('sha256', b'hunter2', b'NaCl-salt', 12000)
print('pbkdf2_sha256\$12000\$NaCl-salt\$' + base64.b64encode(key).decode())"]]):gsub("%s+$", "")
    assert.truthy(made:match("^pbkdf2_sha256%$12000%$NaCl%-salt%$"), made)
    local kv = H.run_kv(nil, string.format([[
local c = http.crypto
print("right", c.password_verify("hunter2", %q))
print("wrong", c.password_verify("hunter3", %q))
print("cut", c.password_verify("hunter2", %q))
]], made, made, made:sub(1, -10)))
    assert.equal("true", kv.right)
    assert.equal("false", kv.wrong)
    assert.equal("false\tmalformed hash", kv.cut) -- a key cut short is no key, not a prefix to match
  end)

  it("keeps the event loop free: a health check answers within 50 ms while 8 hashes run", function()
    local srv = H.start(APP, { flags = { "--workers", "1" } })
    finally(function() srv:stop() end)
    local pending = {}
    for i = 1, 8 do
      local c = srv:connect(10)
      assert(c:send("GET /hash?i=" .. i .. " HTTP/1.1\r\nHost: x\r\n\r\n"))
      pending[#pending + 1] = c
    end
    local worst, checks, answered = 0, 0, {}
    local deadline = H.now() + 20
    while #answered < 8 and H.now() < deadline do
      local t0 = H.now()
      local r = srv:get("/health")
      assert.equal("ok", r.body)
      worst = math.max(worst, H.now() - t0)
      checks = checks + 1
      for i = #pending, 1, -1 do
        local c = pending[i]
        if #socket.select({ c.sock }, nil, 0) > 0 then
          local res = assert(c:read_response())
          answered[#answered + 1] = res.body
          c:close()
          table.remove(pending, i)
        end
      end
      H.sleep(0.005)
    end
    assert.equal(8, #answered)
    for _, body in ipairs(answered) do assert.equal("true", body) end
    assert.truthy(checks >= 3, "the hashes ended before the loop could be checked: " .. checks)
    assert.truthy(worst < 0.05, string.format("a health check waited %.0f ms", worst * 1000))
  end)
end)
