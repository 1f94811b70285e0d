-- docs/reference/fetch.md's upload, whole: a PUT's body streamed to a
-- storage service as it arrives, that service's answer passed back.
local http = require "moonhttp"

local STORE = "http://127.0.0.1:9000/files/"

http.handle("PUT /files/{name}", function(req, res)
  local r, err = http.fetch(STORE .. req:pathvalue("name"),
    { method = "PUT", body = req, timeout = 0, read_timeout = 30 })
  if not r then return res:json({ error = err }, 502) end
  res:status(r.status)
  res:write(r:body())
end, { max_body = "10g" })
