-- The app the core specs talk to.
local http = require "moonhttp"

http.handle("GET /hello", function(req, res)
  res:header("Content-Type", "text/plain")
  res:write("hello ", "world")
end)

http.handle("/echo", function(req, res)
  local body, err = req:body()
  if not body then
    res:status(400)
    res:write("error: ", err)
    return
  end
  res:header("X-Method", req.method)
  res:header("X-Length", tostring(#body))
  res:write(body)
end)

http.handle("POST /stream-in", function(req, res)
  local n, chunks = 0, 0
  while true do
    local data, err = req:read(1000)
    if not data then
      if err then res:status(400); res:write(err) return end
      break
    end
    n = n + #data
    chunks = chunks + 1
  end
  res:write(string.format("%d bytes in %d reads", n, chunks))
end)

http.handle("GET /info", function(req, res)
  res:json({
    method = req.method, path = req.path, raw_path = req.raw_path, query = req.query,
    host = req.host, proto = req.proto, remote_addr = req.remote_addr, pattern = req.pattern,
    a = req:arg("a"), args = req:args(), ua = req:header("user-agent"),
    x = req:headers()["x-multi"],
  })
end)

http.handle("GET /users/{id}/files/{rest...}", function(req, res)
  res:write(req:pathvalue("id"), "|", req:pathvalue("rest"))
end)

http.handle("GET /error", function(req, res)
  error("boom in handler")
end)

http.handle("GET /error-after-write", function(req, res)
  res:write("partial")
  res:flush()
  http.sleep(0.05)
  error("late boom")
end)

http.handle("GET /sleep", function(req, res)
  local s = tonumber(req:arg("s") or "1")
  http.sleep(s)
  res:write("slept ", tostring(s))
end)

http.handle("GET /stream", function(req, res)
  res:write("first;")
  http.sleep(0.05)
  res:write("second;")
  http.sleep(0.05)
  res:write("third")
end)

http.handle("GET /big", function(req, res)
  local n = tonumber(req:arg("n") or "1000000")
  local chunk = string.rep("x", 8192)
  local sent = 0
  while sent < n do
    local k = math.min(#chunk, n - sent)
    assert(res:write(k == #chunk and chunk or chunk:sub(1, k)))
    sent = sent + k
  end
end)

http.handle("GET /status/{code}", function(req, res)
  res:status(tonumber(req:pathvalue("code")))
end)

http.handle("GET /close", function(req, res)
  res:header("Connection", "close")
  res:write("bye")
end)

http.handle("GET /redirect", function(req, res)
  res:redirect("/hello", 303)
end)

http.handle("GET /inject", function(req, res)
  local ok, err = pcall(res.header, res, "X-Bad", "a\r\nInjected: yes")
  res:write(ok and "accepted" or ("rejected: " .. tostring(err)))
end)

http.handle("GET /yield", function(req, res)
  coroutine.yield()
end)

local saved
http.handle("GET /save", function(req, res) saved = req; res:write("saved") end)
http.handle("GET /use-saved", function(req, res)
  local ok, err = pcall(function() return saved.method end)
  res:write(ok and "no error" or tostring(err))
end)

-- Handlers that mishandle a bad request body: the server answers 400 anyway.
http.handle("POST /body-ignore-error", function(req, res)
  req:body()
  res:write("handler wrote this")
end)
http.handle("POST /body-assert", function(req, res)
  res:write(assert(req:body()))
end)
http.handle("GET /x/", function(req, res) res:write("subtree") end)
http.handle("GET /{$}", function(req, res) res:write("root ", req.path) end)

-- The methods' self check (the handler's own req/res take a fast path in C).
local saved_res
http.handle("GET /self-check", function(req, res)
  local out = {}
  local function try(name, f, ...)
    local ok, err = pcall(f, ...)
    out[#out + 1] = name .. "=" .. (ok and "ok" or tostring(err))
  end
  try("res_as_req", req.header, res, "Host")
  try("req_as_res", res.header, req, "X-A", "1")
  try("file_as_res", res.write, io.stdout, "x")
  try("table_as_res", res.write, {}, "x")
  try("in_coroutine", coroutine.wrap(function() return res:header("X-Co", "1") end))
  try("saved_res", function() return saved_res and saved_res:header("X-Old", "1") end)
  saved_res = res
  res:write(table.concat(out, "\n"))
end)

-- res:write with several values: numbers become text; a bad value stages none of them.
http.handle("GET /write-values", function(req, res)
  local ok, err = pcall(res.write, res, "lost", {})
  res:write()
  res:write("a", 1, 2.5, "b")
  res:write(ok and "|no error" or ("|" .. tostring(err):match("string expected") or err))
end)
