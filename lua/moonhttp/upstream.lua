-- http.upstream{...}: a group of servers behind one name, for http.proxy and
-- group:fetch (docs/guide/proxy.md, "Upstream groups"). The group picks a server
-- (smooth weighted round robin, least in-flight, or a consistent hash of a
-- request attribute), skips servers marked down, retries the next one on
-- the conditions asked for, and marks servers down on failures (passive) and
-- on failed probes (active). The down marks live in a shared dict when the
-- group names one, so every worker sees them and one worker probes each
-- server; without one they are this worker's own. The bytes move through an
-- http.client of the group's own, whose pool is keyed by host and port, so
-- the servers of a group never share idle connections.
local core = require "moonhttp.core"

local M = {}

local Group = {}
Group.__index = Group

local KNOWN = { "servers", "balance", "max_fails", "fail_timeout", "health", "retries",
  "keepalive", "shared", "name", "client" }
local HEALTH_KNOWN = { "path", "interval", "timeout", "expect", "rise", "fall" }
local RETRIES_KNOWN = { "tries", "on", "idempotent_only", "timeout" }
local SERVER_KNOWN = { "addr", "weight" }

-- The conditions a retry may name. Statuses count as a server failure only when named here.
local CONDITIONS = { error = true, timeout = true, ["500"] = true, ["502"] = true,
  ["503"] = true, ["504"] = true, ["429"] = true }

-- fetch's error kinds that say the server failed (a retry may help); the others
-- ("body", "stopping", "url", "nomem", "redirects") are the caller's or ours.
local FAILURE = { refused = "error", reset = "error", closed = "error", malformed = "error",
  connect = "error", dns = "error", tls = "error", timeout = "timeout" }

-- RFC 9110 §9.2.2.
local IDEMPOTENT = { GET = true, HEAD = true, PUT = true, DELETE = true, OPTIONS = true, TRACE = true }

-- Points per unit of weight on the hash ring: enough that four servers take
-- shares within a few percent of their weights.
local POINTS = 160

local groups_made = 0

-- FNV-1a, 32 bits, then murmur3's finalizer: the same in every worker (a ring
-- must agree) and cheap. FNV alone spreads similar short strings ("user1",
-- "user2"; "host:port#1", "#2") badly: one server of three got a third of
-- its share at worst over 50 rings of three; with the finalizer, 3/4 of it.
local function hash(s)
  local h = 2166136261
  for i = 1, #s do
    h = ((h ~ s:byte(i)) * 16777619) & 0xffffffff
  end
  h = h ~ (h >> 16)
  h = (h * 0x85ebca6b) & 0xffffffff
  h = h ~ (h >> 13)
  h = (h * 0xc2b2ae35) & 0xffffffff
  return h ~ (h >> 16)
end

local function fail_opts(what, msg, level)
  error(what .. ": " .. msg, level + 1)
end

local function check_table(t, what, known, level)
  if type(t) ~= "table" then fail_opts(what, "must be a table", level + 1) end
  core.check_opts(t, what, known, level)
end

-- "host:port", "[v6]:port" or "http(s)://host:port" → base URL, or nil.
local function server_base(addr)
  if type(addr) ~= "string" then return nil end
  local scheme, rest = addr:match("^([hH][tT][tT][pP][sS]?)://([^/?#]+)$")
  if not scheme then scheme, rest = "http", addr end
  if not (rest:match("^[%w%.%-]+:%d+$") or rest:match("^%[[%x:%.]+%]:%d+$")) then return nil end
  return scheme:lower() .. "://" .. rest
end

-- A server counts a request in flight from its pick until the caller releases it: the
-- server itself is the caller's `<close>` value (no table per request for that).
local SERVER = { __close = function(s) s.inflight = s.inflight - 1 end }

local function parse_servers(list, level)
  if type(list) ~= "table" or #list == 0 then
    fail_opts("http.upstream", "servers must be a non-empty list", level + 1)
  end
  local servers = {}
  for i, s in ipairs(list) do
    local addr, weight = s, 1
    if type(s) == "table" then
      core.check_opts(s, "http.upstream: servers[" .. i .. "]", SERVER_KNOWN, level)
      addr, weight = s.addr, s.weight or 1
    end
    local base = server_base(addr)
    if not base then
      fail_opts("http.upstream", "servers[" .. i .. "] must be \"host:port\" (or a table with addr)", level + 1)
    end
    if math.type(weight) ~= "integer" or weight < 1 or weight > 1000 then
      fail_opts("http.upstream", "servers[" .. i .. "].weight must be an integer from 1 to 1000", level + 1)
    end
    servers[i] = setmetatable({ addr = addr, base = base, weight = weight, current = 0, inflight = 0 },
      SERVER)
  end
  return servers
