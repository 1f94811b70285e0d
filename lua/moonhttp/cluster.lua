-- One app across many servers (docs/guide/cluster.md): the instances of one
-- cluster (http.server{ cluster = { redis =, name = } }) find each other
-- and share run-once work only through Redis.
--
-- Once per instance: what an instance does toward Redis (its heartbeat, its
-- bid for a job's lease) runs in one of its workers, the holder of a local
-- run-once lease (http.every's { once = true }, base/shm_once.h); when that
-- worker dies the master gives the local lease back and another worker's
-- next tick takes the duty over.
--
-- Instances: an instance beats (one script call each `heartbeat` seconds)
-- into a sorted set scored by when the beat expires, on Redis's clock;
-- http.cluster.instances() drops the expired ones and lists the rest. A
-- stop removes the instance at once.
--
-- Channels: with a cluster, ch:publish(msg) is a PUBLISH to the channel's
-- Redis name (through core.channel_remote); each instance keeps one Redis
-- connection subscribed to the names its workers listen to (the shared
-- zone's listened set, so reference-counted per instance), held by one
-- worker (the relay, a local once lease), which hands each message to the
-- zone: the existing local fan-out takes it to every worker's subscribers,
-- the publisher's instance included. The relay reconnects with a backoff
-- and subscribes again; every channel it had to subscribe anew after a
-- lost connection (or taking over from a dead relay) gets a gap notice once
-- Redis confirmed it, so a subscriber's receive answers nil, "gap" where
-- messages may have been lost (at most once delivery).
--
-- Run-once: a job of { once = "cluster" } has a lease in Redis, a key held
-- by one worker of one instance for `lease` seconds and renewed every third
-- of that while it is held; taking it (SET NX PX in a script) draws a
-- fencing token from a counter that only grows, which the job gets as its
-- first argument, so whatever it writes can be refused from a holder that
-- lost the lease without knowing. A holder killed or cut off stops renewing:
-- another worker takes the lease once it expires. A stop gives it back.
local core = require "moonhttp.core"
local redis = require "moonhttp.redis"

local M = {}

local KEYS = { "redis", "name", "heartbeat", "ttl", "lease" }

local json_decode = require("moonhttp.web").json_decode

local conf = nil -- the cluster setting, checked, once the script gave one
local gauge = nil -- cluster_instance{cluster, instance}, declared with the setting

-- Beat: KEYS instances (zset), info (hash), done (hash); ARGV id, ttl ms, info json.
-- The done marks of on_start jobs live as long as some instance beats.
local BEAT = [[
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return now
]]

-- Instances: KEYS instances, info. Returns { id, info, ms left, ... } of the live ones.
local LIST = [[
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
end
local out = {}
local live = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #live, 2 do
  out[#out + 1] = live[i]
  out[#out + 1] = redis.call('HGET', KEYS[2], live[i]) or '{}'
  out[#out + 1] = tonumber(live[i + 1]) - now
end
return out
]]

-- Leave: KEYS instances, info; ARGV id.
local LEAVE = "redis.call('ZREM', KEYS[1], ARGV[1]) redis.call('HDEL', KEYS[2], ARGV[1]) return 1"

-- Take or renew a lease: KEYS lease, fence counter; ARGV owner, ttl ms. The
-- lease's value is "owner token". Returns the token while owner holds it, else 0.
local TAKE = [[
local cur = redis.call('GET', KEYS[1])
if cur then
  local owner, token = string.match(cur, '^(.*) (%d+)$')
  if owner == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return tonumber(token)
  end
  return 0
end
local token = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. token, 'PX', ARGV[2])
return token
]]

-- Give a lease back: KEYS lease; ARGV owner.
local RELEASE = [[
local cur = redis.call('GET', KEYS[1])
if cur and string.match(cur, '^(.*) %d+$') == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end
return 0
]]

local function read_file(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- http.server{ cluster = {...} }: called by http.server while the script loads (in the
-- process that forks the workers, which inherit what is set here), for the setting's row
-- in src/settings/settings_table.c; level names the script's line for errors.
function M.configure(opts, level)
  if type(opts) ~= "table" then error("http.server: cluster must be a table { redis =, name = }", level) end
  core.check_opts(opts, "http.server: cluster", KEYS, level)
  local name = opts.name
  if type(name) ~= "string" or not name:find("^[%w_.%-]+$") or #name > 64 then
    error("http.server: cluster.name must be 1 to 64 letters, digits, '_', '.' or '-'", level)
  end
  local copts
  if type(opts.redis) == "string" then
    local err
    copts, err = redis.parse_url(opts.redis)
    if not copts then error("http.server: cluster.redis: " .. err, level) end
  elseif type(opts.redis) == "table" then
    copts = {}
    for k, v in pairs(opts.redis) do copts[k] = v end
  else
    error("http.server: cluster.redis must be a redis:// URL or redis.connect's options table", level)
  end
  local what = "http.server: cluster"
  local heartbeat = core.opt_seconds(opts, "heartbeat", 1, what, level, 0)
  local ttl = core.opt_seconds(opts, "ttl", 3 * heartbeat, what, level, 0)
  if ttl <= heartbeat then error("http.server: cluster.ttl must be longer than cluster.heartbeat", level) end
  local lease = core.opt_seconds(opts, "lease", 5, what, level, 0)
  copts.timeout = copts.timeout or math.min(2, lease / 3)
  copts.auto_pipeline = true
  redis.connect(copts) -- checks redis.connect's options now
  local host = (read_file("/proc/sys/kernel/hostname") or "localhost"):gsub("%s+$", "")
  local pid = math.tointeger(io.open("/proc/self/stat"):read("n"))
  local prefix = "moonhttp:cluster:" .. name .. ":"
  conf = {
    name = name, redis = copts, heartbeat = heartbeat, ttl = ttl, lease = lease,
    host = host, pid = pid, id = host .. ":" .. pid, started = os.time(),
    k_instances = prefix .. "instances", k_info = prefix .. "info", k_done = prefix .. "done",
    k_lease = prefix .. "lease:", k_fence = prefix .. "fence:", k_channel = prefix .. "channel:",
  }
  core.channel_remote(M.publish)
  -- Logs and metrics name the instance, so those of many servers can be merged.
  core.log_instance(name .. "/" .. conf.id)
  gauge = gauge or core.metric_gauge("cluster_instance",
    "This server's cluster and instance (always 1).", { "cluster", "instance" })
  core.on_start(M._worker_started)
end

function M.configured() return conf ~= nil end

-- A copy of the cluster's redis.connect options (auto-pipelined), or nil without a cluster.
function M.redis_options()
  if not conf then return nil end
  local o = {}
  for k, v in pairs(conf.redis) do o[k] = v end
  return o
end

-- A script through the cluster's auto-pipelined client: SCRIPT LOAD once per worker and
-- script, EVALSHA after, EVAL when Redis forgot it.
local shas = {}
local function run(script, nkeys, ...)
  local c, err = redis.connect(conf.redis)
  if not c then return nil, err end
  local sha = shas[script]
  if not sha then
    sha, err = c:script("LOAD", script)
    if not sha then return nil, err end
    shas[script] = sha
  end
  local v
  v, err = c:evalsha(sha, nkeys, ...)
  if v == nil and type(err) == "string" and err:find("^NOSCRIPT") then v, err = c:eval(script, nkeys, ...) end
  c:keepalive()
  return v, err
end

-- Last words at a stop: from then on every wait answers "stopping", so no
-- connection can be made nor an answer read, but a write that fits a
-- connected socket's buffer still goes out. A task that will need them keeps
-- a connection of its own (a socket belongs to the task that connected it),
-- opened and logged in while Redis answers.
local function last_words(c)
  if c and c.sock then return c end
  local o = {}
  for k, v in pairs(conf.redis) do o[k] = v end
  o.auto_pipeline = nil
  return redis.connect(o) or false
end

-- Sends a script with EVAL on such a connection, without waiting for its answer.
local function send_last(c, script, nkeys, ...)
  if c and c.sock then pcall(c.sock.send, c.sock, redis.encode("EVAL", script, nkeys, ...)) end
end

local function worker_pid() return math.tointeger(io.open("/proc/self/stat"):read("n")) end

-- ch:publish(msg) with a cluster: true, or nil, err (Redis away: nothing is queued).
function M.publish(name, msg)
  local c, err = redis.connect(conf.redis)
  if not c then return nil, err end
  local n
  n, err = c:publish(conf.k_channel .. name, msg)
  c:keepalive()
  if not n then return nil, err end
  return true
end

-- The relay: one per instance, in the worker holding its local lease; see the top.
local relay = { running = false }
local POLL = 0.05 -- seconds a read waits before the listened set is looked at again
local BATCH = 512 -- names per SUBSCRIBE

local function send_names(c, cmd, names)
  for i = 1, #names, BATCH do
    local ok, err = c.sock:send(redis.encode(cmd, table.unpack(names, i, math.min(i + BATCH - 1, #names))))
    if not ok then return nil, err end
  end
  return true
end

-- Connected and subscribed to the control name (the connection is then in pub/sub mode).
local function relay_connect()
  local o = M.redis_options()
  o.auto_pipeline = nil
  local c, err = redis.connect(o)
  if not c then return nil, err end
  local ok
  ok, err = c:subscribe(conf.k_channel)
  if not ok then c:close(); return nil, err end
  c:settimeout(POLL)
  return c
end

-- Runs until a stop: one connection at a time, its subscriptions kept equal to the names
-- listened to on this instance.
local function relay_run()
  local prefix, plen = conf.k_channel, #conf.k_channel + 1
  local lost = core.channel_relay_started() > 0 -- a relay before this one died: messages were lost
  local backoff, warned = 0.05, false
  while not core.stopping() do
    local c, err = relay_connect()
    if not c then
      if not warned then core.log("warn", "cluster " .. conf.name .. ": channels: " .. tostring(err)) end
      warned = true
      if not core.sleep(backoff) then return end
      backoff = math.min(backoff * 2, 1)
    else
      if warned then core.log("info", "cluster " .. conf.name .. ": channels: redis answers again") end
      warned, backoff = false, 0.05
      local subscribed, version, gap = {}, nil, {}
      while true do
        local v, names = core.channel_listened(version)
        if v then
          version = v
          local add, want = {}, {}
          for _, name in ipairs(names) do
            if name:byte(1) == 0 then goto next_name end -- kept to this server (lua_channel.c)
            want[name] = true
            if not subscribed[name] then
              add[#add + 1] = prefix .. name
              subscribed[name] = true
              if lost then gap[name] = true end
            end
            ::next_name::
          end
          local drop = {}
          for name in pairs(subscribed) do
            if not want[name] then drop[#drop + 1] = prefix .. name; subscribed[name] = nil end
          end
          lost = false
          local ok
          ok, err = send_names(c, "SUBSCRIBE", add)
          if ok then ok, err = send_names(c, "UNSUBSCRIBE", drop) end
          if not ok then break end
        end
        local kind, channel, payload = c:read_message()
        if kind == "message" then
          core.channel_relay(channel:sub(plen), payload)
        elseif kind == "subscribe" then
          local name = channel:sub(plen)
          if gap[name] then -- Redis delivers from here on: what came before may be lost
            gap[name] = nil
            core.channel_relay(name, nil)
          end
        elseif kind == nil and channel ~= "timeout" then
          err = channel
          break
        end
        if core.stopping() then break end
      end
      c:close()
      lost = true
      if not core.stopping() then
        core.log("warn", "cluster " .. conf.name .. ": channels: subscription lost: " .. tostring(err))
      end
    end
  end
end

local function relay_tick()
  if relay.running then return end
  relay.running = true
  relay_run()
  relay.running = false
end

-- The instance's heartbeat, in the worker holding the local lease of it.
local beats = { warned = false, mine = false }
local function beat()
  local info = core.json_encode({ id = conf.id, host = conf.host, pid = conf.pid, started = conf.started })
  beats.mine = true
  local ok, err = run(BEAT, 3, conf.k_instances, conf.k_info, conf.k_done, conf.id, math.floor(conf.ttl * 1000), info)
  if not ok and not core.stopping() and err ~= "stopping" then
    if not beats.warned then core.log("warn", "cluster " .. conf.name .. ": heartbeat: " .. tostring(err)) end
    beats.warned = true
  elseif ok and beats.warned then
    core.log("info", "cluster " .. conf.name .. ": heartbeat: redis answers again")
    beats.warned = false
  end
end

-- Every worker: offers to beat (one beats), and at a stop the one that beat says the
-- instance left (a reload's old generation only ends: the new one beats on).
function M._worker_started()
  gauge:set(1, { conf.name, conf.id })
  core.every(conf.heartbeat, beat, { once = true })
  core.every(0.2, relay_tick, { once = true })
  local last = false -- this task's: a socket belongs to the task that connected it
  while core.sleep(conf.heartbeat) do
    if beats.mine then last = last_words(last) end
  end
  if core.stopping() and beats.mine then send_last(last, LEAVE, 2, conf.k_instances, conf.k_info, conf.id) end
end

-- http.cluster.instances() → { { id =, host =, pid =, started =, expires = seconds }, ... } | nil, err
function M.instances()
  if not conf then return nil, "no cluster (http.server{ cluster = { redis =, name = } })" end
  local v, err = run(LIST, 2, conf.k_instances, conf.k_info)
  if not v then return nil, err end
  local list = {}
  for i = 1, #v, 3 do
    local ok, t = pcall(json_decode, v[i + 1])
    t = ok and type(t) == "table" and t or {}
    t.id, t.expires = v[i], (tonumber(v[i + 2]) or 0) / 1000
    list[#list + 1] = t
  end
  table.sort(list, function(a, b) return a.id < b.id end)
  return list
end

-- A lease on job `key`, held by this worker (owner) or not.
local Lease = {}
Lease.__index = Lease

local function new_lease(key)
  return setmetatable({ key = conf.k_lease .. key, fence = conf.k_fence .. key,
    owner = conf.id .. "/" .. worker_pid(), token = false, valid_until = 0, keeper = false }, Lease)
end

-- Takes or renews the lease. Returns the token while held, else false.
function Lease:take()
  local asked = core.now()
  local v = run(TAKE, 2, self.key, self.fence, self.owner, math.floor(conf.lease * 1000))
  if type(v) == "number" and v > 0 then
    -- held until the lease would expire, counted from before the request left
    self.token, self.valid_until = v, asked + conf.lease
    if not self.keeper then
      self.keeper = true
      core.timer(0, Lease.keep, self)
    end
    return v
  end
  if v == 0 or core.now() >= self.valid_until then self.token = false end
  return self.token
end

-- Whether this worker may run the job now: held and not past the lease's time.
function Lease:held()
  return self.token and core.now() < self.valid_until and self.token or false
end

-- Renews the lease every third of its time while it is held; gives it back at a stop.
function Lease:keep()
  local last = false
  while self.token do
    last = last_words(last)
    if not core.sleep(conf.lease / 3) then
      if self.token then send_last(last, RELEASE, 1, self.key, self.owner) end
      self.token = false
      break
    end
    if self.token then self:take() end
  end
  self.keeper = false
end

-- Gives the lease back now (the job ended).
function Lease:release()
  if self.token then
    self.token = false
    run(RELEASE, 1, self.key, self.owner)
  end
end

-- http.every(interval, fn, { once = "cluster" }, ...): one worker of every instance ticks
-- (the local once lease); the one holding the job's cluster lease runs fn(token, ...).
function M.every(key, interval, fn, ...)
  local lease = new_lease(key)
  local args = table.pack(...)
  return core.every(interval, function()
    local token = lease:held() or lease:take()
    if token then fn(token, table.unpack(args, 1, args.n)) end
  end, { once = true })
end

-- http.on_start(fn, { once = "cluster" }) in each worker: one worker of the instance at a
-- time (the local once lease) waits for the job's cluster lease (or its done mark: the job
-- ran, and some instance has beaten since), runs fn(token) holding it, then marks it done
-- and gives the lease back; then every worker's timer ends.
function M.run_start(key, fn)
  local lease = new_lease(key)
  local state = "waiting" -- "trying" | "done"
  local timer
  timer = core.every(math.min(conf.lease / 3, 1), function()
    if state ~= "waiting" then return end
    state = "trying"
    local done = run("return redis.call('HEXISTS', KEYS[1], ARGV[1])", 1, conf.k_done, key)
    local token = done ~= 1 and lease:take()
    if not token then
      state = done == 1 and "done" or "waiting"
      if state == "done" then timer:cancel() end
      return
    end
    local ok, err = pcall(fn, token)
    if lease:held() then
      run("return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])", 1, conf.k_done, key, token)
      lease:release()
    end
    state = "done"
    timer:cancel()
    if not ok then error(err, 0) end
  end, { once = true })
end

return M
