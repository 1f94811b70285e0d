-- Cross-site request forgery protection: a middleware that refuses unsafe
-- requests a browser sends on behalf of another site.
--
--   local csrf = require "moonhttp.csrf"
--   http.use(csrf.middleware{ trusted_origins = { "https://admin.example.com" },
--                             exempt = { "POST /hooks/" } })
--
-- The check is Go 1.25's http.CrossOriginProtection: GET, HEAD and OPTIONS
-- always pass (they must not change state). Any other method is refused when
--   - Sec-Fetch-Site is present and is neither "same-origin" nor "none"
--     (every browser sends it since 2023; "same-site" is refused too: a
--     sibling subdomain is another origin), or else
--   - Origin is present and its host[:port] is not the request's Host
--     (the scheme is not compared: Host does not carry it; HSTS covers
--     an http -> https downgrade), "null" included,
-- unless the Origin is a trusted origin or the route is exempt. A request
-- with neither header is same-origin from an old browser or not from a
-- browser at all (curl, another server): it passes, unless token mode is on.
--
-- Token mode (token = true) is for clients that send neither header: such a
-- request must carry the session's token (csrf.token(req)) in an
-- X-CSRF-Token header or an urlencoded `_csrf` form field. The token lives in
-- the session, so moonhttp.session's middleware must run before this one.
local http = require "moonhttp"
local session = require "moonhttp.session"
local core = require "moonhttp.core"

local crypto, b64 = http.crypto, http.base64

local M = {}

local SAFE = { GET = true, HEAD = true, OPTIONS = true }
local OPTIONS = { trusted_origins = true, exempt = true, token = true }
local SESSION_KEY = "_csrf" -- where the token sits in session.of(req).data

-- Levenshtein distance, for "did you mean" on a mistyped option.
local function distance(a, b)
  local prev = {}
  for j = 0, #b do prev[j] = j end
  for i = 1, #a do
    local cur = { [0] = i }
    for j = 1, #b do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      cur[j] = math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
    end
    prev = cur
  end
  return prev[#b]
end

local function check_keys(opts)
  for k in pairs(opts) do
    if not OPTIONS[k] then
      local best, best_d = nil, 4
      for known in pairs(OPTIONS) do
        local d = type(k) == "string" and distance(k, known) or math.huge
        if d < best_d then best, best_d = known, d end
      end
      error(string.format("csrf.middleware: unknown option %q%s (known: exempt, token, trusted_origins)",
        tostring(k), best and string.format(" (did you mean %q?)", best) or ""), 3)
    end
  end
end

-- trusted_origins: a list of "scheme://host[:port]", compared with the Origin
-- header as a whole (lowercased), as Go's AddTrustedOrigin does.
local function parse_trusted(list)
  local set = {}
  if list == nil then return set end
  if type(list) ~= "table" then error("csrf.middleware: trusted_origins must be a list of origins", 3) end
  for _, o in ipairs(list) do
    if type(o) ~= "string" or not o:match("^%a[%w+.%-]*://[^/?#@%s]+$") then
      error(string.format("csrf.middleware: trusted origin %q is not scheme://host[:port]", tostring(o)), 3)
    end
    set[o:lower()] = true
  end
  return set
end

-- exempt: a list of "[METHOD ]/path". A path ending in "/" covers its whole
-- subtree ("/hooks/" exempts "/hooks/github"); any other path only itself.
-- Matched against req.path, the path the router saw.
local function parse_exempt(list)
  local rules = {}
  if list == nil then return rules end
  if type(list) ~= "table" then error("csrf.middleware: exempt must be a list of \"[METHOD ]/path\"", 3) end
  for _, e in ipairs(list) do
    local method, path
    if type(e) == "string" then
      method, path = e:match("^(%u+) +(/%S*)$")
      if not method then path = e:match("^/%S*$") end
    end
    if not path then
      error(string.format("csrf.middleware: exempt entry %q is not \"[METHOD ]/path\"", tostring(e)), 3)
    end
    rules[#rules + 1] = { method = method, path = path, prefix = path:sub(-1) == "/" }
  end
  return rules
end

local function exempt(m, req, origin)
  if origin and m.trusted[origin:lower()] then return true end
  local method, path = req.method, req.path
  for _, r in ipairs(m.exempt) do
    if (not r.method or r.method == method)
      and (path == r.path or (r.prefix and path:sub(1, #r.path) == r.path)) then
      return true
    end
  end
  return false
end

local function session_of(req, who)
  local ok, s = pcall(session.of, req)
  if not ok then
    error(who .. ": the CSRF token lives in the session: put http.use(session.middleware{...}) "
      .. "before csrf.middleware (and csrf.token) on this route", 3)
  end
  return s
end

--- csrf.token(req) -> the session's token (base64url of 32 random bytes),
--- made and saved on first use: call it before writing the body, as s:save().
--- Returns nil, err when the session cannot be saved.
function M.token(req)
  local s = session_of(req, "csrf.token")
  local t = s.data[SESSION_KEY]
  if type(t) ~= "string" then
    t = b64.encode_url(crypto.random(32))
    s.data[SESSION_KEY] = t
    local ok, err = s:save()
    if not ok then return nil, err end
  end
  return t
end

-- The token the request carries: the header first, else an urlencoded form's
-- `_csrf` field (req:body() keeps the body, so the handler can read it again).
local function sent_token(req)
  local t = req:header("x-csrf-token")
  if t then return t end
  local form = req:form()
  return form and form[SESSION_KEY]
end

local function valid_token(req)
  local want = session_of(req, "csrf.middleware").data[SESSION_KEY]
  local got = sent_token(req)
  return type(want) == "string" and type(got) == "string" and crypto.equal(want, got)
end

local function refuse(res, why)
  res:status(403)
  res:header("Content-Type", "text/plain; charset=utf-8")
  res:write(why, "\n")
end

-- nil if the request may go on, else why it is refused.
local function check(m, req)
  if SAFE[req.method] then return nil end
  local origin = req:header("origin")
  local site = req:header("sec-fetch-site")
  if site then
    if site == "same-origin" or site == "none" or exempt(m, req, origin) then return nil end
    return "cross-origin request refused"
  end
  if origin then
    local host = origin:match("^%a[%w+.%-]*://([^/?#]+)$")
    if host and req.host and host:lower() == req.host:lower() then return nil end
    if exempt(m, req, origin) then return nil end
    return "cross-origin request refused"
  end
  if m.token and not exempt(m, req, nil) and not valid_token(req) then
    return "missing or invalid CSRF token"
  end
  return nil
end

--- csrf.middleware{ trusted_origins = { "https://host[:port]", ... },
--- exempt = { "[METHOD ]/path", "/subtree/", ... }, token = false }
function M.middleware(opts)
  opts = opts or {}
  if type(opts) ~= "table" then error("csrf.middleware: expects a table of options", 2) end
  check_keys(opts)
  if opts.token ~= nil and type(opts.token) ~= "boolean" then
    error("csrf.middleware: token must be true or false", 2)
  end
  local m = { trusted = parse_trusted(opts.trusted_origins), exempt = parse_exempt(opts.exempt),
              token = opts.token == true }
  return function(next)
    return function(req, res, ...)
      -- token mode needs the session on every request: say so at the first one
      if m.token then session_of(req, "csrf.middleware") end
      local why = check(m, req)
      if why then return refuse(res, why) end
      return next(req, res, ...)
    end
  end
end

return core.strict_module(M, "csrf")