end

-- "round_robin" | "least_conn" | "hash(key)" → kind, key. Keys: remote_addr (the
-- client's address without the port), path, header:<Name>, cookie:<name>, query:<name>.
local function parse_balance(b, level)
  if b == nil or b == "round_robin" then return "round_robin" end
  if b == "least_conn" then return "least_conn" end
  local key = type(b) == "string" and b:match("^hash%((.+)%)$")
  if key and (key == "remote_addr" or key == "path" or key:match("^header:[%w%-_]+$")
      or key:match("^cookie:[%w%-_%.]+$") or key:match("^query:[%w%-_%.]+$")) then
    return "hash", key
  end
  fail_opts("http.upstream", "balance must be \"round_robin\", \"least_conn\" or \"hash(key)\" with key "
    .. "remote_addr, path, header:<name>, cookie:<name> or query:<name>", level + 1)
end

local function parse_retries(r, nservers, level)
  local out = { tries = math.min(2, nservers), on = { error = true }, idempotent_only = true }
  if r == nil then return out end
  check_table(r, "http.upstream: retries", RETRIES_KNOWN, level + 1)
  if r.tries ~= nil then
    if math.type(r.tries) ~= "integer" or r.tries < 1 then
      fail_opts("http.upstream", "retries.tries must be an integer >= 1 (1: no retry)", level + 1)
    end
    out.tries = r.tries
  end
  if r.on ~= nil then
    if type(r.on) ~= "table" then fail_opts("http.upstream", "retries.on must be a list", level + 1) end
    out.on = {}
    for _, c in ipairs(r.on) do
      if not CONDITIONS[tostring(c)] then
        fail_opts("http.upstream", "retries.on: unknown condition " .. tostring(c)
          .. " (error, timeout, 429, 500, 502, 503, 504)", level + 1)
      end
      out.on[tostring(c)] = true
    end
  end
  if r.idempotent_only ~= nil then out.idempotent_only = r.idempotent_only and true or false end
  if r.timeout ~= nil then
    if type(r.timeout) ~= "number" or r.timeout <= 0 then
      fail_opts("http.upstream", "retries.timeout must be a number of seconds > 0", level + 1)
    end
    out.timeout = r.timeout
  end
  return out
end

local function positive(v, what, default, level)
  if v == nil then return default end
  if type(v) ~= "number" or v <= 0 then fail_opts("http.upstream", what .. " must be a number > 0", level + 1) end
  return v
end

local function parse_health(h, level)
  if h == nil then return nil end
  check_table(h, "http.upstream: health", HEALTH_KNOWN, level + 1)
  if type(h.path) ~= "string" or h.path:sub(1, 1) ~= "/" then
    fail_opts("http.upstream", "health.path must be a path starting with /", level + 1)
  end
  local expect = h.expect or 200
  if math.type(expect) ~= "integer" or expect < 100 or expect > 599 then
    fail_opts("http.upstream", "health.expect must be a status code", level + 1)
  end
  -- haproxy's defaults: one lost probe on a busy network does not take a server
  -- out (passive marks still catch a server that fails real requests at once),
  -- and a server coming back answers twice before it gets traffic again
  local rise, fall = h.rise or 2, h.fall or 3
  for what, v in pairs({ rise = rise, fall = fall }) do
    if math.type(v) ~= "integer" or v < 1 or v > 100 then
      fail_opts("http.upstream", "health." .. what .. " must be an integer from 1 to 100", level + 1)
    end
  end
  return { path = h.path, interval = positive(h.interval, "health.interval", 5, level + 1),
    timeout = positive(h.timeout, "health.timeout", 2, level + 1), expect = expect,
    rise = rise, fall = fall }
end

-- This worker's own state when the group names no shared dict: the subset of
-- a shared dict's calls the group uses, with the same TTL meaning.
local function local_state(now)
  local values, expiry = {}, {}
  local function live(k)
    local e = expiry[k]
    if e and e <= now() then values[k], expiry[k] = nil, nil end
    return values[k]
  end
  return {
    get = function(_, k) return live(k) end,
    set = function(_, k, v, ttl)
      values[k], expiry[k] = v, (ttl and ttl > 0) and now() + ttl or nil
      return true
    end,
    delete = function(_, k) values[k], expiry[k] = nil, nil return true end,
    incr = function(_, k, n, init, ttl)
      local v = live(k)
      if v == nil then
        v = init
        expiry[k] = (ttl and ttl > 0) and now() + ttl or nil
      end
      values[k] = v + n
      return values[k]
    end,
  }
end

-- level: the level of the user's code as error() counts it from here (options
-- errors point at the line that made the group).
function M.new(http, opts, level)
  check_table(opts, "http.upstream", KNOWN, level + 1)
  groups_made = groups_made + 1
  local servers = parse_servers(opts.servers, level + 1)
  local balance, key = parse_balance(opts.balance, level + 1)
  local g = setmetatable({
    http = http,
    -- every worker loads the same script, so the nth group has the same name in each
    name = opts.name or ("upstream" .. groups_made),
    servers = servers,
    balance = balance,
    hash_key = key,
    max_fails = opts.max_fails or 1,
    fail_timeout = positive(opts.fail_timeout, "fail_timeout", 10, level + 1),
    retries = parse_retries(opts.retries, #servers, level + 1),
    health = parse_health(opts.health, level + 1),
    next_rr = 0,
  }, Group)
  if math.type(g.max_fails) ~= "integer" or g.max_fails < 0 then
    fail_opts("http.upstream", "max_fails must be an integer >= 0 (0: never marked down)", level + 1)
  end
  if type(g.name) ~= "string" or not g.name:match("^[%w_%-%.]+$") then
    fail_opts("http.upstream", "name must be letters, digits, '_', '-' or '.'", level + 1)
  end
  if opts.shared ~= nil and type(opts.shared) ~= "string" then
    fail_opts("http.upstream", "shared must be the name of a shared dict", level + 1)
  end
  g.shared_name = opts.shared
  if opts.shared then
    -- checked once the script has run (lua_load.c), when every declaration is known
    local info = debug.getinfo(level, "Sl") -- error()'s level counts alike
    local wanted = core.shared_wanted or {}
    core.shared_wanted = wanted
    wanted[#wanted + 1] = { name = opts.shared,
      where = (info and info.currentline > 0 and (info.short_src .. ":" .. info.currentline .. ": ") or "")
        .. "http.upstream: " }
  end
  if opts.client ~= nil and opts.keepalive ~= nil then
    fail_opts("http.upstream", "keepalive is the client's max_idle_per_host: set one or the other", level + 1)
  end
  local keepalive = opts.keepalive or 32
  if math.type(keepalive) ~= "integer" or keepalive < 0 then
    fail_opts("http.upstream", "keepalive must be an integer >= 0", level + 1)
  end
  g.client = opts.client or http.client{ max_idle_per_host = keepalive }
  for _, s in ipairs(servers) do
    s.down_key = "up:" .. g.name .. ":" .. s.addr .. ":down"
    s.fails_key = "up:" .. g.name .. ":" .. s.addr .. ":fails"
    s.sick_key = "up:" .. g.name .. ":" .. s.addr .. ":sick"
    s.bad_key = "up:" .. g.name .. ":" .. s.addr .. ":bad" -- failed probes in a row
    s.good_key = "up:" .. g.name .. ":" .. s.addr .. ":good" -- good probes in a row while sick
  end
  if balance == "hash" then g.ring = M.ring(servers) end
  if g.health then http.on_start(function() g:_start_probes() end) end
  return g
end

function M.is_group(v)
  return getmetatable(v) == Group
end

-- The consistent-hash ring: POINTS * weight points per server, sorted by hash.
function M.ring(servers)
  local ring = {}
  for _, s in ipairs(servers) do
    for i = 1, POINTS * s.weight do
      ring[#ring + 1] = { h = hash(s.addr .. "#" .. i), s = s }
    end
  end
  table.sort(ring, function(a, b) return a.h < b.h end)
  return ring
end

-- The state the marks live in: the shared dict (looked up at first use: a dict
-- cannot be touched while the script loads), else this worker's own.
function Group:_marks()
  local st = self._state
  if not st then
    if self.shared_name then
      st = self.http.shared[self.shared_name]
    else
      st = local_state(self.http.now)
    end
    self._state = st
  end
  return st
end

function Group:_is_down(s)
  local st = self:_marks()
  return st:get(s.down_key) ~= nil or st:get(s.sick_key) ~= nil
end

-- A failed attempt: max_fails of them within fail_timeout mark s down for fail_timeout.
function Group:_failed(s)
  if self.max_fails == 0 then return end
  local st = self:_marks()
  local n = st:incr(s.fails_key, 1, 0, self.fail_timeout)
  if n and n >= self.max_fails then
    st:set(s.down_key, true, self.fail_timeout)
    st:delete(s.fails_key)
  end
end

local function usable(self, s, tried)
  return not tried[s] and not self:_is_down(s)
end

-- Smooth weighted round robin (nginx's): every usable server gains its
-- weight, the highest is chosen and loses the total, so weights 2:1 give
-- a, b, a rather than a, a, b.
local function pick_rr(self, tried)
  local best, total = nil, 0
  for _, s in ipairs(self.servers) do
    if usable(self, s, tried) then
      s.current = s.current + s.weight
      total = total + s.weight
      if not best or s.current > best.current then best = s end
    end
  end
  if best then best.current = best.current - total end
  return best
end

-- Fewest in flight for its weight (this worker's requests); ties go round the list.
local function pick_least(self, tried)
  local n = #self.servers
  self.next_rr = self.next_rr % n + 1
  local best, best_load
  for i = 0, n - 1 do
    local s = self.servers[(self.next_rr + i - 1) % n + 1]
    if usable(self, s, tried) then
      local load = s.inflight / s.weight
      if not best or load < best_load then best, best_load = s, load end
    end
  end
  return best
end

local function hash_key(self, req, key)
  if key then return key end
  if not req then return "" end
  local k = self.hash_key
  if k == "remote_addr" then
    local a = req.remote_addr or ""
    return a:match("^%[(.*)%]:%d+$") or a:match("^(.*):%d+$") or a
  elseif k == "path" then
    return req.path
  end
  local kind, name = k:match("^(%a+):(.+)$")
  if kind == "header" then return req:header(name) or "" end
  if kind == "cookie" then return req:cookie(name) or "" end
  local v = req:args()[name]
  return type(v) == "string" and v or ""
end

-- The first usable server at or after the key's point on the ring, so a key
-- keeps its server while that server is up, and only its keys move when not.
local function pick_hash(self, tried, req, key)
  local ring, h = self.ring, hash(hash_key(self, req, key))
  local lo, hi = 1, #ring
  while lo < hi do
    local mid = (lo + hi) // 2
    if ring[mid].h < h then lo = mid + 1 else hi = mid end
  end
  if ring[lo].h < h then lo = 1 end
  local seen, nseen = {}, 0
  for i = 0, #ring - 1 do
    local s = ring[(lo + i - 1) % #ring + 1].s
    if not seen[s] then
      if usable(self, s, tried) then return s end
      seen[s], nseen = true, nseen + 1
      if nseen == #self.servers then return nil end
    end
  end
end

function Group:_pick(tried, req, key)
  if self.balance == "least_conn" then return pick_least(self, tried) end
  if self.balance == "hash" then return pick_hash(self, tried, req, key) end
  return pick_rr(self, tried)
end

-- What a failed attempt was, as retries.on names it: "error", "timeout", a
-- status ("502"), or nil when it was not the server's failure.
local function condition(self, resp, kind)
  if resp then
    local st = tostring(resp.status)
    return self.retries.on[st] and st or nil
  end
  return FAILURE[kind]
end

--[[
One exchange with the group: tries servers until one answers, at most
retries.tries of them. An attempt is retried when its condition is in
retries.on, the request may be sent again (`replayable`: no body, or a body
kept whole), with idempotent_only its method is idempotent, and less than
retries.timeout seconds have passed since the first try began (nginx's
proxy_next_upstream_timeout: a try under way is not cut short). An answer
with a listed status is a failure, kept open until another server is found:
when none is (all tried or down) or no retry follows, it is the answer.
Each attempt is send(server, ...) when send is given (http.proxy's C path),
else the group client's fetch of path with fopts. Returns resp, server (the
caller releases it when the body is done: group:_release(server), or the
server as a `<close>` value), or nil, kind, detail; kind "unavailable" when
no server is up.
]]
function Group:_exchange(method, path, fopts, replayable, req, key, send, ...)
  local r = self.retries
  local may_retry = replayable
    and (not r.idempotent_only or IDEMPOTENT[method] or IDEMPOTENT[method:upper()])
  local tried = {}
  local kept, kept_s, kind, detail
  local deadline = r.timeout and self.http.now() + r.timeout
  for attempt = 1, r.tries do
    local s = self:_pick(tried, req, key)
    if not s then break end
    if kept then
      kept:close()
      self:_release(kept_s)
      kept = nil
    end
    tried[s] = true
    s.inflight = s.inflight + 1
    local resp
    if send then
      resp, kind, detail = send(s, ...)
    else
      resp, kind, detail = self.client:fetch(s.base .. path, fopts)
    end
    local cond = condition(self, resp, kind)
    if cond then self:_failed(s) end
    if not cond or attempt == r.tries or not may_retry or not r.on[cond]
        or (deadline and self.http.now() >= deadline) then
      if resp then return resp, s end
      s.inflight = s.inflight - 1
      return nil, kind, detail
    end
    if resp then
      kept, kept_s = resp, s
    else
      s.inflight = s.inflight - 1
    end
  end
  if kept then return kept, kept_s end
  if kind then return nil, kind, detail end
  return nil, "unavailable", "no healthy upstream"
end

function Group:_release(s)
  if s then s.inflight = s.inflight - 1 end
end

local FETCH_OWN = { key = true }

-- group:fetch(path [, opts]): http.fetch against the group. opts are fetch's,
-- plus `key` (the hash key when the group balances by hash). A string body
-- may be sent again on a retry; a streamed one (a function, a req) may not.
function Group:fetch(path, opts)
  if type(path) ~= "string" or path:sub(1, 1) ~= "/" then
    error("group:fetch: path must start with /", 2)
  end
  if opts ~= nil and type(opts) ~= "table" then error("group:fetch: options must be a table", 2) end
  local fopts, key = {}, nil
  for k, v in pairs(opts or {}) do
    if FETCH_OWN[k] then key = v else fopts[k] = v end
  end
  if key ~= nil and type(key) ~= "string" then error("group:fetch: key must be a string", 2) end
  local replayable = fopts.body == nil or type(fopts.body) == "string"
  local resp, s_or_kind, detail = self:_exchange(fopts.method or "GET", path, fopts, replayable, nil, key)
  if not resp then return nil, s_or_kind, detail end
  -- least_conn counts a fetch in flight until its head has come
  self:_release(s_or_kind)
  return resp
end

-- group:url([req]): the base URL ("http://host:port") of the server the
-- group would send req to now, for what the group does not carry itself (a
-- WebSocket opened with http.websocket); nil, "unavailable" when none is up.
-- No retry and no in-flight count: the caller owns that exchange.
function Group:url(req)
  local s = self:_pick({}, req)
  if not s then return nil, "unavailable" end
  return s.base
end

-- One probe of s: good when it answers health.expect within health.timeout.
-- health.fall bad probes in a row mark s down, health.rise good ones in a row
-- mark it up again. The counts live beside the marks, so a prober that
-- moves to another worker carries on from them.
function Group:_probe(s)
  if s.probing then return end -- the last probe is still waiting
  s.probing = true
  local h = self.health
  local resp = self.client:fetch(s.base .. h.path, { timeout = h.timeout,
    headers = { ["User-Agent"] = "moonhttp-health" } })
  local ok = resp and resp.status == h.expect
  if resp then resp:close() end
  s.probing = false
  local st = self:_marks()
  -- a mark or a count outlives a few missed probes only: a prober that stops
  -- (a reload, a stop) leaves no server down for good
  local ttl = (math.max(h.rise, h.fall) + 2) * h.interval + h.timeout
  local sick = st:get(s.sick_key) ~= nil
  if ok then
    st:delete(s.bad_key)
    if sick then
      local n = st:incr(s.good_key, 1, 0, ttl)
      if not n or n >= h.rise then -- a full dict: no count, decide on this probe
        st:delete(s.sick_key)
        st:delete(s.good_key)
      else
        st:set(s.sick_key, true, ttl)
      end
    end
  else
    st:delete(s.good_key)
    local n = not sick and st:incr(s.bad_key, 1, 0, ttl)
    if sick or not n or n >= h.fall then
      st:set(s.sick_key, true, ttl)
      st:delete(s.bad_key)
    end
  end
end

-- One timer per server. With a shared dict, { once = true } makes one worker
-- at a time the server's prober; the others read its marks from the dict.
function Group:_start_probes()
  local http = self.http
  local once = self.shared_name ~= nil
  for _, s in ipairs(self.servers) do
    http.every(self.health.interval, function() self:_probe(s) end, { once = once })
  end
end

return M
