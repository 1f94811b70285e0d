-- Automatic HTTPS (docs/guide/automatic-https.md): a listener's
-- `tls = { acme = {...} }` gets its certificate from an ACME CA, and a new
-- one before it runs out. The work is split by what must happen once and
-- what must happen in every worker:
--   * one worker at a time (the lease of an http.every { once = true } job,
--     taken over by another when its worker dies) talks to the CA: account,
--     orders, renewals, with backoff after failures; it writes the storage
--     and tells the others on the channel below;
--   * every worker installs the stored certificate at start (no CA contact
--     when it is still good) and again on each message, through
--     core.acme.install, so new handshakes get it and open ones keep theirs;
--   * the challenges are answered by C in every worker from the shared zone
--     "moonhttp.acme", where the ordering worker writes them.
-- The protocol is acme/proto.lua, the files acme/store.lua.
local core = require "moonhttp.core"
local crypto = require "moonhttp.crypto"
local web = require "moonhttp.web"
local proto = require "moonhttp.acme.proto"
local store = require "moonhttp.acme.store"

local A = {}

local OPTIONS = { "domains", "email", "directory", "ca", "storage", "challenge", "renew_before",
  "eab", "retry_min", "retry_max" }
local DEFAULTS = {
  directory = "https://acme-v02.api.letsencrypt.org/directory",
  storage = "/var/lib/moonhttp/acme",
  challenge = "http-01",
  -- The first retry after a failed order, doubled up to retry_max: Let's
  -- Encrypt counts 5 failed validations per name and hour, so a minute first.
  retry_min = 60,
  retry_max = 24 * 3600,
}
local CHALLENGES = { ["http-01"] = true, ["tls-alpn-01"] = true }
local ZONE = "moonhttp.acme"
local CHANNEL = "moonhttp.acme"
-- The ordering worker's pace: how soon after start (and after a takeover) it
-- looks, and how often it asks whether a certificate is due. Cheap: a
-- lease check in shared memory, and a comparison of times.
local TICK = 1
-- "Checked at start and twice a day": the periodic check, shortened by up to
-- a tenth at random so many servers started together do not ask at once.
local CHECK_EVERY = 12 * 3600
-- A worker that missed a message (started while it was sent) finds the new
-- certificate within this long: it compares the zone's serial with its own.
local RESYNC = 10

-- The acme listeners of this script: { index, what, opts, dir, cert, key }.
local listeners = {}
local metrics

-- A number in [0, 1) from the CSPRNG: math.random's seed is the same in
-- workers forked from one state, and jitter must differ between them.
local function jitter()
  return string.unpack("<I4", crypto.crypto.random(4)) / 4294967296.0
end

local function is_dns_name(s)
  if #s > 253 or s:find("%.%.") or s:sub(1, 1) == "." or s:sub(-1) == "." then return false end
  return s:match("^[%w%-%.]+$") ~= nil
end

local function read_options(o, what, level)
  if type(o) ~= "table" then error(what .. ": expected a table of options", level) end
  core.check_opts(o, what, OPTIONS, level)
  local c = {}
  local domains = o.domains
  if type(domains) ~= "table" or #domains == 0 then
    error(what .. ".domains: expected a list of names, such as { \"example.com\" }", level)
  end
  c.domains = {}
  local seen = {}
  for i, d in ipairs(domains) do
    if type(d) == "string" and d:sub(1, 2) == "*." then
      error(string.format("%s.domains[%d]: %s: a wildcard needs the DNS-01 challenge, which is not supported",
        what, i, d), level)
    end
    if type(d) ~= "string" or not is_dns_name(d) then
      error(string.format("%s.domains[%d]: %s is not a DNS name", what, i, tostring(d)), level)
    end
    d = d:lower()
    if seen[d] then error(string.format("%s.domains[%d]: %s is there twice", what, i, d), level) end
    seen[d] = true
    c.domains[i] = d
  end
  for _, k in ipairs { "email", "directory", "ca", "storage" } do
    if o[k] ~= nil and type(o[k]) ~= "string" then error(what .. "." .. k .. ": expected a string", level) end
    c[k] = o[k] or DEFAULTS[k]
  end
  if not c.directory:match("^[hH][tT][tT][pP][sS]?://") then
    error(what .. ".directory: expected the URL of the CA's ACME directory", level)
  end
  c.challenge = o.challenge or DEFAULTS.challenge
  if not CHALLENGES[c.challenge] then
    error(what .. ".challenge: expected \"http-01\" or \"tls-alpn-01\", got " .. tostring(c.challenge), level)
  end
  c.renew_before = core.opt_seconds(o, "renew_before", nil, what, level)
  c.retry_min = core.opt_seconds(o, "retry_min", DEFAULTS.retry_min, what, level)
  c.retry_max = core.opt_seconds(o, "retry_max", DEFAULTS.retry_max, what, level)
  if o.eab ~= nil then
    if type(o.eab) ~= "table" then error(what .. ".eab: expected { kid = ..., hmac = ... }", level) end
    core.check_opts(o.eab, what .. ".eab", { "kid", "hmac" }, level)
    if type(o.eab.kid) ~= "string" or type(o.eab.hmac) ~= "string" then
      error(what .. ".eab: kid and hmac are strings (from the CA's account page)", level)
    end
    c.eab = { kid = o.eab.kid, hmac = o.eab.hmac }
  end
  return c
