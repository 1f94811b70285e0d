---@meta moonhttp.session
-- lua-language-server annotations for `require "moonhttp.session"` (docs/reference/session.md).

local session = {}

---@class moonhttp.SessionOptions
---@field secret string|string[] signs the cookie (the first signs, all verify)
---@field max_age? integer seconds (86400)
---@field cookie? { name?: string, path?: string, domain?: string, secure?: boolean, same_site?: string, http_only?: boolean }
---@field store? table `session.cookie_store()` (the default) or `session.shared_store(dict)`

---Loads and saves each request's session in a signed cookie.
---@param opts moonhttp.SessionOptions
---@return function middleware
function session.middleware(opts) end

---The request's session.
---@param req moonhttp.Request
---@return moonhttp.Session
function session.of(req) end

---The default store: the data in the cookie itself.
---@return moonhttp.SessionStore
function session.cookie_store() end

---The data in a shared dict, the cookie holds an id (logout revokes it).
---@param dict moonhttp.SharedDict
---@return moonhttp.SessionStore
function session.shared_store(dict) end

---@class moonhttp.Session
---@field data table
local Session = {}
function Session:save() end
function Session:regenerate() end
function Session:destroy() end

---What `store =` takes: these two stores, or one of yours.
---@class moonhttp.SessionStore
local SessionStore = {}
---The cookie's value for `data` until `expires`; `value` is the session's current one.
---@param data table
---@param expires number
---@param value? string
---@return string|nil value
---@return string? err
function SessionStore:encode(data, expires, value) end
---@param value string
---@return table|nil data
---@return number? expires
function SessionStore:decode(value) end
---Optional: a server-side store forgets the session.
---@param value string
function SessionStore:destroy(value) end

return session
