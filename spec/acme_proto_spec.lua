-- The ACME client (lua/moonhttp/acme/proto.lua, RFC 8555) against pebble
-- (spec/pebble_helper.lua), from a server whose own route answers HTTP-01:
-- accounts, orders, bad nonces, external account binding, a refused
-- challenge. The listener side (tls.acme, the shared zone, installing) is
-- spec/acme_spec.lua's.
local H = require "helper"
local P = require "pebble_helper"

local pending_reason = not P.available() and "pebble is not installed (scripts/deps.sh)" or nil
local q = H.shell_quote

-- A server on pebble's HTTP-01 port whose on_start runs `body` with c (a client with a
-- new account key), `answer` (HTTP-01 through the app's route) and `result` (served as
-- JSON at /result once body returns).
local function run(ca, body)
  local srv = H.start(string.format([[
local http = require "moonhttp"
local core = require "moonhttp.core"
local proto = require "moonhttp.acme.proto"
http.server{ listen = "127.0.0.1:%d" }
local answers, result = {}, {}
http.handle("GET /.well-known/acme-challenge/{token}", function(req, res)
  local a = answers[req:pathvalue("token")]
  if not a then res:status(404) return res:write("unknown token") end
  res:write(a)
end)
http.handle("GET /result", function(req, res) res:write(http.json.encode(result)) end)
local function answer(_, token, key_auth)
  answers[token] = key_auth
  return function() answers[token] = nil end
end
local DIRECTORY, CA = %q, %q
http.on_start(function()
  local key = core.acme.key_new()
  local c = assert(proto.new(http, { directory = DIRECTORY, ca = CA, key_pem = key }))
  local ok, err = pcall(function() %s end)
  if not ok then result.raised = tostring(err) end
  result.done = true
end)
]], ca.http_port, ca.directory, ca.ca, body), { no_listen = true })
  local deadline, r = H.now() + 20, nil
  repeat
    H.sleep(0.05)
    r = require("cjson").decode(srv:get("/result").body)
  until r.done or H.now() > deadline
  srv:stop()
  assert.is_nil(r.raised)
  return r, srv:logtext()
end

describe("the ACME client against pebble", function()
  if pending_reason then
    pending(pending_reason)
    return
  end
  local ca
  after_each(function()
    if ca then ca:stop() end
    ca = nil
  end)

  it("creates an account, finds it again by its key, and gets a chain by HTTP-01", function()
    ca = P.start()
    local chain_file = ca.dir .. "/chain.pem"
    local r = run(ca, string.format([[
      result.kid, result.err = c:account("admin@a.test")
      local again = assert(proto.new(http, { directory = DIRECTORY, ca = CA, key_pem = key }))
      result.kid_again = again:account()
      local chain, err = c:order({ "a.test", "www.a.test" }, core.acme.key_new(), "http-01", answer)
      result.order_err = err and proto.describe(err)
      if chain then local f = io.open(%q, "w"); f:write(chain); f:close() end
    ]], chain_file))
    assert.is_nil(r.err)
    assert.truthy(r.kid:find("^https://127%.0%.0%.1:%d+/"), r.kid)
    assert.equal(r.kid, r.kid_again)
    assert.is_nil(r.order_err)
    local root = ca:root_file()
    local out, ok = H.sh(string.format("openssl verify -CAfile %s -untrusted %s %s", q(root), q(chain_file), q(chain_file)))
    assert.truthy(ok, out)
    local text = H.sh("openssl x509 -noout -ext subjectAltName -in " .. q(chain_file))
    assert.truthy(text:find("DNS:a.test", 1, true) and text:find("DNS:www.a.test", 1, true), text)
    assert.truthy(ca:log():find("Attempting to validate w/ HTTP", 1, true))
  end)

  it("takes a CA's bad nonces in its stride", function()
    ca = P.start { nonce_reject = 15 }
    local r = run(ca, [[
      assert(c:account())
      local chain, err = c:order({ "a.test" }, core.acme.key_new(), "http-01", answer)
      result.ok, result.err = chain ~= nil, err and proto.describe(err)
    ]])
    assert.is_nil(r.err)
    assert.is_true(r.ok)
  end)

  it("gives up on bad nonces after 5 tries, with the CA's words", function()
    ca = P.start { nonce_reject = 100 }
    local r = run(ca, [[
      local kid, err = c:account()
      result.kid, result.err = kid, proto.describe(err)
    ]])
    assert.is_nil(r.kid)
    assert.truthy(r.err:find("^badNonce: JWS has an invalid anti%-replay nonce"), r.err)
    local _, posts = ca:log():gsub("POST /sign%-me%-up", "")
    assert.equal(5, posts)
  end)

  it("binds the account to the CA's key id when the CA requires it (EAB)", function()
    local hmac = "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W"
    ca = P.start { eab = { kid_1 = hmac } }
    local r = run(ca, string.format([[
      local kid, err = c:account()
      result.without = proto.describe(err)
      kid, err = c:account(nil, { kid = "kid_1", hmac = %q })
      result.kid, result.err = kid, err and proto.describe(err)
      local other = assert(proto.new(http, { directory = DIRECTORY, ca = CA, key_pem = core.acme.key_new() }))
      kid, err = other:account(nil, { kid = "kid_1", hmac = %q })
      result.bad_hmac = proto.describe(err)
    ]], hmac, ("A"):rep(#hmac)))
    assert.truthy(r.without:find("externalAccountRequired", 1, true), r.without)
    assert.is_nil(r.err)
    assert.truthy(r.kid)
    assert.truthy(r.bad_hmac:find("unauthorized", 1, true) or r.bad_hmac:find("malformed", 1, true), r.bad_hmac)
  end)

  it("says why an authorization failed when the challenge is not answered", function()
    ca = P.start()
    local r = run(ca, [[
      assert(c:account())
      local chain, err = c:order({ "a.test" }, core.acme.key_new(), "http-01", function()
        return function() end -- claims to answer, but the route has no such token
      end)
      result.ok, result.err = chain ~= nil, proto.describe(err)
    ]])
    assert.is_false(r.ok)
    assert.truthy(r.err:find("the authorization of a.test is invalid", 1, true), r.err)
    assert.truthy(r.err:find("unauthorized", 1, true), r.err)
  end)
end)