end

local function zone(http) return http.shared[ZONE] end

-- The ordering worker's record of a listener, shared so a takeover goes on
-- where the last one stopped: { failures, next_attempt, last_error, checked }.
local function get_state(http, l)
  local s = zone(http):get("state:" .. l.index)
  local st = s and web.json_decode(s) or {}
  -- JSON numbers come back as floats: whole ones are integers again (counts, Unix seconds)
  for k, v in pairs(st) do
    if math.type(v) == "float" then st[k] = math.tointeger(v) or v end
  end
  return st
end

local function put_state(http, l, st)
  zone(http):set("state:" .. l.index, core.json_encode(st))
end

-- What is stored for l: the chain, its core.acme.cert_info, or nil.
local function stored(l)
  local pem = store.read(l.cert)
  if not pem then return nil end
  local info = core.acme.cert_info(pem)
  if not info then return nil end
  return pem, info
end

local function covers(info, domains)
  local have = {}
  for _, n in ipairs(info.names or {}) do have[n:lower()] = true end
  for _, d in ipairs(domains) do
    if not have[d] then return false end
  end
  return true
end

-- When l's certificate is due: renew_before ahead of its end, by default a
-- third of its lifetime (Let's Encrypt's 90 days: at 60).
local function renew_at(l, info)
  local rb = l.opts.renew_before or (info.not_after - info.not_before) / 3
  return info.not_after - rb
end

-- This worker's view: the serial it installed per listener.
local installed = {}

local function install(http, l)
  local _, info = stored(l)
  if not info then return false end
  if installed[l.index] == info.serial then return true end
  local ok, err = core.acme.install(l.index, l.cert, l.key)
  if not ok then
    http.log("error", "acme: ", l.what, ": installing ", l.cert, " failed: ", tostring(err))
    return false
  end
  installed[l.index] = info.serial
  return true
end

-- Every worker: the stored certificates now, and the new ones as they come.
local function follow(http)
  local ch = http.channel(CHANNEL)
  local sub <close> = ch:subscribe()
  -- an error in one install must not end this loop, which every later install needs
  local function try(l)
    local ok, err = pcall(install, http, l)
    if not ok then http.log("error", "acme: ", l.what, ": installing: ", tostring(err)) end
  end
  for _, l in ipairs(listeners) do try(l) end
  while true do
    local msg, err = sub:receive(RESYNC)
    if err == "stopping" or err == "closed" then return end
    for _, l in ipairs(listeners) do
      if msg == tostring(l.index) or (not msg and zone(http):get("serial:" .. l.index) ~= installed[l.index]) then
        try(l)
      end
    end
  end
end

-- The ordering worker's clients, one per CA (account key and URL loaded once).
local clients = {}

local function client_for(http, l)
  local c = clients[l.dir]
  if c then return c end
  local ok, err = store.ensure_dir(l.dir)
  if not ok then return nil, err end
  local key_path, url_path = l.dir .. "/account.key", l.dir .. "/account.url"
  local key = store.read(key_path)
  if not key then
    key = core.acme.key_new()
    ok, err = store.write(key_path, key, true)
    if not ok then return nil, err end
  end
  local kid = store.read(url_path)
  c, err = proto.new(http, { directory = l.opts.directory, ca = l.opts.ca, key_pem = key,
    kid = kid and kid:match("%S+") })
  if not c then return nil, err end
  c.url_path = url_path
  clients[l.dir] = c
  return c
end

-- The account: the stored URL, or a new account (its URL stored). A CA that
-- forgot the account (pebble after a restart; an account deactivated) is
-- told about it again, with the same key.
local function account(l, c, again)
  if again then c.kid = nil end
  if c.kid then return true end
  local kid, err = c:account(l.opts.email, l.opts.eab)
  if not kid then return nil, err end
  return store.write(c.url_path, kid .. "\n", false)
