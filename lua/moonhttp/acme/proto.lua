-- The ACME protocol (RFC 8555) over http.fetch: the directory, nonces, JWS
-- requests signed with the account key (ES256, through core.acme), the
-- account, and one order from newOrder to the certificate chain. Policy
-- (when to order, retries across orders, storage, workers) is acme.lua's;
-- here a failure is returned as a problem { type, detail, status,
-- retry_after } so the caller can log the CA's own words and back off.
local core = require "moonhttp.core"
local crypto = require "moonhttp.crypto"
local web = require "moonhttp.web"

local b64url = crypto.base64.encode_url
local encode = core.json_encode

local P = {}

local ERR = "urn:ietf:params:acme:error:"
-- A bad nonce is the CA asking for the request again with a fresh one
-- (RFC 8555 §6.5); more than this many in a row is a CA that is not well.
local NONCE_TRIES = 5
-- Polling a pending authorization or a processing order: start short (a test
-- CA answers in milliseconds), double up to a real CA's pace, give up after
-- POLL_LIMIT seconds (the order is then retried later as a whole).
local POLL_FIRST, POLL_MAX, POLL_LIMIT = 0.1, 2, 120

local Client = {}
Client.__index = Client

--- A problem as one line for the log: the CA's type without its prefix, and its detail.
function P.describe(p)
  if type(p) ~= "table" then return tostring(p) end
  local kind = tostring(p.type or "error"):gsub("^" .. ERR:gsub("%p", "%%%0"), "")
  local s = kind .. ": " .. tostring(p.detail or "")
  if p.status then s = s .. " (HTTP " .. p.status .. ")" end
  return s
end

local function problem(kind, detail, status, retry_after)
  return { type = kind, detail = detail, status = status, retry_after = retry_after }
end

-- Retry-After is seconds or an HTTP date (RFC 9110 §10.2.3); nil when absent or unreadable.
local MONTHS = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8,
  Sep = 9, Oct = 10, Nov = 11, Dec = 12 }
function P.retry_after(value, now)
  if not value then return nil end
  local n = tonumber(value)
  if n then return n >= 0 and n or nil end
  local d, mon, y, hh, mm, ss = value:match("%a+, (%d+) (%a+) (%d+) (%d+):(%d+):(%d+) GMT")
  if not d or not MONTHS[mon] then return nil end
  -- os.time reads a table as local time: the offset of the epoch in local time corrects it
  local t = os.time { year = tonumber(y), month = MONTHS[mon], day = tonumber(d),
    hour = tonumber(hh), min = tonumber(mm), sec = tonumber(ss) }
  local utc0 = os.time(os.date("!*t", 0))
  local at = t - utc0
  return math.max(0, at - (now or os.time()))
end

--- A client for one CA and one account key. opts: directory (URL), ca (a CA
--- bundle file, or nil for the system's), key_pem (the account key), kid (the
--- account URL when known), sleep (http.sleep), timeout (per request).
function P.new(http, opts)
  local jwk, thumb = core.acme.jwk(opts.key_pem)
  if not jwk then return nil, problem("client", "account key: " .. tostring(thumb)) end
  return setmetatable({
    http = http,
    fetcher = http.client(opts.ca and { tls = { ca = opts.ca } } or nil),
    directory_url = opts.directory,
    key_pem = opts.key_pem,
    jwk = jwk,
    thumbprint = thumb,
    kid = opts.kid,
    timeout = opts.timeout or 30,
  }, Client)
end

function Client:close() self.fetcher:close() end

-- One HTTP exchange: { status, headers = fn, body, json } or nil, problem.
function Client:exchange(url, opts)
  opts.timeout = self.timeout
  local r <close>, kind, detail = self.fetcher:fetch(url, opts)
  if not r then
    return nil, problem("connection", string.format("%s %s: %s (%s)", opts.method or "GET", url,
      tostring(kind), tostring(detail)))
  end
  local body, err = r:body()
  if not body then return nil, problem("connection", url .. ": reading the body: " .. tostring(err)) end
  local nonce = r:header("replay-nonce")
  if nonce then self.nonce = nonce end
  local out = { status = r.status, body = body, location = r:header("location"),
    retry_after = P.retry_after(r:header("retry-after")), link = r:header("link") }
  local ctype = (r:header("content-type") or ""):lower()
  if ctype:find("json", 1, true) then out.json = web.json_decode(body) end
  return out
end

function Client:directory()
  if self.dir then return self.dir end
  local r, err = self:exchange(self.directory_url, { method = "GET" })
  if not r then return nil, err end
  if r.status ~= 200 or type(r.json) ~= "table" or not r.json.newNonce or not r.json.newOrder then
    return nil, problem("directory", string.format("%s is not an ACME directory (HTTP %d)",
      self.directory_url, r.status), r.status, r.retry_after)
  end
  self.dir = r.json
  return self.dir
end

