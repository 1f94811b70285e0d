-- Hop-by-hop header fields (RFC 9110 §7.6.1), for the two places that pass
-- a message on to another connection: http.proxy (proxy.lua) and the
-- upgrade relay (relay.lua). A proxy never forwards these, nor the fields
-- a message's own Connection header names. src/http/hop.c is the same policy
-- for http.proxy's C path (src/lua/lua_proxy.c): change both together.
local M = {}

-- The standard ones and the older ones still seen (Keep-Alive, Proxy-Connection).
M.NAMES = { connection = true, ["keep-alive"] = true, ["proxy-connection"] = true, te = true,
  trailer = true, ["transfer-encoding"] = true, upgrade = true,
  ["proxy-authenticate"] = true, ["proxy-authorization"] = true }

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
