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

return presence
