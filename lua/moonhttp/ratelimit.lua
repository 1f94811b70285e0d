-- Rate limits (docs/reference/ratelimit.md): a GCRA limiter (src/base/gcra.h)
-- whose state is one time per key, kept in a shared dict (every worker of
-- this server) or in Redis (every instance that shares it).
--
--   local ratelimit = require "moonhttp.ratelimit"
--   http.use(ratelimit.middleware{ limit = 10, window = 1, dict = "ratelimit" })
--   local per_user = ratelimit.new{ limit = 100, window = 60, redis = "redis://127.0.0.1:6379/0" }
--   local r = per_user:check(user_id)   -- r.allowed, r.remaining, r.reset, r.retry_after, r.err
--
-- The Redis backend is one round trip per check: EVALSHA of the script
-- below (loaded once per worker with SCRIPT LOAD; a NOSCRIPT answer, after
-- Redis restarted, sends it again with EVAL), through an auto-pipelined
-- client, so the checks of one loop iteration share one write. Its clock is
-- Redis's TIME, the same for every instance.
local core = require "moonhttp.core"
local redis = require "moonhttp.redis"

local M = {}

local floor, ceil, type, tostring = math.floor, math.ceil, type, tostring

-- The rule of gcra.h, for Redis to run atomically beside the key. KEYS[1]:
-- the key; ARGV: emission, tolerance (microseconds), cost. Returns
-- { allowed (0/1), ahead }: the key's TAT after the check, less now (us).
-- The stored TAT lives until it has passed (PX), so idle keys cost nothing.
local SCRIPT = [[
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local emission, tolerance, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '') or now
local from = math.max(tat, now)
local after = from + cost * emission
if after - now > tolerance then return { 0, from - now } end
if after > now then
  redis.call('SET', KEYS[1], string.format('%d', after), 'PX', math.ceil((after - now) / 1000))
end
return { 1, after - now }
]]

local NEW_KEYS = { "limit", "window", "burst", "name", "dict", "redis", "timeout", "fail", "prefix" }
local MIDDLEWARE_KEYS = { "key", "cost", "on_refused" }

-- Seconds a Redis backend that failed is not asked again (every check gets
-- the fail policy at once), so an outage costs one timeout per worker per
-- second instead of one per request.
local BACKOFF = 1

local Limiter = {}
Limiter.__index = Limiter

local function check_number(v, what, min, level)
  if type(v) ~= "number" or v ~= v or v < min or v == math.huge then
    error(string.format("%s must be a number >= %s", what, tostring(min)), level)
  end
  return v
end

-- A policy name is a structured-field string in the headers: printable ASCII, no quote or backslash.
local function check_name(name, level)
  if type(name) ~= "string" or name == "" or #name > 64 or name:find('[^\32-\126]') or name:find('["\\]') then
    error("ratelimit.new: name must be 1 to 64 printable ASCII characters without '\"' or '\\'", level)
  end
  return name
end

local function redis_options(spec, timeout, level)
  local opts
  if type(spec) == "string" then
    local err
    opts, err = redis.parse_url(spec)
    if not opts then error("ratelimit.new: redis: " .. err, level) end
  elseif type(spec) == "table" then
    opts = {}
    for k, v in pairs(spec) do opts[k] = v end
  else
    error("ratelimit.new: redis must be a redis:// URL or redis.connect's options table", level)
  end
  opts.timeout = opts.timeout or timeout
  opts.auto_pipeline = true
  redis.connect(opts) -- checks the options now (a client that takes no connection yet)
  return opts
end

