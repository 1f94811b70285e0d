---@meta moonhttp.redis
-- lua-language-server annotations for `require "moonhttp.redis"` (docs/reference/redis.md).

local redis = {}

---A nil inside an array reply.
---@type lightuserdata
redis.null = nil

---The metatable of an error reply inside a pipeline's or a transaction's results (`v.err` is the message).
---@type table
redis.ErrorReply = {}

---@class moonhttp.RedisOptions
---@field host? string
---@field port? integer
---@field path? string a Unix socket
---@field password? string
---@field db? integer
---@field timeout? number
---@field pool_size? integer
---@field tls? boolean|table
---@field auto_pipeline? boolean

---A connection from the worker's pool (past `pool_size`, it waits).
---@param opts moonhttp.RedisOptions|string
---@return moonhttp.Redis|nil r
---@return string? err
function redis.connect(opts) end

---`redis://[:password@]host[:port][/db]` (`rediss://`: TLS) as `redis.connect`'s options table, or `nil, err`.
---@param url string
---@return moonhttp.RedisOptions|nil opts
---@return string? err
function redis.parse_url(url) end

---The RESP bytes of one command.
---@param ... string|number
---@return string
function redis.encode(...) end

---Reads one reply from a socket: the value, or `nil, msg, false` for an error reply, `nil, err, true` when the connection broke.
---@param sock moonhttp.Socket
---@param line? string
---@return any value
---@return string? err
---@return boolean? broken
function redis.read_reply(sock, line) end

---@class moonhttp.Redis
local Redis = {}

---One command: the reply, or `nil, err`.
---@param ... string|number
---@return any reply
---@return string? err
function Redis:call(...) end

---Several commands in one round trip.
---@return table pipeline
function Redis:pipeline() end

---A subscription on `...` channels.
---@param ... string
---@return table subscription
function Redis:subscribe(...) end

---Gives the connection back to the pool.
function Redis:close() end

return redis
