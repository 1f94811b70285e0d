-- A small app for the deployment example. /healthz fails as soon as the
-- instance is asked to stop (http.stopping()), so with --shutdown-delay the
-- balancer's health check takes it out of rotation while it still serves.
local http = require "moonhttp"

http.handle("GET /healthz", function(req, res)
  if http.stopping() then
    res:status(503)
    res:write("stopping\n")
    return
  end
  res:write("ok\n")
end)

http.handle("GET /", function(req, res)
  res:write("hello from moonhttp\n")
end)

http.handle("GET /metrics", http.metrics_handler())