-- ratelimit.new{ limit =, window = [, burst =, name =, dict = | redis =, timeout =, fail =, prefix = ] }
function M.new(opts, level)
  level = level or 2
  if type(opts) ~= "table" then error("ratelimit.new: options must be a table", level) end
  core.check_opts(opts, "ratelimit.new", NEW_KEYS, level)
  local limit = check_number(opts.limit, "ratelimit.new: limit", 1, level + 1)
  local window = check_number(opts.window, "ratelimit.new: window (seconds)", 0.001, level + 1)
  local burst = opts.burst == nil and limit or check_number(opts.burst, "ratelimit.new: burst", 1, level + 1)
  if floor(limit) ~= limit or floor(burst) ~= burst then
    error("ratelimit.new: limit and burst must be whole numbers", level)
  end
  local emission = floor(window * 1e6 / limit + 0.5)
  if emission < 1 then error("ratelimit.new: more than one unit per microsecond", level) end
  local fail = opts.fail or "open"
  if fail ~= "open" and fail ~= "closed" then
    error('ratelimit.new: fail must be "open" or "closed"', level)
  end
  local timeout = opts.timeout == nil and 0.5 or check_number(opts.timeout, "ratelimit.new: timeout", 0.001, level + 1)
  local name = check_name(opts.name or "default", level + 1)
  local prefix = opts.prefix or "moonhttp:ratelimit:"
  if type(prefix) ~= "string" then error("ratelimit.new: prefix must be a string", level) end
  local self = setmetatable({
    limit = limit, window = window, burst = burst, name = name, fail = fail,
    emission = emission, tolerance = burst * emission, prefix = prefix .. name .. ":",
    -- RateLimit-Policy (draft-ietf-httpapi-ratelimit-headers): w is whole seconds or absent
    policy = string.format('"%s";q=%d', name, limit)
      .. (floor(window) == window and string.format(";w=%d", window) or ""),
    down_until = 0, sha = false,
  }, Limiter)
  if opts.redis ~= nil then
    if opts.dict ~= nil then error("ratelimit.new: dict and redis: choose one backend", level) end
    self.redis = redis_options(opts.redis, timeout, level + 1)
  else
    local dict = opts.dict or "ratelimit"
    if type(dict) ~= "string" then error("ratelimit.new: dict must be a shared dict's name", level) end
    self.dict_name = dict
    -- neither named: the cluster's Redis when the server is one instance of a cluster,
    -- decided at the first check (the cluster setting may come later in the script)
    self.pick = opts.dict == nil and timeout
  end
  return self
end

-- The backend of a limiter that named none: the cluster's Redis, or the shared dict.
local function pick_backend(self)
  local copts = require("moonhttp.cluster").redis_options()
  if copts then
    copts.timeout = self.pick
    self.redis = copts
  end
  self.pick = false
end

-- One EVALSHA, or EVAL when Redis does not know the script (it restarted, or SCRIPT FLUSH).
local function redis_take(self, key, cost)
  local c, err = redis.connect(self.redis)
  if not c then return nil, err end
  local sha = self.sha
  if not sha then
    sha, err = c:script("LOAD", SCRIPT)
    if not sha then c:keepalive(); return nil, err end
    self.sha = sha
  end
  local v
  v, err = c:evalsha(sha, 1, key, self.emission, self.tolerance, cost)
  if not v and type(err) == "string" and err:find("^NOSCRIPT") then
    v, err = c:eval(SCRIPT, 1, key, self.emission, self.tolerance, cost)
  end
  c:keepalive()
  if not v then return nil, err end
  if type(v) ~= "table" or type(v[1]) ~= "number" or type(v[2]) ~= "number" then
    return nil, "unexpected reply from the rate limit script"
  end
  return v[1] == 1, v[2]
end

local function dict_take(self, key, cost)
  local dict = self.dict
  if not dict then
    dict = core.shared[self.dict_name]
    self.dict = dict
  end
  return core.shared_gcra(dict, key, self.emission, self.tolerance, cost)
end

