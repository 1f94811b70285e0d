-- A streamed request body sent over a fetch's exchange (core.fetch or
-- core.proxy_fetch given a length or true): http.fetch's `body = function`
-- or `body = req`, and http.proxy's plain path. One piece in flight at a
-- time (core.fetch_send waits for the socket), so memory stays bounded
-- whatever the body's size. An answer that comes before the body is all
-- sent (413, 401) ends the sending and is the response (fetch_send's
-- false), as nginx and Go's ReverseProxy relay it.
local core = require "moonhttp.core"

local M = {}

-- src() → a string piece, "" to skip, or nil (the end; nil, err: the source
-- failed). length: the declared Content-Length, or nil for chunked. Returns
-- the response (its head read) or nil, kind, detail; resp is closed on
-- failure. A piece that is not a string raises at `level` (for the caller).
function M.send(resp, src, length, level)
  local sent = 0
  while true do
    local piece, perr = src()
    if piece == nil then
      if perr ~= nil then resp:close() return nil, "body", tostring(perr) end
      break
    end
    if type(piece) ~= "string" then
      resp:close()
      error("http.fetch: a body function must return strings (or nil at the end)", level + 1)
    end
    if #piece > 0 then
      sent = sent + #piece
      if length and sent > length then
        resp:close()
        return nil, "body", "body longer than its Content-Length"
      end
      local ok, err, detail = core.fetch_send(resp, length and piece or string.format("%x\r\n%s\r\n", #piece, piece))
      if ok == false then return core.fetch_head(resp) end
      if not ok then return nil, err, detail end
    end
  end
  if length and sent < length then
    resp:close()
    return nil, "body", "body shorter than its Content-Length"
  end
  local ok, err, detail = core.fetch_send(resp, length and "" or "0\r\n\r\n", true)
  if ok == nil then return nil, err, detail end
  return core.fetch_head(resp)
end

return M
