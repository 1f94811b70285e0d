-- require "moonhttp.cache": a shared response cache for the common case
-- (docs/guide/proxy.md, "Response cache"), as nginx's proxy_cache is used: in front
-- of http.proxy or any handler, entries in a shared dict (every worker sees
-- them), freshness from the response's Cache-Control, variants by Vary, and
-- optionally a stale entry served when the handler fails.
--
-- The wrapped handler writes to a stand-in `res` that keeps the response
-- (status, headers, body) until it is known to be storable; past max_entry
-- bytes it stops keeping and streams on to the real response (an SSE stream
-- or a download passes through, uncached). A client's If-None-Match or
-- If-Modified-Since is answered by the cache itself (a 304 from the entry);
-- toward the handler they are hidden on a miss, so that what comes back is
-- the whole response, which can be stored. An expired entry with a validator
-- (ETag, Last-Modified) is revalidated: the handler sees If-None-Match /
-- If-Modified-Since, and a 304 from it refreshes the entry (RFC 9111 §4.3.4).
-- While one request runs the handler for a key, the others for it wait (as nginx's
-- proxy_cache_lock): a lock entry in the dict, released with a message on a channel.
-- With stale_while_revalidate, an entry just expired is answered at once and fetched
-- again in a timer task of its own (the lock keeps it to one refresh at a time).
local core = require "moonhttp.core"

local M = {}

local KNOWN = { "dict", "key_headers", "default_ttl", "stale_if_error", "max_entry",
  "statuses", "status_header", "revalidate", "lock_timeout",
  "stale_while_revalidate" }

-- Heuristically cacheable statuses (RFC 9110 §15.1), here only with explicit freshness.
local STATUSES = { 200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501 }
local ERRORS = { [500] = true, [502] = true, [503] = true, [504] = true }

-- Not stored with an entry: hop-by-hop ones and what the server sets per response.
local NOT_STORED = { connection = true, ["keep-alive"] = true, ["transfer-encoding"] = true,
  te = true, trailer = true, upgrade = true, ["proxy-connection"] = true, date = true,
  server = true, age = true, ["content-length"] = true }

-- Cache-Control directives as { name = value or true }, names lowercased.
local function directives(value)
  local d = {}
  for part in (value or ""):gmatch("[^,]+") do
    local name, arg = part:match("^%s*([%w%-]+)%s*=%s*\"?([^\"]*)\"?%s*$")
    if name then
      d[name:lower()] = arg
    else
      name = part:match("^%s*([%w%-]+)%s*$")
      if name then d[name:lower()] = true end
    end
  end
  return d
end

-- How long a response may be served from a shared cache (RFC 9111 §4.2.1, §3), or nil.
local function freshness(self, req, status, headers)
  if not self.statuses[status] then return nil end
  local cc = directives(headers["cache-control"])
  if cc["no-store"] or cc["private"] or cc["no-cache"] then return nil end
  if headers["set-cookie"] then return nil end -- one user's cookie, never another's
  local vary = headers["vary"]
  if vary and vary:find("*", 1, true) then return nil end
  local ttl = tonumber(cc["s-maxage"]) or tonumber(cc["max-age"])
  -- §3.5: a request with Authorization is stored only when the response allows it
  if req:header("authorization") and not (cc["s-maxage"] or cc["public"]
      or cc["must-revalidate"]) then
    return nil
  end
  if not ttl then ttl = self.default_ttl end
  if ttl <= 0 then return nil end
  return ttl
end

-- An HTTP-date (IMF-fixdate, RFC 9110 §5.6.7) as seconds since the epoch, or nil.
local MONTHS = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8,
  Sep = 9, Oct = 10, Nov = 11, Dec = 12 }
local function http_time(s)
  if not s then return nil end
  local d, mon, y, h, mi, sec = s:match("^%a%a%a, (%d%d) (%a%a%a) (%d%d%d%d) (%d%d):(%d%d):(%d%d) GMT$")
  local m = MONTHS[mon]
  if not m then return nil end
  y = tonumber(y) - (m <= 2 and 1 or 0)
  -- days since 1970-01-01 of a proleptic Gregorian date (the civil-days algorithm)
  local era = y // 400
  local yoe = y - era * 400
  local doy = (153 * ((m + 9) % 12) + 2) // 5 + tonumber(d) - 1
  local days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(sec)
end