-- limiter:check(key [, cost = 1]) → { allowed, limit, remaining, reset, retry_after, err }.
-- reset: seconds until more quota comes back (0: the quota is whole); retry_after: seconds
-- until this check would pass (refused only). When the backend fails (err set), allowed is
-- the fail policy's answer and remaining/reset are nil.
function Limiter:check(key, cost)
  if type(key) ~= "string" and type(key) ~= "number" then
    error("limiter:check: key must be a string or a number", 2)
  end
  cost = cost or 1
  if type(cost) ~= "number" or cost < 0 or floor(cost) ~= cost then
    error("limiter:check: cost must be a whole number >= 0", 2)
  end
  local allowed, ahead
  if self.pick then pick_backend(self) end
  if self.redis then
    local now = core.now()
    if now < self.down_until then
      return { allowed = self.fail == "open", limit = self.limit, err = self.down_err,
        retry_after = ceil(self.down_until - now) }
    end
    allowed, ahead = redis_take(self, self.prefix .. key, cost)
    if allowed == nil then
      local first = self.down_until == 0 or now >= self.down_until + BACKOFF
      self.down_until, self.down_err = now + BACKOFF, ahead
      if first then
        core.log("warn", string.format("ratelimit %s: redis: %s (failing %s for %ds)", self.name,
          tostring(ahead), self.fail, BACKOFF))
      end
      return { allowed = self.fail == "open", limit = self.limit, err = ahead, retry_after = BACKOFF }
    end
  else
    allowed, ahead = dict_take(self, self.prefix .. key, cost)
    if allowed == nil then
      return { allowed = self.fail == "open", limit = self.limit, err = ahead, retry_after = BACKOFF }
    end
  end
  local emission, tolerance = self.emission, self.tolerance
  if ahead < 0 then ahead = 0 end
  local remaining = floor((tolerance - ahead) / emission)
  if remaining < 0 then remaining = 0 end
  -- the next unit comes back when (tolerance - ahead + elapsed) reaches (remaining + 1) units
  local reset = ahead > 0 and ((remaining + 1) * emission - tolerance + ahead) / 1e6 or 0
  local r = { allowed = allowed, limit = self.limit, remaining = remaining, reset = reset }
  if not allowed then r.retry_after = (ahead + cost * emission - tolerance) / 1e6 end
  return r
end

-- limiter:headers(res, r): RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-headers),
-- and Retry-After when r was refused.
function Limiter:headers(res, r)
  res:header("RateLimit-Policy", self.policy)
  if r.remaining then
    res:header("RateLimit", string.format('"%s";r=%d;t=%d', self.name, r.remaining, ceil(r.reset)))
  end
  if not r.allowed then
    local after = ceil(r.retry_after or BACKOFF)
    res:header("Retry-After", tostring(after < 1 and 1 or after))
  end
end

-- The client's address without its port ("ip:port", "[v6]:port"): one quota per address.
local function default_key(req)
  local addr = req.remote_addr
  return addr:match("^%[(.*)%]:%d+$") or addr:match("^(.*):%d+$") or addr
end

-- ratelimit.middleware{ limit =, window =, ... (as new), key = fn(req) → key | nil (default:
--   the client's address),
--   cost = fn(req) → units, on_refused = fn(req, res, r) }
-- A nil key lets the request through uncounted. Refused: 429 with Retry-After, or, when the
-- backend failed and fail = "closed", 503.
function M.middleware(opts)
  if type(opts) ~= "table" then error("ratelimit.middleware: options must be a table", 2) end
  local limiter_opts, key_fn, cost_fn, on_refused = {}, default_key, nil, nil
  for k, v in pairs(opts) do
    if k == "key" then key_fn = v
    elseif k == "cost" then cost_fn = v
    elseif k == "on_refused" then on_refused = v
    else limiter_opts[k] = v end
  end
  local known = {}
  for _, k in ipairs(NEW_KEYS) do known[#known + 1] = k end
  for _, k in ipairs(MIDDLEWARE_KEYS) do known[#known + 1] = k end
  core.check_opts(opts, "ratelimit.middleware", known, 2)
  for what, fn in pairs({ key = key_fn, cost = cost_fn or false, on_refused = on_refused or false }) do
    if fn and type(fn) ~= "function" then error("ratelimit.middleware: " .. what .. " must be a function", 2) end
  end
  local limiter = M.new(limiter_opts, 3)
  return function(next)
    return function(req, res, ...)
      local key = key_fn(req)
      if key == nil then return next(req, res, ...) end
      local r = limiter:check(key, cost_fn and cost_fn(req) or 1)
      limiter:headers(res, r)
      if r.allowed then return next(req, res, ...) end
      if on_refused then return on_refused(req, res, r) end
      res:header("Content-Type", "text/plain")
      if r.err then
        res:status(503)
        return res:write("Service Unavailable\n")
      end
      res:status(429)
      res:write("Too Many Requests\n")
    end
  end
end

return core.strict_module(M, "ratelimit")
