---@meta moonhttp.presence
-- lua-language-server annotations for `require "moonhttp.presence"` (docs/reference/presence.md).

local presence = {}

---@class moonhttp.PresenceOptions
---@field dict string the shared dict that holds the rooms
---@field prefix? string where its keys live ("presence")

---@class moonhttp.Presence
local Presence = {}

---Rooms kept in a shared dict; members vanish with the worker that joined them.
---@param opts moonhttp.PresenceOptions
---@return moonhttp.Presence
function presence.new(opts) end

---`member` is in `room` until `p:leave` or the end of the worker that joined it.
---@param room string
---@param member string
---@param data? string|true
---@return true|nil ok
---@return string? err
function Presence:join(room, member, data) end
---@param room string
---@param member string
---@return true
function Presence:leave(room, member) end
---@param room string
---@return table<string, string|true>
function Presence:list(room) end
---@param room string
---@return integer
function Presence:count(room) end

return presence
