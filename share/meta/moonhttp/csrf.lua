---@meta moonhttp.csrf
-- lua-language-server annotations for `require "moonhttp.csrf"` (docs/reference/csrf.md).

local csrf = {}

---@class moonhttp.CsrfOptions
---@field trusted_origins? string[]
---@field exempt? string[]|fun(req: moonhttp.Request): boolean
---@field token? boolean

---Refuses cross-site unsafe requests.
---@param opts? moonhttp.CsrfOptions
---@return function middleware
function csrf.middleware(opts) end

---The request's form token.
---@param req moonhttp.Request
---@return string
function csrf.token(req) end

return csrf
