-- moonhttp.session: signed cookie sessions through the real binary.
local H = require "helper"
local O = require "ops_helper"

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
    -- gone within 2 s of max_age = 1 (whole seconds; asked every 50 ms)
    local body
    O.wait_for(function()
      body = srv:get("/me", { Cookie = c }).body
      return body == "nobody (fresh)"
    end, 3, 0.05)
    assert.equal("nobody (fresh)", body)
  end)

  it("a session lasts max_age seconds even when saved at the end of a second", function()
    local srv = H.start(app(string.format("{ %q }", S1), 1))
    finally(function() srv:stop() end)
    -- log in in the last tenth of a second, ask again early in the next one:
    -- 0.2 s later, well inside max_age = 1
    while H.now() % 1 < 0.85 do H.sleep(0.02) end
    local c = cookie_of(srv:request("POST", "/login?user=ann", {}, ""))
    while H.now() % 1 > 0.5 do H.sleep(0.01) end
    assert.equal("ann", srv:get("/me", { Cookie = c }).body)
  end)

  it("rejects short secrets at load time", function()
    local code, out = H.run({ "--check", H.script(app('{ "short" }')) })
    assert.not_equal(0, code)
    assert.matches("at least 32 bytes", out)
  end)
end)

local function shared_app(max_age)
  return string.format([[
local http = require "moonhttp"
local session = require "moonhttp.session"
http.server{ shared = { sessions = "1m" } }
http.use(session.middleware{ secret = %q, max_age = %d,
                             store = session.shared_store(http.shared.sessions) })
http.handle("POST /login", function(req, res)
  local s = session.of(req)
  s.data.user = req:arg("user")
  assert(s:save())
  res:write("hello ", s.data.user)
end)
http.handle("POST /rotate", function(req, res)
  local s = session.of(req)
  assert(s:regenerate())
  res:write(s.data.user or "nobody")
end)
http.handle("GET /me", function(req, res)
  local s = session.of(req)
  res:write(s.data.user or "nobody", s.fresh and " (fresh)" or "")
end)
http.handle("GET /ttl/{id}", function(req, res)
  res:write(tostring(http.shared.sessions:ttl("session:" .. req:pathvalue("id"))))
end)
http.handle("POST /logout", function(req, res) session.of(req):destroy() end)
]], S1, max_age or 3600)
end

local function id_of(cookie) return cookie:match("^session=([^.]*)%.") end

describe("moonhttp.session shared_store", function()
  local srv
  before_each(function() srv = H.start(shared_app()) end)
  after_each(function() srv:stop() end)

  it("the cookie carries only a signed random id; the data stays in the dict, with max_age as TTL", function()
    local c = cookie_of(srv:request("POST", "/login?user=ann", {}, ""))
    assert.matches("^session=[%w_%-]+%.[%w_%-]+$", c)
    assert.equal(32, #id_of(c))
    -- 24 random bytes, not base64url('{"d":...'), which the cookie store's values start with
    assert.is_nil(id_of(c):find("^eyJ"))
    assert.equal("ann", srv:get("/me", { Cookie = c }).body)
    local ttl = tonumber(srv:get("/ttl/" .. id_of(c)).body)
    assert.truthy(ttl >= 3598 and ttl <= 3601, tostring(ttl))
    -- saving again keeps the id
    local c2 = cookie_of(srv:request("POST", "/login?user=bob", { Cookie = c }, ""))
    assert.equal(c, c2)
    assert.equal("bob", srv:get("/me", { Cookie = c }).body)
    -- two visitors, two ids
    assert.not_equal(id_of(c), id_of(cookie_of(srv:request("POST", "/login?user=cy", {}, ""))))
  end)

  it("regenerate gives a new id with the same data; the old cookie is no session", function()
    local old = cookie_of(srv:request("POST", "/login?user=ann", {}, ""))
    local r = srv:request("POST", "/rotate", { Cookie = old }, "")
    assert.equal("ann", r.body)
    local new = cookie_of(r)
    assert.not_equal(id_of(old), id_of(new))
    assert.equal("ann", srv:get("/me", { Cookie = new }).body)
    assert.equal("nobody (fresh)", srv:get("/me", { Cookie = old }).body)
    assert.equal("nil", srv:get("/ttl/" .. id_of(old)).body)
  end)

  it("destroy deletes the session: a copy of the cookie is no session", function()
    local c = cookie_of(srv:request("POST", "/login?user=ann", {}, ""))
    local r = srv:request("POST", "/logout", { Cookie = c }, "")
    assert.matches("^session=; Path=/; Max%-Age=0", r.headers["set-cookie"])
    assert.equal("nobody (fresh)", srv:get("/me", { Cookie = c }).body)
  end)

  it("an id the dict does not hold, or of the wrong shape, is no session", function()
    local c = cookie_of(srv:request("POST", "/login?user=ann", {}, ""))
    local plain = H.start(app(string.format("{ %q }", S1)))
    local cookie_store = cookie_of(plain:request("POST", "/login?user=ann", {}, ""))
    plain:stop()
    -- a cookie-store value signed with the same secret: still not an id
    assert.equal("nobody (fresh)", srv:get("/me", { Cookie = cookie_store }).body)
    local id = id_of(c)
    local other = (id:sub(1, 1) == "A" and "B" or "A") .. id:sub(2)
    assert.equal("nobody (fresh)", srv:get("/me", { Cookie = "session=" .. other .. c:match("(%..*)$") }).body)
  end)

  it("rejects something that is not a shared dict at load time", function()
    local code, out = H.run({ "--check", H.script([[
local session = require "moonhttp.session"
session.shared_store("sessions")
]]) })
    assert.not_equal(0, code)
    assert.matches("session.shared_store: expects a shared dict", out)
  end)
end)

describe("moonhttp.session cookie store: regenerate and logout", function()
  local srv
  before_each(function()
    srv = H.start(app(string.format("{ %q }", S1)) .. [[
http.handle("POST /rotate", function(req, res)
  local s = session.of(req)
  assert(s:regenerate())
  res:write(s.data.user or "nobody")
end)
]])
  end)
  after_each(function() srv:stop() end)

  it("regenerate writes a new cookie with the same data", function()
    local old = cookie_of(srv:request("POST", "/login?user=ann", {}, ""))
    local r = srv:request("POST", "/rotate", { Cookie = old }, "")
    assert.equal("ann", r.body)
    assert.equal("ann", srv:get("/me", { Cookie = cookie_of(r) }).body)
  end)

  -- What the README warns about: the cookie store has nothing server-side to revoke.
  it("a copy of the cookie still works after destroy until it expires", function()
    local c = cookie_of(srv:request("POST", "/login?user=ann", {}, ""))
    srv:request("POST", "/logout", { Cookie = c }, "")
    assert.equal("ann", srv:get("/me", { Cookie = c }).body)
  end)
end)
