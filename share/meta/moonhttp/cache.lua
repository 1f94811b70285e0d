---@meta moonhttp.cache
-- lua-language-server annotations for `require "moonhttp.cache"` (docs/reference/cache.md).

local cache = {}

---@class moonhttp.CacheOptions
---@field dict moonhttp.SharedDict the shared dict the entries go in
---@field key_headers? string[] request headers that are part of the key
---@field default_ttl? number seconds a response without `s-maxage`/`max-age` is kept (0)
---@field statuses? integer[] the statuses that may be stored
---@field max_entry? integer|string the largest body kept (1m)
---@field stale_if_error? number seconds past expiry an entry still answers when the handler fails
---@field stale_while_revalidate? number seconds past expiry an entry is answered while it is fetched again
---@field revalidate? number seconds past expiry an entry with a validator is kept (600)
---@field lock_timeout? number seconds a request waits for another's fetch of its key (5)
---@field status_header? string|false the header that says HIT, MISS, ... ("X-Cache")

---A cache whose entries live in a shared dict.
---@param opts moonhttp.CacheOptions
---@return moonhttp.Cache
function cache.new(opts) end

---`c:wrap(handler)` as a function.
---@param c moonhttp.Cache
---@param handler moonhttp.Handler
---@return moonhttp.Handler
function cache.wrap(c, handler) end

---`c:serve(req, res, handler, ...)` as a function.
---@param c moonhttp.Cache
---@param req moonhttp.Request
---@param res moonhttp.Response
---@param handler function
---@param ... any
---@return any ...
function cache.serve(c, req, res, handler, ...) end

---@class moonhttp.Cache
local Cache = {}
---A handler with the cache in front.
---@param handler moonhttp.Handler
---@return moonhttp.Handler
function Cache:wrap(handler) end
---The cache inside a handler of your own; returns what `handler` returned.
---@param req moonhttp.Request
---@param res moonhttp.Response
---@param handler function
---@param ... any
---@return any ...
function Cache:serve(req, res, handler, ...) end

return cache
