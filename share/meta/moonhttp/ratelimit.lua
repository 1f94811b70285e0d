---@meta moonhttp.ratelimit
-- lua-language-server annotations for `require "moonhttp.ratelimit"` (docs/reference/ratelimit.md).

local ratelimit = {}

---@class moonhttp.RateLimitOptions
---@field limit integer units per window
---@field window number seconds
---@field burst? integer units a key may spend at once (`limit`)
---@field name? string the policy's name in the headers ("default")
---@field dict? string the shared dict that holds the keys ("ratelimit")
---@field redis? string|moonhttp.RedisOptions a Redis URL or `redis.connect`'s options
---@field timeout? number seconds a Redis check may take (0.5)
---@field fail? "open"|"closed" when Redis does not answer
---@field prefix? string where the keys live ("moonhttp:ratelimit:")

---@class moonhttp.RateLimitMiddlewareOptions: moonhttp.RateLimitOptions
---@field key? fun(req: moonhttp.Request): string
---@field cost? integer|fun(req: moonhttp.Request): integer
---@field on_refused? fun(req: moonhttp.Request, res: moonhttp.Response, r: moonhttp.RateLimitResult)

---A limiter: `limit` units per `window` seconds per key.
---@param opts moonhttp.RateLimitOptions
---@return moonhttp.RateLimiter
function ratelimit.new(opts) end

---Limits every request of the routes it wraps: 429 past the limit.
---@param opts moonhttp.RateLimitMiddlewareOptions
---@return function middleware
function ratelimit.middleware(opts) end

---@class moonhttp.RateLimitResult
---@field allowed boolean
---@field limit integer
---@field remaining integer
---@field reset number
---@field retry_after number?
---@field err string?

---@class moonhttp.RateLimiter
local Limiter = {}
---Counts `cost` units against `key`.
---@param key string
---@param cost? integer
---@return moonhttp.RateLimitResult
function Limiter:check(key, cost) end
---Sets `RateLimit-Policy`, `RateLimit` and, when refused, `Retry-After`.
---@param res moonhttp.Response
---@param r moonhttp.RateLimitResult
function Limiter:headers(res, r) end

return ratelimit
