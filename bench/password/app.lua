-- bench/password.sh's server: a health route, and a login that verifies an
-- Argon2id hash at the default parameters (made once at start).
local http = require "moonhttp"
local stored
http.on_start(function() stored = assert(http.crypto.password_hash("correct horse")) end)
http.handle("GET /health", function(req, res) res:write("ok") end)
http.handle("POST /login", function(req, res)
  local ok = http.crypto.password_verify("correct horse", stored)
  res:write(ok and "welcome" or "no")
end)
