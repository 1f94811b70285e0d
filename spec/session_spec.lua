-- moonhttp.session: signed cookie sessions through the real binary.
local H = require "helper"

local S1, S2 = string.rep("a", 32), string.rep("b", 32)

local function app(secrets, max_age)
  return string.format([[
local http = require "moonhttp"
local session = require "moonhttp.session"
http.use(session.middleware{ secrets = %s, max_age = %d })
http.handle("POST /login", function(req, res)
  local s = session.of(req)
  s.data.user = req:arg("user")
  assert(s:save())
  res:write("hello ", s.data.user)
end)
http.handle("GET /me", function(req, res)
  local s = session.of(req)
  res:write(s.data.user or "nobody", s.fresh and " (fresh)" or "")
end)
http.handle("POST /logout", function(req, res) session.of(req):destroy() end)
http.handle("GET /big", function(req, res)
  local s = session.of(req)
  s.data.blob = string.rep("x", 5000)
  res:write(tostring(select(2, s:save())))
end)
]], secrets, max_age or 3600)
end

local function cookie_of(res)
  return res.headers["set-cookie"]:match("^(session=[^;]*)")
end

describe("moonhttp.session", function()
  local srv
  before_each(function() srv = H.start(app(string.format("{ %q }", S1))) end)
  after_each(function() srv:stop() end)

  it("stores a table in a signed cookie and reads it back", function()
    local r = srv:request("POST", "/login?user=ann", {}, "")
    assert.equal("hello ann", r.body)
    assert.matches("; Max%-Age=3600; HttpOnly; SameSite=Lax$", r.headers["set-cookie"])
    local me = srv:get("/me", { Cookie = cookie_of(r) })
    assert.equal("ann", me.body)
    assert.equal("nobody (fresh)", srv:get("/me").body)
  end)

  it("treats a tampered cookie as no session", function()
    local c = cookie_of(srv:request("POST", "/login?user=ann", {}, ""))
    local value, sig = c:match("^session=(.*)%.(.*)$")
    -- change one byte of the payload, keep the signature
    local flipped = value:sub(1, 5) .. (value:sub(6, 6) == "A" and "B" or "A") .. value:sub(7)
    for _, bad in ipairs({ "session=" .. flipped .. "." .. sig, "session=" .. value .. "." .. sig:reverse(),
                           "session=" .. value, "session=.", "session=\xff\xfe.AA", "session=" .. value .. ".!!" }) do
      assert.equal("nobody (fresh)", srv:get("/me", { Cookie = bad }).body, bad)
    end
  end)

  it("destroy expires the cookie", function()
    local c = cookie_of(srv:request("POST", "/login?user=ann", {}, ""))
    local r = srv:request("POST", "/logout", { Cookie = c }, "")
    assert.matches("^session=; Path=/; Max%-Age=0; Expires=Thu, 01 Jan 1970", r.headers["set-cookie"])
  end)

  it("a session too large for a cookie is nil, err", function()
    assert.equal("session too large", srv:get("/big").body)
  end)
end)

describe("moonhttp.session secrets and expiry", function()
  it("rotation: old secrets verify, the new one signs", function()
    local old = H.start(app(string.format("{ %q }", S1)))
    local c = cookie_of(old:request("POST", "/login?user=ann", {}, ""))
    old:stop()
    local new, only_new
    -- one finally for both: busted keeps only the last finally of a test
    finally(function()
      if new then new:stop() end
      if only_new then only_new:stop() end
    end)
    new = H.start(app(string.format("{ %q, %q }", S2, S1)))
    assert.equal("ann", new:get("/me", { Cookie = c }).body)
    local c2 = cookie_of(new:request("POST", "/login?user=bob", {}, ""))
    assert.not_equal(c:match("%.(.*)$"), c2:match("%.(.*)$"))
    only_new = H.start(app(string.format("{ %q }", S2)))
    assert.equal("bob", only_new:get("/me", { Cookie = c2 }).body)
    assert.equal("nobody (fresh)", only_new:get("/me", { Cookie = c }).body)
  end)

  it("an expired session is no session", function()
    local srv = H.start(app(string.format("{ %q }", S1), 1))
    finally(function() srv:stop() end)
    local c = cookie_of(srv:request("POST", "/login?user=ann", {}, ""))
    assert.equal("ann", srv:get("/me", { Cookie = c }).body)
    H.sleep(2.1)
    assert.equal("nobody (fresh)", srv:get("/me", { Cookie = c }).body)
  end)

  it("rejects short secrets at load time", function()
    local code, out = H.run({ "--check", H.script(app('{ "short" }')) })
    assert.not_equal(0, code)
    assert.matches("at least 32 bytes", out)
  end)
end)
