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
---@return table
function session.cookie_store() end

---The data in a shared dict, the cookie holds an id (logout revokes it).
---@param dict moonhttp.SharedDict
---@return table
function session.shared_store(dict) end

---@class moonhttp.Session
---@field data table
local Session = {}
function Session:save() end
function Session:regenerate() end
function Session:destroy() end

return session