-- Whether an If-None-Match list names etag, by weak comparison (RFC 9110 §13.1.2).
local function none_match_hits(list, etag)
  if list:match("^%s*%*%s*$") then return true end
  if not etag then return false end
  local opaque = etag:gsub("^W/", "")
  for tag in list:gmatch("[^,]+") do
    if tag:match("^%s*(.-)%s*$"):gsub("^W/", "") == opaque then return true end
  end
  return false
end

-- Whether a client's conditional GET is answered 304 by a response with these
-- validators (RFC 9110 §13.2.2): If-None-Match decides when present, else
-- If-Modified-Since against Last-Modified (a date that does not parse is ignored).
local function not_modified(req, etag, last_modified)
  local inm = req:header("if-none-match")
  if inm then return none_match_hits(inm, etag) end
  local since, lm = http_time(req:header("if-modified-since")), http_time(last_modified)
  return since ~= nil and lm ~= nil and lm <= since
end

-- The fields a 304 carries (RFC 9110 §15.4.5): those a cache would update, and no body's.
local IN_304 = { ["cache-control"] = true, ["content-location"] = true, etag = true,
  expires = true, vary = true, ["last-modified"] = true }

-- ---- entries: string.pack'ed, so a dict value holds any body bytes ----------------

local function encode(status, stored, ttl, list, body)
  local parts = { string.pack(">I2 d d I4", status, stored, ttl, #list // 2) }
  for i = 1, #list, 2 do
    parts[#parts + 1] = string.pack(">s4 s4", list[i], list[i + 1])
  end
  parts[#parts + 1] = string.pack(">s4", body)
  return table.concat(parts)
end

local function decode(s)
  local ok, status, stored, ttl, n, pos = pcall(string.unpack, ">I2 d d I4", s)
  if not ok then return nil end
  local list = {}
  for _ = 1, n do
    local name, value
    name, value, pos = string.unpack(">s4 s4", s, pos)
    list[#list + 1] = name
    list[#list + 1] = value
  end
  local body = string.unpack(">s4", s, pos)
  return { status = status, stored = stored, ttl = ttl, list = list, body = body }
end

-- ---- the stand-in res ------------------------------------------------------------

local Capture = {}
Capture.__index = Capture

local function new_capture(res, max)
  return setmetatable({ _res = res, _max = max, status_code = 200, list = {}, lower = {},
    parts = {}, size = 0, passing = false, storable = true, lock = false }, Capture)
end

-- From here on the response goes to the real res: what was kept first.
local function pass(self)
  if self.passing then return end
  self.passing, self.storable = true, false
  if self.lock then self.lock:release() end -- nothing will be stored: the waiters go on
  local res = self._res
  res:status(self.status_code)
  for i = 1, #self.list, 2 do res:add_header(self.list[i], self.list[i + 1]) end
  for _, p in ipairs(self.parts) do res:write(p) end
  self.parts = {}
end

function Capture:status(code)
  if self.passing then self._res:status(code) else self.status_code = code end
  return self
end

local function set_header(self, name, value, replace)
  if self.passing then
    if replace then self._res:header(name, value) else self._res:add_header(name, value) end
    return self
  end
  value = tostring(value)
  local l = name:lower()
  if replace and self.lower[l] then
    local kept = {}
    for i = 1, #self.list, 2 do
      if self.list[i]:lower() ~= l then
        kept[#kept + 1] = self.list[i]
        kept[#kept + 1] = self.list[i + 1]
      end
    end
    self.list = kept
  end
  self.list[#self.list + 1] = name
  self.list[#self.list + 1] = value
  self.lower[l] = self.lower[l] and not replace and (self.lower[l] .. ", " .. value) or value
  return self
end

function Capture:header(name, value) return set_header(self, name, value, true) end
function Capture:add_header(name, value) return set_header(self, name, value, false) end

function Capture:write(...)
  if self.passing then return self._res:write(...) end
  for i = 1, select("#", ...) do
    local s = tostring((select(i, ...)))
    self.parts[#self.parts + 1] = s
    self.size = self.size + #s
  end
  if self.size > self._max then pass(self) end
  return true
end

function Capture:flush()
  if self.passing then return self._res:flush() end
  return true
end

function Capture:json(value, status)
  if status then self:status(status) end
  if not self.lower["content-type"] then self:header("Content-Type", "application/json") end
  return self:write(core.json_encode(value))
end

function Capture:redirect(url, code)
  self:status(code or 302)
  self:header("Location", url)
  return self
end

-- Trailers, cookies and anything else: the response is not a plain one to store.
setmetatable(Capture, { __index = function(_, k)
  return function(self, ...)
    pass(self)
    local f = self._res[k]
    return f(self._res, ...)
  end
end })

-- ---- collapsing misses ------------------------------------------------------------

-- Every waiter in every worker hears every release (the message is the key) and
-- looks again; waiting is rare and short, so one channel serves all keys. The lock's
-- value counts its waiters: a release without any publishes nothing.
local CHANNEL = "moonhttp.cache"
-- Kept to this server with a cluster too: the locks and the entries are in its shared dict.
local LOCAL = { cluster = false }
local channel -- made at the first wait: a channel cannot be made while the script loads

-- A lock's own expiry frees it when its holder's worker died; a waiter polls the dict
-- this often for that case (and for a release message dropped from its queue).
local POLL = 0.25

local function lock_key(base) return "lock\0" .. base end
-- Set when a locked fetch's answer could not be stored: for PASS_TTL seconds the
-- key's requests go to the handler without the lock, as Varnish's hit-for-miss,
-- so an uncacheable URL under load is not answered one upstream round trip late.
local function pass_key(base) return "pass\0" .. base end
local PASS_TTL = 60

local Lock = {}
Lock.__index = Lock

function Lock:release()
  if self.done then return end
  self.done = true
  -- past its expiry the lock may be another request's now: left to it
  if core.now() >= self.expires then return end
  local waiting = self.dict:get(self.key)
  self.dict:delete(self.key)
  -- a waiter counted after the get sees the lock gone at its next look (POLL at most)
  if waiting and waiting > 0 then
    channel = channel or core.channel(CHANNEL, LOCAL)
    channel:publish(self.base) -- a key over 64 KiB is not sent: its waiters see the dict
  end
end
Lock.__close = Lock.release

-- The key's lock, or nil and true when another request holds it (a full dict: no lock).
local function acquire(self, base)
  local key = lock_key(base)
  local ok, err = self.dict:add(key, 0, self.lock_timeout)
  if ok then
    return setmetatable({ dict = self.dict, key = key, base = base,
      expires = core.now() + self.lock_timeout }, Lock)
  end
  return nil, err == "exists"
end

-- Waits until the lock on base is gone (released, or expired with its holder) or
-- lock_timeout has passed.
local function wait_unlock(self, base)
  channel = channel or core.channel(CHANNEL, LOCAL)
  local sub <close> = channel:subscribe() -- before the look, or a release could slip between
  local key = lock_key(base)
  if not self.dict:incr(key, 1) then return end -- released already
  local deadline = core.now() + self.lock_timeout
  while self.dict:get(key) do
    local left = deadline - core.now()
    if left <= 0 then return end
    local msg, err = sub:receive(math.min(left, POLL))
    if msg == base or err == "stopping" or err == "closed" then return end
  end
end

-- ---- the stand-in req ------------------------------------------------------------

local SPELLING = { ["if-none-match"] = "If-None-Match", ["if-modified-since"] = "If-Modified-Since" }

-- The request as the handler sees it, with header fields replaced: `over` maps a
-- lowercased name to a value, or to false to hide it. Every other field and method
-- is the real request's (a method is called on it), so http.proxy forwards what this
-- one shows. A request with a body is never replaced (http.fetch streams from the real one).
local function request_with(req, over)
  local own, wrapped = {}, {}
  function own.header(_, name)
    local v = over[name:lower()]
    if v ~= nil then return v or nil end
    return req:header(name)
  end
  function own.header_list()
    local list, out = req:header_list(), {}
    for i = 1, #list, 2 do
      if over[list[i]:lower()] == nil then
        out[#out + 1] = list[i]
        out[#out + 1] = list[i + 1]
      end
    end
    for l, v in pairs(over) do
      if v then
        out[#out + 1] = SPELLING[l] or l
        out[#out + 1] = v
      end
    end
    return out
  end
  function own.headers()
    local t = req:headers()
    for l, v in pairs(over) do t[l] = v and { v } or nil end
    return t
  end
  return setmetatable({}, {
    __index = function(_, k)
      local f = own[k] or wrapped[k]
      if f then return f end
      local v = req[k]
      if type(v) ~= "function" then return v end
      f = function(_, ...) return v(req, ...) end
      wrapped[k] = f
      return f
    end,
    __tostring = function() return tostring(req) end,
  })
end

local function has_body(req)
  local cl = req:header("content-length")
  return (cl and cl ~= "0") or req:header("transfer-encoding") ~= nil
end

-- ---- serving ---------------------------------------------------------------------

local function key_of(self, req)
  local q = req.query
  local parts = { "GET", req.host or "", req.raw_path .. ((q and q ~= "") and ("?" .. q) or "") }
  for _, name in ipairs(self.key_headers) do parts[#parts + 1] = req:header(name) or "" end
  return table.concat(parts, "\0")
end

-- The variant key for a stored Vary list (names lowercased, comma-separated).
local function variant(base, vary, req)
  local parts = { base, "vary" }
  for name in vary:gmatch("[^,]+") do parts[#parts + 1] = req:header(name) or "" end
  return table.concat(parts, "\0")
end

local function lookup(self, req, base)
  local rec = self.dict:get(base)
  if rec and rec:sub(1, 5) == "vary:" then
    rec = self.dict:get(variant(base, rec:sub(6), req))
  end
  return rec and decode(rec)
end

-- The first value of a field in a name/value list, by its lowercased name.
local function field(list, l)
  for i = 1, #list, 2 do
    if list[i]:lower() == l then return list[i + 1] end
  end
  return nil
end

local function conditional(req)
  return req:header("if-none-match") ~= nil or req:header("if-modified-since") ~= nil
end

-- A 304 for a client whose validators match a 200 with these fields (entry or capture).
local function send_304(self, res, list, how, age)
  res:status(304)
  for i = 1, #list, 2 do
    if IN_304[list[i]:lower()] then res:add_header(list[i], list[i + 1]) end
  end
  if age then res:header("Age", tostring(age)) end
  if self.status_header then res:header(self.status_header, how) end
end

local function send(self, req, res, e, how, now)
  local age = math.max(0, math.floor(now - e.stored))
  if e.status == 200 and conditional(req)
      and not_modified(req, field(e.list, "etag"), field(e.list, "last-modified")) then
    return send_304(self, res, e.list, how, age)
  end
  res:status(e.status)
  for i = 1, #e.list, 2 do res:add_header(e.list[i], e.list[i + 1]) end
  res:header("Age", tostring(age))
  if self.status_header then res:header(self.status_header, how) end
  if e.status ~= 204 and e.status ~= 304 then
    res:header("Content-Length", tostring(#e.body))
    if req.method ~= "HEAD" then res:write(e.body) end
  end
end

-- The fields of a response head worth keeping with an entry.
local function stored_fields(list)
  local out = {}
  for i = 1, #list, 2 do
    if not NOT_STORED[list[i]:lower()] then
      out[#out + 1] = list[i]
      out[#out + 1] = list[i + 1]
    end
  end
  return out
end

-- Stores an entry under its key (and its variant's, when it Varies); `lower` is its
-- fields by lowercased name. Past its lifetime it is kept for stale_if_error, or
-- longer for a revalidation when it has a validator.
local function store(self, req, base, status, list, lower, body, ttl, now)
  local vary = lower["vary"]
  local names
  if vary then
    local l = {}
    for name in vary:gmatch("[^,%s]+") do l[#l + 1] = name:lower() end
    names = table.concat(l, ",")
  end
  local extra = math.max(self.stale_if_error, self.stale_while_revalidate)
  if lower["etag"] or lower["last-modified"] then extra = math.max(extra, self.revalidate) end
  local keep = ttl + extra
  local value = encode(status, now, ttl, list, body)
  if names and names ~= "" then
    self.dict:set(base, "vary:" .. names, keep)
    self.dict:set(variant(base, names, req), value, keep)
  else
    self.dict:set(base, value, keep)
  end
end

-- A 304 to the cache's own conditional request (RFC 9111 §4.3.4): the entry takes the
-- fields the 304 carries (each name replaced whole), its freshness is computed again
-- from them, and the stored body is the answer.
local function refreshed(self, req, base, e, list304, now)
  local new = stored_fields(list304)
  local names = {}
  for i = 1, #new, 2 do names[new[i]:lower()] = true end
  local list = {}
  for i = 1, #e.list, 2 do
    if not names[e.list[i]:lower()] then
      list[#list + 1] = e.list[i]
      list[#list + 1] = e.list[i + 1]
    end
  end
  table.move(new, 1, #new, #list + 1, list)
  local lower = {}
  for i = 1, #list, 2 do
    local l = list[i]:lower()
    lower[l] = lower[l] and (lower[l] .. ", " .. list[i + 1]) or list[i + 1]
  end
  local fresh = { status = e.status, stored = now, ttl = 0, list = list, body = e.body }
  local ttl = freshness(self, req, e.status, lower)
  if ttl then
    fresh.ttl = ttl
    store(self, req, base, e.status, list, lower, e.body, ttl, now)
  end
  return fresh
end

-- The request toward the handler: the client's validators hidden, the entry's set
-- (a request with a body is the handler's as it is). Returns it, and whether it
-- asks the handler to revalidate e.
local function handler_request(self, req, e)
  local etag = e and self.revalidate > 0 and field(e.list, "etag")
  local lm = e and self.revalidate > 0 and field(e.list, "last-modified")
  if not (conditional(req) or etag or lm) or has_body(req) then return req, false end
  local over = { ["if-none-match"] = etag or false, ["if-modified-since"] = lm or false }
  return request_with(req, over), (etag or lm) and true
end

-- ---- refreshing in the background (stale_while_revalidate) ---------------------

-- Where a background fetch's response goes: nowhere (the capture keeps what is stored).
local SINK = setmetatable({}, { __index = function() return function() return true end end })

-- The request's head, copied: a timer task runs after the request has ended, when
-- the real req raises "request finished". Enough for http.proxy; a handler that
-- reads more (args, body) fails in the background, and the entry stays stale.
local function detached(req)
  local list, tls = req:header_list(), req:tls()
  local snap = { method = req.method, host = req.host, path = req.path,
    raw_path = req.raw_path, query = req.query, remote_addr = req.remote_addr,
    proto = req.proto, ctx = {} }
  function snap.header(_, name) return field(list, name:lower()) end
  function snap.header_list() return table.move(list, 1, #list, 1, {}) end
  function snap.headers()
    local t = {}
    for i = 1, #list, 2 do
      local l = list[i]:lower()
      t[l] = t[l] or {}
      table.insert(t[l], list[i + 1])
    end
    return t
  end
  function snap.tls() return tls end
  return snap
end

-- Runs the handler for base in a timer task unless a fetch of it is running: a 304
-- refreshes e, a storable answer replaces it, anything else leaves it as it is.
local function refresh_later(self, req, base, e, handler, ...)
  local lock = acquire(self, base)
  if not lock then return end
  local snap, args = detached(req), table.pack(...)
  local ok = core.timer(0, function()
    local _ <close> = lock
    local hreq, revalidating = handler_request(self, snap, e)
    local cap = new_capture(SINK, self.max_entry)
    cap.lock = lock
    local done, err = pcall(handler, hreq, cap, table.unpack(args, 1, args.n))
    if not done then
      core.log("warn", "moonhttp.cache: background refresh of " .. snap.raw_path .. ": " .. tostring(err))
      return
    end
    local now = core.now()
    if revalidating and cap.status_code == 304 and not cap.passing then
      refreshed(self, snap, base, e, cap.list, now)
      return
    end
    local ttl = cap.storable and freshness(self, snap, cap.status_code, cap.lower)
    if ttl then
      store(self, snap, base, cap.status_code, stored_fields(cap.list), cap.lower,
        table.concat(cap.parts), ttl, now)
    end
  end)
  if not ok then lock:release() end
end

-- §4.2.4: an entry that says must-revalidate / proxy-revalidate is not answered stale
-- without the origin's word.
local function strict(e)
  local cc = directives(field(e.list, "cache-control"))
  return cc["must-revalidate"] or cc["proxy-revalidate"]
end

-- Runs handler(req, res, ...) in front of the cache: see docs/guide/proxy.md.
function M.serve(self, req, res, handler, ...)
  local m = req.method
  if (m ~= "GET" and m ~= "HEAD") or req:header("upgrade") or core.extended_connect(req) then
    return handler(req, res, ...) -- an upgrade (WebSocket) is a tunnel, not a response to keep
  end
  local now = core.now()
  local base = key_of(self, req)
  local e = lookup(self, req, base)
  if e and now < e.stored + e.ttl then
    send(self, req, res, e, "HIT", now)
    return true
  end
  if e and m == "GET" and now < e.stored + e.ttl + self.stale_while_revalidate and not strict(e) then
    refresh_later(self, req, base, e, handler, ...)
    send(self, req, res, e, "UPDATING", now)
    return true
  end
  -- one request runs the handler; the others for the key wait for its entry, a while
  local lock
  if m == "GET" and self.lock_timeout > 0 and not self.dict:get(pass_key(base)) then
    local held
    lock, held = acquire(self, base)
    if held then
      wait_unlock(self, base)
      now = core.now()
      e = lookup(self, req, base)
      if e and now < e.stored + e.ttl then
        send(self, req, res, e, "HIT", now)
        return true
      end
    end
  end
  local _ <close> = lock
  local stale = e and self.stale_if_error > 0 and not strict(e)
    and now < e.stored + e.ttl + self.stale_if_error and e
  -- the client's validators are the cache's to answer: the handler is asked for the
  -- whole response, or to confirm the expired entry with the entry's own validators
  local client_cond = conditional(req)
  local hreq, revalidating = handler_request(self, req, e)
  local cap = new_capture(res, self.max_entry)
  cap.lock = lock or false
  if stale then cap._max = math.huge end -- the answer must be seen whole before it is chosen
  local results = table.pack(pcall(handler, hreq, cap, ...))
  if stale and (not results[1] or ERRORS[cap.status_code]) then
    send(self, req, res, stale, "STALE", now)
    return true
  end
  if not results[1] then error(results[2], 0) end
  if revalidating and cap.status_code == 304 and not cap.passing then
    send(self, req, res, refreshed(self, req, base, e, cap.list, now), "REVALIDATED", now)
    return true
  end
  if cap.passing then
    if lock then self.dict:set(pass_key(base), true, PASS_TTL) end
    return table.unpack(results, 2, results.n)
  end
  local ttl = cap.storable and m == "GET" and freshness(self, req, cap.status_code, cap.lower)
  if ttl then
    store(self, req, base, cap.status_code, stored_fields(cap.list), cap.lower,
      table.concat(cap.parts), ttl, now)
    self.dict:delete(pass_key(base))
  elseif lock then
    self.dict:set(pass_key(base), true, PASS_TTL)
  end
  if lock then lock:release() end
  if client_cond and hreq ~= req and cap.status_code == 200
      and not_modified(req, cap.lower["etag"], cap.lower["last-modified"]) then
    send_304(self, res, cap.list, "MISS")
    return table.unpack(results, 2, results.n)
  end
  if self.status_header then cap:header(self.status_header, "MISS") end
  pass(cap)
  return table.unpack(results, 2, results.n)
end

-- A handler with the cache in front: cache:wrap(function(req, res) ... end).
function M.wrap(self, handler)
  return function(req, res, ...) return M.serve(self, req, res, handler, ...) end
end

--- cache.new{ dict = http.shared.name, ... } -> a cache (docs/guide/proxy.md)
local WHAT = "moonhttp.cache"

function M.new(opts)
  if type(opts) ~= "table" then error("moonhttp.cache: new takes an options table", 2) end
  core.check_opts(opts, WHAT, KNOWN, 2)
  local dict = opts.dict
  if type(dict) ~= "table" and type(dict) ~= "userdata" then
    error("moonhttp.cache: dict must be a shared dict (http.shared.name)", 2)
  end
  local statuses = {}
  for _, s in ipairs(opts.statuses or STATUSES) do statuses[s] = true end
  local key_headers = opts.key_headers or {}
  for _, h in ipairs(key_headers) do
    if type(h) ~= "string" then error("moonhttp.cache: key_headers must be header names", 2) end
  end
  local status_header = opts.status_header
  if status_header == nil then status_header = "X-Cache" end
  return setmetatable({
    dict = dict,
    key_headers = key_headers,
    default_ttl = core.opt_seconds(opts, "default_ttl", 0, WHAT),
    stale_if_error = core.opt_seconds(opts, "stale_if_error", 0, WHAT),
    revalidate = core.opt_seconds(opts, "revalidate", 600, WHAT),
    lock_timeout = core.opt_seconds(opts, "lock_timeout", 5, WHAT),
    stale_while_revalidate = core.opt_seconds(opts, "stale_while_revalidate", 0, WHAT),
    max_entry = core.opt_size(opts, "max_entry", 1048576, WHAT),
    statuses = statuses,
    status_header = status_header or nil,
  }, { __index = { serve = M.serve, wrap = M.wrap } })
end

return core.strict_module(M, "cache")
