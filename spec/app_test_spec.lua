-- `moonhttp test [busted args]`: an app's own specs, run from the app's
-- folder outside this tree with nothing but the binary (env -i: no
-- LUA_PATH to the checkout, no MOONHTTP_BIN), and moonhttp.test keeping the
-- app's own listen list (a TLS listener with client certificates among it)
-- on free ports, with TLS client options. The installed binary's run is in
-- spec/install_spec.lua.
local H = require "helper"
local certs = require "helpers.certs"

local q = H.shell_quote

-- A plain listener and a TLS one asking for client certificates, on fixed
-- ports: free_ports must move them, or the two copies the spec starts collide.
local APP = [[
local http = require "moonhttp"
http.server{ listen = {
  "127.0.0.1:18080",
  { addr = "127.0.0.1:18443", tls = { cert = "pki/srv.pem", key = "pki/srv.key",
                                       client_ca = "pki/ca.pem", client_auth = "optional" } },
} }
http.handle("GET /who", function(req, res)
  local t = req:tls()
  local c = t and t.client_cert
  res:write(t and ("tls " .. (c and c.subject or "anonymous")) or "plain")
end)
]]

local SPEC = [[
local test = require "moonhttp.test"

describe("the app", function()
  local tls = { ca = "pki/ca.pem" }
  local app
  setup(function() app = test.start("app.lua", nil, { tls = tls }) end)
  teardown(function() app:stop() end)

  it("keeps its listen list, on free ports", function()
    assert.equal(2, #app.listeners)
    assert.is_false(app.listeners[1].tls)
    assert.is_true(app.listeners[2].tls)
    assert.not_equal(18443, app.listeners[2].port)
    local again = test.start("app.lua") -- side by side: the fixed ports would collide
    local _, _, body = again:get("/who")
    again:stop()
    assert.equal("plain", body)
  end)

  it("answers on the plain listener", function()
    local status, _, body = app:get("/who")
    assert.same({ 200, "plain" }, { status, body })
  end)

  it("answers over TLS, verified against the CA", function()
    local status, _, body = app:get("/who", { listener = 2 })
    assert.same({ 200, "tls anonymous" }, { status, body })
  end)

  it("sends a client certificate", function()
    local _, _, body = app:get("/who", { listener = 2,
      tls = { ca = "pki/ca.pem", cert = "pki/client.pem", key = "pki/client.key" } })
    assert.equal("tls CN=client-one", body)
  end)

  it("refuses a server its CA did not sign", function()
    local ok, err = pcall(app.get, app, "/who", { listener = 2, tls = { ca = "pki/other.pem" } })
    assert.is_false(ok)
    assert.matches("TLS handshake with https://127.0.0.1:%d+: certificate verify failed", err)
  end)
end)
]]

local function run(dir, cmd)
  local out = H.sh("(cd " .. q(dir) .. " && " .. cmd .. " 2>&1; echo \"exit $?\")")
  return out, tonumber(out:match("exit (%d+)\n$"))
end

describe("moonhttp test", function()
  local dir = H.tmpname(".app")
  local clean_env = "env -i PATH=/usr/bin:/bin HOME=" .. q(dir)
  setup(function()
    H.must("mkdir -p " .. q(dir .. "/spec"))
    local pki = certs.ca_and_server(".pki")
    certs.leaf(pki, "client", "/CN=client-one", { ext = "extendedKeyUsage=clientAuth" })
    certs.self_signed(pki, "other", "/CN=another CA")
    H.must("mv " .. q(pki) .. " " .. q(dir .. "/pki"))
    H.write_file(dir .. "/app.lua", APP)
    H.write_file(dir .. "/spec/app_spec.lua", SPEC)
    H.write_file(dir .. "/spec/broken_spec.lua",
      'describe("a broken app", function() it("fails", function() assert.equal(1, 2) end) end)\n')
  end)
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("runs an app's TLS specs with only the binary, passing busted's arguments", function()
    local out, rc = run(dir, clean_env .. " " .. q(H.bin) .. " test -o TAP spec/app_spec.lua")
    assert.equal(0, rc, out)
    for _, name in ipairs { "keeps its listen list, on free ports", "answers on the plain listener",
      "answers over TLS, verified against the CA", "sends a client certificate",
      "refuses a server its CA did not sign" } do
      assert.matches("\nok %d+ %- the app " .. name:gsub("%p", "%%%0") .. "\n", "\n" .. out)
    end
  end)

  it("exits with busted's status", function()
    local out, rc = run(dir, clean_env .. " " .. q(H.bin) .. " test spec/broken_spec.lua")
    assert.equal(1, rc, out)
    assert.matches("0 successes / 1 failure", out, 1, true)
    -- no arguments: busted's own defaults (every spec/*_spec.lua)
    out, rc = run(dir, clean_env .. " " .. q(H.bin) .. " test")
    assert.equal(1, rc, out)
    assert.matches("5 successes / 1 failure", out, 1, true)
  end)

  it("says how to install busted when there is none", function()
    local out, rc = run(dir, "env -i PATH=" .. q(dir .. "/no-bin") .. " " .. q(H.bin) .. " test")
    assert.equal(127, rc, out)
    assert.matches("moonhttp test: busted is not installed (Debian: apt install lua-busted", out, 1, true)
  end)
end)
