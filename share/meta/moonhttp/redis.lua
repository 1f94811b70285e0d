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

---Several commands in one round trip: `fn(p)` calls them on `p` (`p:set(k, v)`).
---@param fn fun(p: table)
---@return table|nil replies
---@return string? err
function Redis:pipeline(fn) end

---A subscription on `...` channels.
---@param ... string
---@return table subscription
function Redis:subscribe(...) end

---Closes the connection (`r:keepalive()` parks it in the pool instead).
---@return true
function Redis:close() end

---As `subscribe`, for channel patterns.
---@param ... string
---@return any reply
---@return string? err
function Redis:psubscribe(...) end

---@param ... string
---@return any reply
---@return string? err
function Redis:unsubscribe(...) end

---The next message of a subscribed connection.
---@return string|nil kind "message" or "pmessage", then channel and payload (pattern, channel, payload)
---@return string ...
function Redis:read_message() end

---The seconds each command may take from now on.
---@param seconds number
function Redis:settimeout(seconds) end

---Parks the connection in the worker's pool; the client is closed after.
---@return true|nil ok
---@return string? err
function Redis:keepalive() end

---How often this connection came from the pool (0: new).
---@return integer
function Redis:reused() end

return redis
