-- Routes for the end-to-end router spec: every handler answers with the
-- pattern that matched and its path values.
local http = require "moonhttp"

local function show(req, res)
  local vals = {}
  for _, name in ipairs({ "id", "name", "rest", "a", "b" }) do
    local v = req:pathvalue(name)
    if v then vals[#vals + 1] = name .. "=" .. v end
  end
  res:write(req.pattern, #vals > 0 and (" " .. table.concat(vals, " ")) or "")
end

for _, p in ipairs({
  "/", "/index.html", "GET /static/", "/api/users", "/api/users/", "GET /api/users/{id}",
  "DELETE /api/users/{id}", "POST /api/users", "/api/items/{id}/details", "/files/{rest...}",
  "GET /exact/{$}", "/a/{a}/b/{b}", "GET example.com/", "GET example.com/api/users",
  "/dir/", "PUT /only-put", "GET /only-get", "/encoded/{name}", "POST /posts/{id}",
  "GET /posts/latest",
}) do
  http.handle(p, show)
end

local g = http.group("/v2")
g:use(function(next)
  return function(req, res) res:header("X-Group", "v2"); return next(req, res) end
end)
g:handle("GET /users/{id}", show)
local inner = g:group("/admin")
inner:use(function(next)
  return function(req, res) res:header("X-Inner", "yes"); return next(req, res) end
end)
inner:handle("GET /stats", show)

http.use(function(next)
  return function(req, res) res:header("X-Root", "1"); return next(req, res) end
end)
