-- The 1 GiB upload bench: every file part is streamed to UPLOAD_PATH.
local http = require "moonhttp"
http.server{ max_body_bytes = 2 << 30 }
http.handle("POST /upload", function(req, res)
  res:set_write_timeout(0) -- the response comes after the whole upload
  local parts, err = req:multipart()
  if not parts then return res:json({ error = err }, 400) end
  local total = 0
  for part in parts do
    total = total + assert(part:save(os.getenv("UPLOAD_PATH") or "/tmp/mh-bench-upload"))
  end
  if parts.err then return res:json({ error = parts.err }, 400) end
  res:json({ bytes = total })
end)
