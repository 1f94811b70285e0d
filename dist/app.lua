-- /etc/moonhttp/app.lua: the app the moonhttp service runs (moonhttp(1)).
-- Edit it, check it with `moonhttp --check /etc/moonhttp/app.lua`, then
-- `systemctl reload moonhttp`: the new code is checked first and, on an
-- error, the old code keeps serving (the journal says file:line).
-- More examples: /usr/share/doc/moonhttp/examples/.
local http = require "moonhttp"

http.server {
  listen = "127.0.0.1:8080",
}

http.handle("GET /{$}", function(req, res)
  res:json { hello = "moonhttp", path = req.path }
end)

-- For a load balancer: 503 once a stop has begun (see shutdown_delay).
http.handle("GET /healthz", function(req, res)
  if http.stopping() then
    res:status(503)
    res:write("stopping\n")
  else
    res:write("ok\n")
  end
end)
