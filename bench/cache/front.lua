-- bench/cache_callgrind.sh: moonhttp.cache in front of http.proxy. CACHE_LUA names a
-- cache.lua to load instead of the embedded module (before/after from one binary);
-- main's has no lock_timeout option: leave LOCK_TIMEOUT unset with it.
local http = require "moonhttp"
http.server{ shared = { cache = "64m" } }
local file = os.getenv("CACHE_LUA")
local cache_mod = file and file ~= "" and dofile(file) or require "moonhttp.cache"
-- LOCK_TIMEOUT=0: no collapsing (the lock's share of a miss)
local lock = os.getenv("LOCK_TIMEOUT")
local cache = cache_mod.new{ dict = http.shared.cache,
  lock_timeout = lock and lock ~= "" and tonumber(lock) or nil }
local UP = "http://127.0.0.1:" .. os.getenv("UP_PORT")
http.handle("/", cache:wrap(function(req, res) return http.proxy(req, res, UP) end))
