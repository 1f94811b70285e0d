-- Hop-by-hop header fields (RFC 9110 §7.6.1), for the two places that pass
-- a message on to another connection: http.proxy (proxy.lua) and the
-- upgrade relay (relay.lua). A proxy never forwards these, nor the fields
-- a message's own Connection header names. http.proxy's C path applies the
-- same policy (src/http/hop.c), whose list of names this is.
local core = require "moonhttp.core"

local M = {}

-- name (lowercase) -> true: the standard ones and the older ones still seen
-- (Keep-Alive, Proxy-Connection). Read only: shared by every caller.
M.NAMES = core.hop_names

local DROP_MT = { __index = M.NAMES }

-- The lowercased names to drop from a header list { name1, value1, ... }:
-- M.NAMES and the tokens of its Connection fields. Read only: without a
-- Connection field it is M.NAMES itself (no table made per message).
function M.dropped(list)
  local drop
  for i = 1, #list, 2 do
    local name = list[i]
    -- most names are not 10 bytes long: skip lowering them
    if #name == 10 and name:lower() == "connection" then
      drop = drop or setmetatable({}, DROP_MT)
      for token in list[i + 1]:gmatch("[^,%s]+") do drop[token:lower()] = true end
    end
  end
  return drop or M.NAMES
end

return M
