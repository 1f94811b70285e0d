-- Routes the fuzzer drives: every request feature a handler can touch.
local http = require "moonhttp"
local function show(req, res)
  res:header("X-Pattern", req.pattern or "")
  res:write(req.method, req.path, req.raw_path, req.query, req.host or "", req.proto)
  res:write(tostring(req:arg("a")), tostring(req:pathvalue("id")), tostring(req:header("x")))
  local n = 0
  for k, v in pairs(req:args()) do n = n + #k + #v end
  for k, vs in pairs(req:headers()) do n = n + #k + #vs end
  res:write(tostring(n))
end
http.handle("/", show)
http.handle("GET /users/{id}", show)
http.handle("GET /files/{rest...}", show)
http.handle("GET /exact/{$}", show)
http.handle("POST /body", function(req, res)
  local b, err = req:body()
  res:write(b or err)
end)
http.handle("PUT /stream", function(req, res)
  while true do
    local d, err = req:read(7)
    if not d then res:write(tostring(err)) break end
  end
end)
http.handle("GET example.com/host", show)
http.handle("GET /json", function(req, res) res:json({ q = req.query }) end)
http.handle("GET /error", function() error("fuzz") end)
http.handle("GET /ws", function(req, res)
  local ws = req:websocket{ max_message = 4096, ping_interval = 0.5, idle_timeout = 1, close_timeout = 0.5 }
  if not ws then return end
  while true do
    local msg, kind = ws:receive()
    if not msg then break end
    ws:send(msg, kind)
  end
end)