function Client:fresh_nonce()
  local dir, err = self:directory()
  if not dir then return nil, err end
  local r
  r, err = self:exchange(dir.newNonce, { method = "HEAD" })
  if not r then return nil, err end
  if not self.nonce then
    return nil, problem("badNonce", "newNonce answered HTTP " .. r.status .. " without a Replay-Nonce", r.status)
  end
  return self.nonce
end

-- The JWS of RFC 8555 §6.2 in the flattened JSON serialization. payload: a
-- table, or "" for POST-as-GET (§6.3). `jwk` instead of `kid` for newAccount.
function Client:jws(url, payload, nonce, use_jwk)
  local protected = { alg = "ES256", nonce = nonce, url = url }
  if use_jwk then
    protected.jwk = web.json_decode(self.jwk)
  else
    protected.kid = self.kid
  end
  local p64 = b64url(encode(protected))
  local body64 = payload == "" and "" or b64url(encode(payload))
  local sig, err = core.acme.sign_es256(self.key_pem, p64 .. "." .. body64)
  if not sig then return nil, problem("client", "signing: " .. tostring(err)) end
  return encode { protected = p64, payload = body64, signature = sig }
end

--- A signed POST, retried with a fresh nonce when the CA says badNonce.
--- Returns the exchange, or nil, problem (the CA's problem document when it sent one).
function Client:post(url, payload, opts)
  opts = opts or {}
  for _ = 1, NONCE_TRIES do
    local nonce = self.nonce
    self.nonce = nil -- a nonce is good for one request (§7.2)
    if not nonce then
      local err
      nonce, err = self:fresh_nonce()
      if not nonce then return nil, err end
      self.nonce = nil
    end
    local body, err = self:jws(url, payload, nonce, opts.jwk)
    if not body then return nil, err end
    local r
    r, err = self:exchange(url, { method = "POST", body = body,
      headers = { ["Content-Type"] = "application/jose+json", ["Accept"] = opts.accept } })
    if not r then return nil, err end
    if r.status < 400 then return r end
    local doc = type(r.json) == "table" and r.json or {}
    local p = problem(doc.type or "http", doc.detail or ("HTTP " .. r.status), r.status, r.retry_after)
    p.subproblems = doc.subproblems
    if p.type ~= ERR .. "badNonce" then return nil, p end
    self.last_bad_nonce = p
  end
  return nil, self.last_bad_nonce
end

local function eab_binding(self, eab, url)
  local key = crypto.base64.decode_url(eab.hmac)
  if not key then return nil, problem("client", "eab.hmac is not base64url") end
  local p64 = b64url(encode { alg = "HS256", kid = eab.kid, url = url })
  local body64 = b64url(self.jwk)
  return { protected = p64, payload = body64,
    signature = b64url(crypto.crypto.hmac_sha256(key, p64 .. "." .. body64)) }
end

--- The account: created, or found again for the same key (the CA answers 200
--- with its URL). Sets self.kid; returns it.
function Client:account(email, eab)
  if self.kid then return self.kid end
  local dir, err = self:directory()
  if not dir then return nil, err end
  local payload = { termsOfServiceAgreed = true }
  if email then payload.contact = { "mailto:" .. email } end
  if eab then
    payload.externalAccountBinding, err = eab_binding(self, eab, dir.newAccount)
    if not payload.externalAccountBinding then return nil, err end
  end
  local r
  r, err = self:post(dir.newAccount, payload, { jwk = true })
  if not r then return nil, err end
  if not r.location then
    return nil, problem("malformed", "newAccount answered without the account's URL", r.status)
  end
  self.kid = r.location
  return self.kid
end

-- POST-as-GET url until its status leaves `waiting`; the last object, or nil, problem.
function Client:poll(url, waiting)
  local delay, deadline = POLL_FIRST, core.clock() + POLL_LIMIT
  while true do
    local r, err = self:post(url, "")
    if not r then return nil, err end
    if type(r.json) ~= "table" then return nil, problem("malformed", url .. " answered no JSON", r.status) end
    if not waiting[r.json.status] then return r.json end
    if core.clock() > deadline then
      return nil, problem("timeout", string.format("%s still %s after %d s", url, r.json.status, POLL_LIMIT))
    end
    if not self.http.sleep(math.min(r.retry_after or delay, POLL_MAX)) then
      return nil, problem("stopping", "the server is stopping")
    end
    delay = math.min(delay * 2, POLL_MAX)
  end
end

local function invalid(what, obj)
  local e = type(obj.error) == "table" and obj.error or nil
  if not e and type(obj.challenges) == "table" then
    for _, c in ipairs(obj.challenges) do
      if type(c.error) == "table" then e = c.error end
    end
  end
  return problem(e and e.type or "unauthorized", what .. " is " .. tostring(obj.status)
    .. (e and e.detail and (": " .. e.detail) or ""), e and e.status)
end

-- One authorization: the challenge of `kind` answered through `answer(name, token,
-- key_authorization)` (which returns a function undoing it), then awaited.
function Client:authorize(url, kind, answer)
  local authz, err = self:poll(url, {})
  if not authz then return nil, err end
  if authz.status == "valid" then return true end
  if authz.status ~= "pending" then return nil, invalid("the authorization", authz) end
  local name = type(authz.identifier) == "table" and authz.identifier.value or "?"
  local chal
  for _, c in ipairs(authz.challenges or {}) do
    if c.type == kind then chal = c end
  end
  if not chal or type(chal.token) ~= "string" then
    return nil, problem("unsupportedChallenge", "the CA offers no " .. kind .. " challenge for " .. name)
  end
  local undo
  undo, err = answer(name, chal.token, chal.token .. "." .. self.thumbprint)
  if not undo then return nil, problem("client", tostring(err)) end
  local r
  r, err = self:post(chal.url, {})
  if r then
    authz, err = self:poll(url, { pending = true })
  end
  undo()
  if not r or not authz then return nil, err end
  if authz.status ~= "valid" then return nil, invalid("the authorization of " .. name, authz) end
  return true
end

--- One order for `names`: challenges of `kind` answered through `answer`, the
--- CSR made from `key_pem`, the chain downloaded. opts.replaces: the ARI
--- certificate identifier this order renews (RFC 9773 §5). Returns the chain (PEM).
function Client:order(names, key_pem, kind, answer, opts)
  local dir, err = self:directory()
  if not dir then return nil, err end
  local ids = {}
  for i, n in ipairs(names) do ids[i] = { type = "dns", value = n } end
  local payload = { identifiers = ids }
  if opts and opts.replaces and dir.renewalInfo then payload.replaces = opts.replaces end
  local r
  r, err = self:post(dir.newOrder, payload)
  if not r then return nil, err end
  local order, url = r.json, r.location
  if type(order) ~= "table" or not url or type(order.authorizations) ~= "table" then
    return nil, problem("malformed", "newOrder answered no order", r.status)
  end
  for _, a in ipairs(order.authorizations) do
    local ok
    ok, err = self:authorize(a, kind, answer)
    if not ok then return nil, err end
  end
  local der
  der, err = core.acme.csr(key_pem, names)
  if not der then return nil, problem("client", "CSR: " .. tostring(err)) end
  r, err = self:post(order.finalize, { csr = b64url(der) })
  if not r then return nil, err end
  order, err = self:poll(url, { pending = true, ready = true, processing = true })
  if not order then return nil, err end
  if order.status ~= "valid" or not order.certificate then return nil, invalid("the order", order) end
  r, err = self:post(order.certificate, "", { accept = "application/pem-certificate-chain" })
  if not r then return nil, err end
  if not r.body:find("-----BEGIN CERTIFICATE-----", 1, true) then
    return nil, problem("malformed", "the certificate download is not PEM", r.status)
  end
  return r.body
end

--- ACME Renewal Information (RFC 9773) for a certificate: the window the CA
--- suggests, { start = epoch, ["end"] = epoch, retry_after = s }, or nil when
--- the directory has no renewalInfo (or the answer is unusable: the caller
--- falls back to renew_before).
function Client:renewal_info(cert_id, now)
  local dir = self:directory()
  if not dir or not dir.renewalInfo then return nil end
  local r = self:exchange(dir.renewalInfo:gsub("/*$", "") .. "/" .. cert_id, { method = "GET" })
  if not r or r.status ~= 200 then return nil end
  return P.parse_renewal_info(r.json, r.retry_after, now)
end

local function rfc3339(s)
  if type(s) ~= "string" then return nil end
  local y, mo, d, h, mi, sec, frac, zone = s:match("^(%d%d%d%d)-(%d%d)-(%d%d)[Tt](%d%d):(%d%d):(%d%d)(%.?%d*)(.*)$")
  if not y then return nil end
  local t = os.time { year = tonumber(y), month = tonumber(mo), day = tonumber(d), hour = tonumber(h),
    min = tonumber(mi), sec = tonumber(sec) } - os.time(os.date("!*t", 0))
  if zone == "Z" or zone == "z" then return t + (tonumber("0" .. frac) or 0) end
  local sign, zh, zm = zone:match("^([+-])(%d%d):(%d%d)$")
  if not sign then return nil end
  local off = (tonumber(zh) * 3600 + tonumber(zm) * 60) * (sign == "+" and 1 or -1)
  return t - off
end
P.rfc3339 = rfc3339

--- A renewalInfo answer (decoded JSON) as { start, end, retry_after, explanation }, or nil.
function P.parse_renewal_info(doc, retry_after, _now)
  if type(doc) ~= "table" or type(doc.suggestedWindow) ~= "table" then return nil end
  local s, e = rfc3339(doc.suggestedWindow.start), rfc3339(doc.suggestedWindow["end"])
  if not s or not e or e < s then return nil end
  return { start = s, ["end"] = e, retry_after = retry_after, explanation = doc.explanationURL }
end

--- The ARI certificate identifier (RFC 9773 §4.1) from core.acme.cert_info's aki and serial.
function P.cert_id(info)
  if not info or not info.aki or not info.serial then return nil end
  return info.aki .. "." .. info.serial
end

return P
