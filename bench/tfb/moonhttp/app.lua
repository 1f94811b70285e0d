-- The TechEmpower test types (bench/tfb/README.md) and the seed's 12 Redis
-- routes, written the way a moonhttp user would: one pg.pool, one Redis
-- pool, res:json, moonhttp.template. Environment: PGHOST, PGPORT, PGUSER,
-- PGDATABASE (the database bench/tfb/setup.sql filled), REDIS_PORT, and
-- POOL (connections per worker to each, default 16).
local http = require "moonhttp"
local pg = require "moonhttp.pg"
local redis = require "moonhttp.redis"
local template = require "moonhttp.template"

local POOL = tonumber(os.getenv("POOL") or "16")
local db = pg.pool{
  host = os.getenv("PGHOST") or "127.0.0.1",
  port = tonumber(os.getenv("PGPORT") or "5432"),
  user = os.getenv("PGUSER") or "postgres",
  database = os.getenv("PGDATABASE") or "postgres",
  size = POOL,
}
local REDIS = { port = tonumber(os.getenv("REDIS_PORT") or "6379"), pool_size = POOL }
-- The seed's GETs share one connection and go out together (automatic
-- pipelining, docs/guide/databases.md); REDIS_AUTO_PIPELINE=0 gives each
-- request a pooled connection of its own, as before.
if os.getenv("REDIS_AUTO_PIPELINE") ~= "0" then REDIS.auto_pipeline = true end

local random = math.random
local ROWS = 10000

-- The requirements' rule for `queries` (and `count`): an integer clamped
-- to 1..500; anything that is not an integer counts as 1.
local function count(v)
  local n = math.tointeger(tonumber(v))
  if not n or n < 1 then return 1 end
  if n > 500 then return 500 end
  return n
end

local function fail(res, err)
  res:status(503)
  res:write(tostring(err))
end

http.handle("GET /json", function(req, res)
  res:json({ message = "Hello, World!" })
end)

http.handle("GET /plaintext", function(req, res)
  res:write("Hello, World!")  -- Content-Type: text/plain; charset=utf-8 by default
end)

local SELECT_WORLD = 'SELECT id, randomNumber AS "randomNumber" FROM World WHERE id = $1'

-- One World row by a random id, or nil, err.
local function random_world()
  local rows, err = db:query(SELECT_WORLD, random(1, ROWS))
  if not rows then return nil, err end
  if not rows[1] then return nil, "row missing" end
  return rows[1]
end

http.handle("GET /db", function(req, res)
  local w, err = random_world()
  if not w then return fail(res, err) end
  res:json(w)
end)

-- N World rows, each by its own query, the N queries sent at once on one
-- connection (db:pipeline; TechEmpower allows pipelining them): a list, or
-- nil, err.
local function random_worlds(n)
  local results, err = db:pipeline(function(p)
    for _ = 1, n do p:query(SELECT_WORLD, random(1, ROWS)) end
  end)
  if not results then return nil, err end
  local worlds = http.json.array(n)
  for i = 1, n do
    local rows = results[i]
    if getmetatable(rows) == pg.Error then return nil, rows end
    if not rows[1] then return nil, "row missing" end
    worlds[i] = rows[1]
  end
  return worlds
end

http.handle("GET /queries", function(req, res)
  local worlds, err = random_worlds(count(req:arg("queries")))
  if not worlds then return fail(res, err) end
  res:json(worlds)
end)

-- Each row is read on its own (as the requirements ask), then all of them
-- are written in one statement, ids in ascending order so that concurrent
-- requests lock rows in the same order and never deadlock. A row drawn
-- twice keeps one new number, so the answer is what the table holds.
local UPDATE_WORLDS = "UPDATE World SET randomNumber = v.r FROM unnest($1::int[], $2::int[]) AS v(id, r) "
  .. "WHERE World.id = v.id"

http.handle("GET /updates", function(req, res)
  local worlds, err = random_worlds(count(req:arg("queries")))
  if not worlds then return fail(res, err) end
  local new = {}
  for _, w in ipairs(worlds) do
    local n = new[w.id] or random(1, ROWS)
    new[w.id] = n
    w.randomNumber = n
  end
  local ids = {}
  for id in pairs(new) do ids[#ids + 1] = id end
  table.sort(ids)
  local nums = {}
  for i, id in ipairs(ids) do nums[i] = new[id] end
  local ok
  ok, err = db:query(UPDATE_WORLDS, ids, nums)
  if not ok then return fail(res, err) end
  res:json(worlds)
end)

local function by_message(a, b) return a.message < b.message end

http.handle("GET /fortunes", function(req, res)
  local rows, err = db:query("SELECT id, message FROM Fortune")
  if not rows then return fail(res, err) end
  rows[#rows + 1] = { id = 0, message = "Additional fortune added at request time." }
  table.sort(rows, by_message)
  res:header("Content-Type", "text/html; charset=utf-8")
  res:write(template.render("fortunes.html", { fortunes = rows }))
end)

-- Cached queries: CachedWorld is read into this worker's memory once it
-- serves; a request picks `count` random entries from it.
local cache = {}
http.on_start(function()
  local rows = assert(db:query('SELECT id, randomNumber AS "randomNumber" FROM CachedWorld'))
  for _, w in ipairs(rows) do cache[w.id] = w end
end)

http.handle("GET /cached-queries", function(req, res)
  local n = count(req:arg("count"))
  local worlds = http.json.array(n) -- room for the n rows at once
  for i = 1, n do
    local w = cache[random(ROWS)]
    if not w then return fail(res, "cache not loaded") end
    worlds[i] = w
  end
  res:json(worlds)
end)

-- The seed's 12 routes (shared/SEEDS.md, examples/api.lua), each reading
-- its name from Redis (one GET of key "tfb:<route>") into its JSON body.
local function seed_route(key, field, empty)
  return function(req, res)
    local r, err = redis.connect(REDIS)
    if not r then return fail(res, err) end
    local name
    name, err = r:get(key)
    if not name then return fail(res, err) end
    r:keepalive()
    if name == redis.null then return fail(res, "key missing") end
    res:json({ name = name, [field] = empty })
  end
end

local EMPTY_OBJECT = setmetatable({}, { __newindex = function() error("read-only") end })
http.handle("/api/users", seed_route("tfb:users", "users", http.json.empty_array))
http.handle("/api/users/", seed_route("tfb:user", "user", EMPTY_OBJECT))
http.handle("/api/orders", seed_route("tfb:orders", "orders", http.json.empty_array))
http.handle("/api/orders/", seed_route("tfb:order", "order", EMPTY_OBJECT))
for i = 0, 7 do
  http.handle("/api/items/" .. i, seed_route("tfb:item:" .. i, "item", EMPTY_OBJECT))
end
