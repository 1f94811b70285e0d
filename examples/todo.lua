-- A small JSON API: an in-memory todo list with groups, middleware, path
-- values, request bodies and custom 404/405 responses.
--   moonhttp examples/todo.lua
--   curl -X POST localhost:8080/api/todos -d '{"title":"write docs"}'
--   curl localhost:8080/api/todos/1
local http = require "moonhttp"
local json = http.json

-- The list lives in this Lua state, and each worker process has its own:
-- with several workers (the default is one per core) each would keep its own
-- list and hand out the same ids. So this example runs one worker. State
-- shared by workers belongs in a shared dict, Redis or a database.
http.server{ workers = 1 }

local todos, next_id = {}, 1

-- Logs every request with its duration; composed once at startup. http.clock()
-- is read fresh; http.now() is the loop's cached time and would show 0 ms.
http.use(function(next)
  return function(req, res)
    local t0 = http.clock()
    next(req, res)
    http.log("debug", req.method, req.path, string.format("%.3f ms", (http.clock() - t0) * 1000))
  end
end)

local api = http.group("/api")

-- Every API response is JSON, including errors.
local function fail(res, status, message)
  res:json({ error = message }, status)
end

local function read_todo(req, res)
  local body, err = req:body()
  if not body then return fail(res, 400, err) end
  local value = json.decode(body) -- nil, err on malformed JSON
  if type(value) ~= "table" or type(value.title) ~= "string" then
    return fail(res, 422, "expected a JSON object with a string title")
  end
  return value
end

api:handle("GET /todos", function(req, res)
  local list = {}
  for id = 1, next_id - 1 do
    if todos[id] then list[#list + 1] = todos[id] end
  end
  local done = req:arg("done")
  if done then
    local want = done == "true"
    local filtered = {}
    for _, t in ipairs(list) do
      if t.done == want then filtered[#filtered + 1] = t end
    end
    list = filtered
  end
  res:header("X-Total", tostring(#list))
  res:json(json.array(list)) -- marked as a list: [] when empty, not {}
end)

api:handle("POST /todos", function(req, res)
  local value = read_todo(req, res)
  if not value then return end
  local todo = { id = next_id, title = value.title, done = value.done == true }
  todos[next_id] = todo
  next_id = next_id + 1
  res:header("Location", "/api/todos/" .. todo.id)
  res:json(todo, 201)
end)

local function find(req, res)
  local id = tonumber(req:pathvalue("id"))
  local todo = id and todos[id]
  if not todo then fail(res, 404, "no todo " .. req:pathvalue("id")) end
  return todo
end

api:handle("GET /todos/{id}", function(req, res)
  local todo = find(req, res)
  if todo then res:json(todo) end
end)

api:handle("PUT /todos/{id}", function(req, res)
  local todo = find(req, res)
  if not todo then return end
  local value = read_todo(req, res)
  if not value then return end
  todo.title, todo.done = value.title, value.done == true
  res:json(todo)
end)

api:handle("DELETE /todos/{id}", function(req, res)
  local todo = find(req, res)
  if not todo then return end
  todos[todo.id] = nil
  res:status(204)
end)

http.not_found(function(req, res) fail(res, 404, "no route for " .. req.path) end)
http.method_not_allowed(function(req, res, allow) fail(res, 405, "allowed: " .. allow) end)
