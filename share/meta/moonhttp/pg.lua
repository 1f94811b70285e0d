---@meta moonhttp.pg
-- lua-language-server annotations for `require "moonhttp.pg"` (docs/reference/pg.md).

local pg = {}

---SQL NULL (it is `http.json.null`).
---@type lightuserdata
pg.null = nil

---@class moonhttp.PgOptions
---@field host? string
---@field port? integer
---@field user? string
---@field password? string
---@field database? string
---@field size? integer connections in the pool
---@field [string] any the other options of docs/reference/pg.md

---A pool of connections, opened on first use.
---@param opts moonhttp.PgOptions
---@return moonhttp.PgPool
function pg.pool(opts) end

---A value to send as JSON.
---@param v any
---@return table
function pg.json(v) end

---Bytes to send as `bytea`.
---@param s string
---@return table
function pg.bytea(s) end

---@class moonhttp.PgPool
local Pool = {}

---Runs `sql` with `...` sent as parameters: the rows, or `nil, err`.
---@param sql string
---@param ... any
---@return table|nil rows
---@return string|table? err
function Pool:query(sql, ...) end

---Runs `fn(tx)` in a transaction: committed when it returns, rolled back when it raises.
---@param fn fun(tx: moonhttp.PgPool): ...
---@return any ...
function Pool:transaction(fn) end

---LISTEN on a channel.
---@param channel string
---@param fn? function
---@return any
function Pool:listen(channel, fn) end

---Several statements, no parameters.
---@param sql string
---@return table|nil result
---@return string|table? err
function Pool:exec(sql) end

---Queries sent at once on one connection.
---@param fn function
---@return any ...
function Pool:pipeline(fn) end

---A connection pinned to the caller until `:release()` (or `<close>`).
---@return table|nil conn
---@return string|table? err
function Pool:acquire() end

---The pool's counters.
---@return table
function Pool:stats() end

return pg
