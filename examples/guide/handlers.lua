-- docs/guide/handlers.md's fragments, whole: an error handler that answers
-- in JSON, a group of routes behind a middleware, and a stream that ends by
-- itself when a stop begins.
local http = require "moonhttp"

http.on_error(function(req, res, err)
  res:json({ error = type(err) == "table" and err.message or "internal error" }, 500)
end)

http.handle("GET /fail", function(req, res)
  error({ message = "the database is away" })
end)

local function show_user(req, res) res:json({ id = req:pathvalue("id") }) end

local api = http.group("/api")
api:use(function(next)
  return function(req, res)
    if not req:header("authorization") then res:status(401) return end
    return next(req, res)
  end
end)
api:handle("GET /users/{id}", show_user)        -- GET /api/users/{id}

http.handle("GET /clock", function(req, res)
  res:header("Content-Type", "text/event-stream")
  while not http.draining() do
    if not res:write("data: " .. os.date("!%H:%M:%S") .. "\n\n") then return end
    if not http.sleep(1) then return end
  end
end)
