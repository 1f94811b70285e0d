-- A small JSON API: a todo list in a shared dict, with groups, middleware,
-- path values, request bodies and custom 404/405 responses.
--   moonhttp examples/todo.lua
--   curl -X POST localhost:8080/api/todos -d '{"title":"write docs"}'
--   curl localhost:8080/api/todos/1
local http = require "moonhttp"
local json = http.json

-- The list lives in a shared dict, which every worker process sees (by
-- default there is one worker per core, each with its own Lua state: a Lua
-- table here would be one list per worker, handing out the same ids). One
-- entry per item, "todo:<id>" -> JSON; "next" counts ids up atomically.
http.server{ shared = { todos = "1m" } }

local function store() return http.shared.todos end

local function load(id)
  local text = store():get("todo:" .. id)
  local todo = text and json.decode(text)
  if todo then todo.id = id end -- an integer again (JSON numbers decode as floats)
  return todo
end

local function save(todo)
  local ok, err = store():set("todo:" .. todo.id, json.encode(todo))
  return ok, err
end

-- Logs every request with its duration; composed once at startup. http.clock()
-- is read fresh; http.now() is the loop's cached time and would show 0 ms.
http.use(function(next)
  return function(req, res)
    local t0 = http.clock()
    next(req, res)
    http.log("debug", req.method, " ", req.path, string.format(" %.3f ms", (http.clock() - t0) * 1000))
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
  local ids = {}
  for _, key in ipairs(store():keys(0)) do
    local id = tonumber(key:match("^todo:(%d+)$"))
    if id then ids[#ids + 1] = id end
  end
  table.sort(ids)
  local list = {}
  for _, id in ipairs(ids) do
    list[#list + 1] = load(id) -- nil if deleted meanwhile
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
  local todo = { id = store():incr("next", 1, 0), title = value.title, done = value.done == true }
  local ok, err = save(todo)
  if not ok then return fail(res, 507, "cannot store the todo: " .. err) end
  res:header("Location", "/api/todos/" .. todo.id)
  res:json(todo, 201)
end)

local function find(req, res)
  local id = tonumber(req:pathvalue("id"))
  local todo = id and math.type(id) == "integer" and load(id)
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
  local ok, err = save(todo)
  if not ok then return fail(res, 507, "cannot store the todo: " .. err) end
  res:json(todo)
end)

api:handle("DELETE /todos/{id}", function(req, res)
  local todo = find(req, res)
  if not todo then return end
  store():delete("todo:" .. todo.id)
  res:status(204)
end)

http.not_found(function(req, res) fail(res, 404, "no route for " .. req.path) end)
http.method_not_allowed(function(req, res, allow) fail(res, 405, "allowed: " .. allow) end)
