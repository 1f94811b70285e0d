-- An API gateway (docs/guide/proxy.md, "As a reverse proxy"): two upstream groups
-- behind API-key and JWT checks, a rate limit shared by all workers, path
-- rewriting, server-sent events and a WebSocket route passed through.
--
--   GATEWAY_USERS=10.0.0.1:8080,10.0.0.2:8080 GATEWAY_EVENTS=10.0.0.3:8080 \
--   GATEWAY_API_KEYS=k3y-for-alice=alice GATEWAY_JWT_SECRET=... moonhttp examples/gateway.lua
--
--   /v1/users/...   API key, rate limit  → users group, as /users/..., cached
--   GET /v1/events  API key, rate limit  → events group, a stream of server-sent events
--   GET /v1/ws      API key, rate limit  → events group, a WebSocket
--   GET /account    a JWT (Bearer)       → users group, as /users/<the token's sub>
local http = require "moonhttp"

http.server{ shared = { upstreams = "1m", limits = "1m", cache = "16m" } }

local function env(name, default) return os.getenv(name) or default end

local function list(s)
  local t = {}
  for item in s:gmatch("[^,%s]+") do t[#t + 1] = item end
  return t
end

local API_KEYS = {}                                  -- key → client name
for key, name in env("GATEWAY_API_KEYS", "dev-key=dev"):gmatch("([^,=%s]+)=([^,%s]+)") do
  API_KEYS[key] = name
end
local JWT_SECRET = env("GATEWAY_JWT_SECRET", "change me: a secret of at least 32 bytes")
local RATE = tonumber(env("GATEWAY_RATE", "600"))   -- requests per client per minute

-- Two groups. The marks (server down, failures) live in the "upstreams" dict,
-- so every worker sees them and one worker probes each server.
local users = http.upstream{
  name = "users",
  servers = list(env("GATEWAY_USERS", "127.0.0.1:9001,127.0.0.1:9002")),
  shared = "upstreams",
  health = { path = "/health", interval = 5 },
  retries = { tries = 2, on = { "error", "timeout", "502", "503" } },
  keepalive = 64,
}
local events = http.upstream{
  name = "events",
  servers = list(env("GATEWAY_EVENTS", "127.0.0.1:9101")),
  balance = "hash(remote_addr)",                    -- a client keeps its event server
  shared = "upstreams",
}

-- Upstream failures as JSON, like the gateway's own errors.
local function json_error(res, status, kind)
  res:json({ error = kind == "unavailable" and "no healthy upstream" or kind }, status)
end

-- Proxies to group with the path's prefix `from` replaced by `to`.
local function rewrite(group, from, to, opts)
  opts = opts or {}
  opts.on_error = json_error
  opts.request = function(up) up.path = to .. up.path:sub(#from + 1) end
  return function(req, res) return http.proxy(req, res, group, opts) end
end

local function deny(res, status, message)
  res:json({ error = message }, status)
end

-- API keys in X-API-Key; the client's name goes on in req.ctx.
local function api_key(next)
  return function(req, res)
    local client = API_KEYS[req:header("x-api-key") or ""]
    if not client then return deny(res, 401, "unknown API key") end
    req.ctx.client = client
    return next(req, res)
  end
end

-- RATE requests a minute per client, counted by all workers together.
local function rate_limit(next)
  return function(req, res)
    local window = os.time() // 60
    local count = http.shared.limits:incr(req.ctx.client .. "@" .. window, 1, 0, 60)
    if count and count > RATE then
      res:header("Retry-After", tostring(60 - os.time() % 60))
      return deny(res, 429, "rate limit exceeded")
    end
    return next(req, res)
  end
end

local v1 = http.group("/v1")
v1:use(api_key)
v1:use(rate_limit)

-- GETs of /v1/users/ go through a response cache shared by all workers: an
-- answer the users service marks cacheable (Cache-Control: max-age) is
-- served from it while fresh, and for a minute past that if the service
-- fails. It sits after the key check and the rate limit, so both still count.
local cache = require("moonhttp.cache").new{ dict = http.shared.cache, stale_if_error = 60 }
v1:handle("/users/", cache:wrap(rewrite(users, "/v1/users/", "/users/", { read_timeout = 10 })))

-- A stream: no total timeout, and each event is sent on as it arrives.
v1:handle("GET /events", rewrite(events, "/v1/events", "/events", { timeout = 0, read_timeout = 300 }))

-- WebSocket (any Upgrade): after the server's 101, http.proxy pumps the
-- bytes both ways; a minute without one closes both sides.
v1:handle("GET /ws", rewrite(events, "/v1/ws", "/ws", { idle_timeout = 60 }))

-- An end user's own record, from the subject of an HS256 token.
http.handle("GET /account", function(req, res)
  local token = (req:header("authorization") or ""):match("^Bearer (.+)$")
  local claims, err = http.crypto.jwt_verify(token or "", JWT_SECRET, { alg = "HS256", leeway = 30 })
  if not claims then return deny(res, 401, err) end
  if type(claims.sub) ~= "string" or not claims.sub:match("^[%w_-]+$") then
    return deny(res, 401, "bad subject")
  end
  return http.proxy(req, res, users, {
    on_error = json_error,
    request = function(up)
      up.path = "/users/" .. claims.sub
      for name in pairs(up.headers) do               -- the token stays at the gateway
        if name:lower() == "authorization" then up.headers[name] = nil end
      end
      up.headers["X-User"] = { claims.sub }
    end,
  })
end)

http.handle("GET /health", function(req, res) res:write("ok\n") end)