end

-- The challenge answers through the zone, each undone when its authorization is over.
local function answerer(http, l)
  local z = zone(http)
  -- An answer left by a worker that died mid-order goes by itself.
  local TTL = 600
  if l.opts.challenge == "http-01" then
    return function(_, token, key_auth)
      local ok, err = z:set("http01:" .. token, key_auth, TTL)
      if not ok then return nil, "the shared zone refused the challenge: " .. tostring(err) end
      return function() z:delete("http01:" .. token) end
    end
  end
  return function(name, _, key_auth)
    local cert, key = core.acme.alpn_cert(name, key_auth)
    if not cert then return nil, "the validation certificate: " .. tostring(key) end
    local ok, err = z:set("alpn:" .. name, cert .. key, TTL)
    if not ok then return nil, "the shared zone refused the challenge: " .. tostring(err) end
    return function() z:delete("alpn:" .. name) end
  end
end

local ERR = "urn:ietf:params:acme:error:"

local function order(http, l, info)
  local c, err = client_for(http, l)
  if not c then return nil, { type = "storage", detail = tostring(err) } end
  local ok
  ok, err = account(l, c)
  if not ok then return nil, err end
  local key = core.acme.key_new()
  local opts = { replaces = info and proto.cert_id(info) }
  local chain
  chain, err = c:order(l.opts.domains, key, l.opts.challenge, answerer(http, l), opts)
  if not chain and type(err) == "table" and (err.type == ERR .. "accountDoesNotExist"
      or (err.type == ERR .. "unauthorized" and err.detail and err.detail:find("account", 1, true))) then
    http.log("warn", "acme: ", l.what, ": the CA does not know the account any more (",
      proto.describe(err), "); registering again")
    ok, err = account(l, c, true)
    if not ok then return nil, err end
    chain, err = c:order(l.opts.domains, key, l.opts.challenge, answerer(http, l), opts)
  end
  if not chain then return nil, err end
  ok, err = store.write(l.key, key, true)
  if ok then ok, err = store.write(l.cert, chain, false) end
  if not ok then return nil, { type = "storage", detail = tostring(err) } end
  return core.acme.cert_info(chain)
end

-- How long to wait after the n-th failure in a row: retry_min doubled each
-- time up to retry_max, the upper half at random, and never before the CA's Retry-After.
local function backoff(l, n, retry_after)
  local d = math.min(l.opts.retry_min * 2 ^ (n - 1), l.opts.retry_max)
  d = d * (0.5 + jitter() / 2)
  if retry_after then d = math.max(d, math.min(retry_after, l.opts.retry_max)) end
  return d
end

-- For spec/acme_options_spec.lua's rows (not an API).
A._backoff = function(opts, n, retry_after) return backoff({ opts = opts }, n, retry_after) end

local function set_days_left(l, info)
  if metrics and info then
    metrics.days_left:set((info.not_after - os.time()) / 86400, { l.opts.domains[1] })
  end
end

-- One look at l by the ordering worker: order when there is no certificate, it
-- does not cover the domains, or it is due; else note when to look again.
local function manage(http, l)
  local st = get_state(http, l)
  local now = os.time()
  if st.next_attempt and now < st.next_attempt then return end
  local _, info = stored(l)
  set_days_left(l, info)
  local due = not info or not covers(info, l.opts.domains) or now >= renew_at(l, info)
  local renewing = info ~= nil
  local next_check = now + CHECK_EVERY * (1 - jitter() / 10)
  if due == false and st.checked then
    -- a periodic check, not the one at start (a restart does not contact the CA): the CA
    -- may suggest renewing earlier (ARI, RFC 9773 §4.2: a random time in its window)
    local c = client_for(http, l)
    local ri = c and proto.cert_id(info) and c:renewal_info(proto.cert_id(info), now)
    if ri then
      due = now >= ri.start + (ri["end"] - ri.start) * jitter()
      if ri.retry_after then next_check = math.min(next_check, now + math.max(ri.retry_after, 60)) end
    end
  end
  if not due then
    st.checked = true
    st.next_attempt = math.floor(math.min(renew_at(l, info), next_check))
    put_state(http, l, st)
    return
  end
  http.log("info", "acme: ", l.what, ": ", renewing and "renewing" or "ordering", " a certificate for ",
    table.concat(l.opts.domains, ", "), " from ", l.opts.directory)
  local new, err = order(http, l, info)
  if metrics then metrics.orders:inc(1, { l.opts.domains[1] }) end
  if new then
    zone(http):set("serial:" .. l.index, new.serial)
    http.channel(CHANNEL):publish(tostring(l.index))
    set_days_left(l, new)
    http.log("info", "acme: ", l.what, ": got a certificate for ", table.concat(new.names or {}, ", "),
      ", valid until ", os.date("!%Y-%m-%d %H:%M:%S UTC", new.not_after))
    put_state(http, l, { checked = true, last_success = now,
      next_attempt = math.floor(math.min(renew_at(l, new), next_check)) })
    return
  end
  if metrics then metrics.failures:inc(1, { l.opts.domains[1] }) end
  st.failures = (st.failures or 0) + 1
  local wait = backoff(l, st.failures, type(err) == "table" and err.retry_after)
  st.last_error = proto.describe(err)
  st.next_attempt = now + math.ceil(wait)
  put_state(http, l, st)
  -- a failed client may hold a stale directory or connections to a CA that went away
  if clients[l.dir] then clients[l.dir]:close(); clients[l.dir] = nil end
  http.log("warn", "acme: ", l.what, ": ", renewing and "renewal" or "order", " failed (", st.failures,
    st.failures == 1 and " failure" or " failures in a row", "): ", st.last_error, "; next attempt in ",
    math.ceil(wait), " s", renewing and ", the current certificate is still served" or "")
