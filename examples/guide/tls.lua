-- docs/guide/tls.md's first example, whole: HTTP on :8080 and HTTPS on
-- :8443 with two certificates, chosen by the name the client asks for.
local http = require "moonhttp"

http.server{
  listen = { ":8080", { addr = ":8443", tls = true } },   -- HTTP and HTTPS side by side
  tls = {
    { cert = "example.com.pem", key = "example.com.key" },  -- the default
    { cert = "api.example.org.pem", key = "api.example.org.key" },
  },
}

http.handle("GET /", function(req, res)
  local tls = req:tls()
  res:json({ https = tls ~= nil, sni = tls and tls.sni })
end)
