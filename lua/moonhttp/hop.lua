-- Hop-by-hop header fields (RFC 9110 §7.6.1), for the two places that pass
-- a message on to another connection: http.proxy (proxy.lua) and the
-- upgrade relay (relay.lua). A proxy never forwards these, nor the fields
-- a message's own Connection header names.
local M = {}

-- The standard ones and the older ones still seen (Keep-Alive, Proxy-Connection).
M.NAMES = { connection = true, ["keep-alive"] = true, ["proxy-connection"] = true, te = true,
  trailer = true, ["transfer-encoding"] = true, upgrade = true,
  ["proxy-authenticate"] = true, ["proxy-authorization"] = true }

-- The lowercased names to drop from a header list { name1, value1, ... }:
-- M.NAMES and the tokens of its Connection fields.
function M.dropped(list)
  local drop = setmetatable({}, { __index = M.NAMES })
  for i = 1, #list, 2 do
    if list[i]:lower() == "connection" then
      for token in list[i + 1]:gmatch("[^,%s]+") do drop[token:lower()] = true end
    end
  end
  return drop
end

return M
