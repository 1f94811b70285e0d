-- Signed sessions: a middleware that gives each request a session table,
-- kept client-side in a cookie signed with HMAC-SHA256.
--
--   local session = require "moonhttp.session"
--   http.use(session.middleware{ secrets = { "new secret...", "old secret..." } })
--   http.handle("POST /login", function(req, res)
--     local s = session.of(req)
--     s.data.user = "ann"
--     s:save()              -- before the body is written (it sets a cookie)
--   end)
--
-- The cookie value is <store value>.<base64url(HMAC-SHA256(secret, name "=" store value))>.
-- The first secret signs; every secret verifies, so a new secret can be put
-- first while cookies signed with the old one still work. A cookie that fails
-- the check, does not decode or has expired is no session: the handler sees
-- an empty one (never an error; a tampered cookie is the client's business).
--
-- Stores: the cookie store (the default) puts the data itself into the
-- cookie, as base64url(JSON { d = data, e = expiry }); nothing server-side
-- can revoke it, so a copy of the cookie stays valid until it expires, even
-- after destroy(). A server-side store (session.shared_store(dict), or one
-- of your own on Redis) keeps the data under a random id it returns, and
-- destroy() / regenerate() delete that id, so old cookies stop working:
--   store:encode(data, expires, value) -> value | nil, err   (value: cookie-safe bytes;
--                                  the third argument is the session's current value, if
--                                  any: a server-side store keeps its id)
--   store:decode(value)         -> data, expires | nil
--   store:destroy(value)        (optional)
local http = require "moonhttp"
local cjson = require "cjson"

local crypto, b64 = http.crypto, http.base64
local core = require "moonhttp.core"

local M = {}

function M.cookie_store()
  local store = {}
  function store.encode(_, data, expires)
    local ok, json = pcall(cjson.encode, { d = data, e = expires })
    if not ok then return nil, "session data cannot be encoded as JSON" end
    return b64.encode_url(json)
  end
  function store.decode(_, value)
    local json = b64.decode_url(value)
    if not json then return nil end
    local t = http.json.decode(json)
    if type(t) ~= "table" or type(t.d) ~= "table" or type(t.e) ~= "number" then return nil end
    return t.d, t.e
  end
  return store
end

local ID_BYTES = 24 -- 192 random bits: an id cannot be guessed

-- A server-side store on a shared dict: every worker sees the sessions, a
-- reload keeps them, and destroy() deletes one for every copy of its cookie.
-- The cookie carries only the signed id; the dict holds JSON { d =, e = }
-- under "session:<id>" with the session's max_age as TTL. A full dict evicts
-- its least recently used entries, sessions included: size it for them.
function M.shared_store(dict)
  if type(dict) ~= "userdata" or type(dict.get) ~= "function" or type(dict.set) ~= "function" then
    error("session.shared_store: expects a shared dict (http.shared.<name>)", 2)
  end
  local store = {}
  local function key(id) return "session:" .. id end
  function store.encode(_, data, expires, id)
    local ok, json = pcall(cjson.encode, { d = data, e = expires })
    if not ok then return nil, "session data cannot be encoded as JSON" end
    id = id or b64.encode_url(crypto.random(ID_BYTES))
    local set, err = dict:set(key(id), json, expires - os.time() + 1)
    if not set then return nil, err end
    return id
  end
  function store.decode(_, id)
    if #id ~= ID_BYTES * 4 // 3 or not id:match("^[%w_%-]+$") then return nil end
    local json = dict:get(key(id))
    local t = type(json) == "string" and http.json.decode(json)
    if type(t) ~= "table" or type(t.d) ~= "table" or type(t.e) ~= "number" then return nil end
    return t.d, t.e
  end
  function store.destroy(_, id) dict:delete(key(id)) end
  return store
end

local current = setmetatable({}, { __mode = "k" }) -- req -> session, while its handler runs

local Session = {}
Session.__index = Session

-- Writes the session cookie; call before the body is written. Returns true
-- or nil, err (e.g. "session too large" past the 4 KiB a cookie may carry).
function Session:save()
  local m = self._m
  local expires = os.time() + m.max_age
  local value, err = m.store:encode(self.data, expires, self._value)
  if not value then return nil, err end
  local signed = value .. "." .. b64.encode_url(crypto.hmac_sha256(m.secrets[1], m.name .. "=" .. value))
  if #signed + #m.name > 4096 then return nil, "session too large" end
  self._value = value -- a server-side store's id, kept by the next save
  local c = { name = m.name, value = signed, max_age = m.max_age }
  for k, v in pairs(m.cookie) do c[k] = v end
  self._res:set_cookie(c)
  return true
end

-- Ends the session: empties the data and tells the client to drop its cookie.
-- A server-side store forgets the id, so a copy of the cookie is no session
-- either; with the cookie store a copy stays valid until it expires.
function Session:destroy()
  local m = self._m
  if self._value and m.store.destroy then m.store:destroy(self._value) end
  self.data, self._value = {}, nil
  local c = { name = m.name, value = "", max_age = 0, expires = 0 }
  for k, v in pairs(m.cookie) do c[k] = v end
  self._res:set_cookie(c)
end

-- Gives the session a new id with the same data (call it at login, against
-- session fixation, before writing the body): a server-side store drops the
-- old id, so the cookie the client had before is no session any more.
-- Returns true or nil, err as save() does.
function Session:regenerate()
  local m = self._m
  if self._value and m.store.destroy then m.store:destroy(self._value) end
  self._value = nil
  return self:save()
end

-- The store value if the cookie's signature is good under any secret.
local function verify(m, cookie)
  local value, sig = cookie:match("^(.*)%.([%w_%-]+)$")
  if not value then return nil end
  sig = b64.decode_url(sig)
  if not sig then return nil end
  local ok = false
  for _, secret in ipairs(m.secrets) do
    -- every secret is tried, so timing does not tell which one matched
    if crypto.equal(crypto.hmac_sha256(secret, m.name .. "=" .. value), sig) then ok = true end
  end
  return ok and value or nil
end

local function load_session(m, req, res)
  local s = setmetatable({ _m = m, _res = res, data = {}, fresh = true }, Session)
  local cookie = req:cookie(m.name)
  local value = cookie and verify(m, cookie)
  if value then
    local data, expires = m.store:decode(value)
    -- whole seconds: a session lives through the second it expires in, so it
    -- lasts at least max_age seconds (a login at 10.99 with max_age = 1 made
    -- expires 11, and `>` dropped it 10 ms later)
    if data and expires >= os.time() then
      s.data, s.fresh, s._value = data, false, value
    end
  end
  return s
end

--- session.middleware{ secrets = { ... } | secret = "...", name = "session",
--- max_age = 86400, cookie = { path, domain, secure, same_site, http_only }, store = }
function M.middleware(opts)
  if type(opts) ~= "table" then error("session.middleware: expects a table of options", 2) end
  core.check_opts(opts, "session.middleware", { "secrets", "secret", "name", "max_age", "cookie", "store" })
  if type(opts.cookie) == "table" then
    core.check_opts(opts.cookie, "session.middleware: cookie",
      { "path", "domain", "secure", "same_site", "http_only" })
  end
  local secrets = opts.secrets or { opts.secret }
  if type(secrets) ~= "table" or #secrets == 0 then
    error("session.middleware: secrets (a list, the first signs) or secret is required", 2)
  end
  for _, s in ipairs(secrets) do
    if type(s) ~= "string" or #s < 32 then
      error("session.middleware: each secret must be a string of at least 32 bytes", 2)
    end
  end
  local m = {
    secrets = secrets,
    name = opts.name or "session",
    max_age = opts.max_age or 86400,
    cookie = opts.cookie or {},
    store = opts.store or M.cookie_store(),
  }
  if math.type(m.max_age) ~= "integer" or m.max_age <= 0 then
    error("session.middleware: max_age must be a positive integer (seconds)", 2)
  end
  return function(next)
    return function(req, res)
      current[req] = load_session(m, req, res)
      local _ <close> = setmetatable({}, { __close = function() current[req] = nil end })
      return next(req, res)
    end
  end
end

--- The session of a request handled under the middleware.
function M.of(req)
  local s = current[req]
  if not s then error("session.of: no session middleware on this route", 2) end
  return s
end

return core.strict_module(M, "session")
