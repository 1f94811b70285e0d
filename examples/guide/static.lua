-- docs/guide/static-files.md's first example, whole: the folder public/
-- beside this script served under /static/, compressed on the way out.
local http = require "moonhttp"

http.handle("GET /static/", http.files("public", {
  index = "index.html",   -- served for a directory request ("/static/docs/"); nil: none
  max_age = 3600,         -- Cache-Control: max-age=3600; nil: no Cache-Control
  precompressed = true,   -- send "name.br" / "name.gz" when Accept-Encoding prefers it
  dotfiles = false,       -- names starting with "." are 404 (true serves them)
}))
http.server{ compress = { types = { "text/*", "application/json", "application/javascript",
  "image/svg+xml" }, min_bytes = 1024, level = 1 } }