end

local busy = false

local function tick(http)
  if busy then return end
  busy = true
  for _, l in ipairs(listeners) do
    local ok, err = pcall(manage, http, l)
    if not ok then http.log("error", "acme: ", l.what, ": ", tostring(err)) end
  end
  busy = false
end

-- A listen entry without TLS, where the C core answers HTTP-01.
local function has_plain(entries)
  for _, e in ipairs(entries) do
    if (type(e) == "string" and not e:match("^[hH][tT][tT][pP][sS]://"))
        or (type(e) == "table" and (e.tls == nil or e.tls == false)) then
      return true
    end
  end
  return false
end

--- http.server's part: finds the listeners with tls.acme in the settings,
--- checks their options (raising at the caller's line, `level`), and sets up
--- the workers' part. Returns nothing; does nothing without acme listeners.
function A.configure(http, t, level)
  if type(t) == "table" and type(t.tls) == "table" and t.tls.acme ~= nil then
    -- which listeners would share it, and be installed, is a guess: say where it goes
    error("tls.acme: put acme in the tls of a listen entry: listen = { \":80\", "
      .. "{ addr = \":443\", tls = { acme = {...} } } }", level)
  end
  local listen = type(t) == "table" and t.listen
  if type(listen) ~= "table" then return end
  local entries = listen.addr ~= nil and { listen } or listen
  for i, e in ipairs(entries) do
    if type(e) == "table" and type(e.tls) == "table" and e.tls.acme ~= nil then
      local what = string.format("listen[%d].tls.acme", i)
      local opts = read_options(e.tls.acme, what, level + 1)
      local dir = store.ca_dir(opts.storage, opts.directory)
      local cert, key = store.cert_paths(dir, opts.domains[1])
      listeners[#listeners + 1] = { index = i, what = what, opts = opts, dir = dir, cert = cert, key = key }
    end
  end
  if #listeners == 0 then return end
  for _, l in ipairs(listeners) do
    if l.opts.challenge == "http-01" and not has_plain(entries) then
      error(l.what .. ': challenge "http-01" needs a plain HTTP listener (the CA asks on port 80), '
        .. 'or use challenge = "tls-alpn-01"', level)
    end
  end
  metrics = {
    orders = core.own_metric_counter("moonhttp_acme_orders_total", "ACME orders begun, per certificate (its first name).",
      { "name" }),
    failures = core.own_metric_counter("moonhttp_acme_failures_total", "ACME orders that failed, per certificate.",
      { "name" }),
    days_left = core.own_metric_gauge("moonhttp_acme_days_left", "Days until the served certificate expires.", { "name" }),
  }
  core.on_start(function()
    http.every(TICK, tick, { once = true }, http)
    follow(http) -- until the stop: a thread would end with this task
  end)
end

--- http.acme.status(): per acme listener { listener, names, not_after,
--- last_error, next_attempt, failures } (times in Unix seconds).
function A.status(http)
  local out = {}
  for _, l in ipairs(listeners) do
    local _, info = stored(l)
    local st = core.started() and get_state(http, l) or {}
    out[#out + 1] = { listener = l.index, names = l.opts.domains, not_after = info and info.not_after,
      last_error = st.last_error, next_attempt = st.next_attempt, failures = st.failures or 0 }
  end
  return out
end

return A
