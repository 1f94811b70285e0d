-- A team link board: what issue 29's new user built, and what bench/soak.sh
-- runs for minutes under load and faults. Links live in PostgreSQL, votes in
-- Redis, counters in a shared dict; new links go out on a WebSocket, a
-- live feed on server-sent events; a timer refreshes the link count; the
-- page and its script are static files. Serve it over HTTPS for HTTP/2:
--   moonhttp examples/linkboard.lua --listen :8080 --listen https://:8443 \
--     --tls-cert cert.pem --tls-key key.pem
-- Environment: LINKBOARD_PG and LINKBOARD_REDIS (host:port, defaults
-- 127.0.0.1:5432 and 127.0.0.1:6379), LINKBOARD_PG_USER and LINKBOARD_PG_DB
-- (postgres), LINKBOARD_IDLE (seconds a pooled connection to either may
-- stay idle, 60), LINKBOARD_SECRET (the session key, 32 bytes or more).
local http = require "moonhttp"
local pg = require "moonhttp.pg"
local redis = require "moonhttp.redis"
local session = require "moonhttp.session"

http.server{ shared = { board = "1m" } }

local function host_port(var, default_port)
  local v = os.getenv(var) or ("127.0.0.1:" .. default_port)
  local host, port = v:match("^(.*):(%d+)$")
  if not host then error(var .. " must be host:port, not " .. v) end
  return host, tonumber(port)
end

local IDLE = tonumber(os.getenv("LINKBOARD_IDLE") or "60")
local PG_HOST, PG_PORT = host_port("LINKBOARD_PG", 5432)
local REDIS_HOST, REDIS_PORT = host_port("LINKBOARD_REDIS", 6379)
local SECRET = os.getenv("LINKBOARD_SECRET") or "change me: a secret of at least 32 bytes"

local db = pg.pool{ host = PG_HOST, port = PG_PORT, user = os.getenv("LINKBOARD_PG_USER") or "postgres",
                    database = os.getenv("LINKBOARD_PG_DB") or "postgres", size = 5,
                    idle_timeout = IDLE, connect_timeout = 3, query_timeout = 5,
                    on_notice = function(n)
                      -- "relation already exists, skipping" from the schema below
                      if n.code ~= "42P07" then http.log("info", tostring(n)) end
                    end }
local board = http.shared.board

local function votes()
  return redis.connect{ host = REDIS_HOST, port = REDIS_PORT, idle_timeout = IDLE, timeout = 3 }
end

http.use(session.middleware{ secret = SECRET, max_age = 86400 })
http.use(function(next)
  return function(req, res)
    board:incr("requests", 1, 0)
    next(req, res)
  end
end)

-- The schema, made by whichever worker comes first (the lock serializes them).
http.on_start(function()
  local ok, err = db:transaction(function(tx)
    local r, e = tx:query("select pg_advisory_xact_lock(29)")
    if not r then return nil, e end
    return tx:query([[create table if not exists links (
      id text primary key, url text not null, title text not null, author text not null,
      created timestamptz not null default now())]])
  end)
  if not ok then http.log("warn", "links schema: " .. tostring(err)) end
end)

-- Every 5 s each worker refreshes the link count the feed shows.
http.on_start(function()
  http.every(5, function()
    board:incr("ticks", 1, 0)
    local rows, err = db:query("select count(*) as n from links")
    if not rows then return http.log("warn", "link count: " .. tostring(err)) end
    board:set("links", rows[1].n)
  end)
end)

http.handle("GET /static/", http.files("linkboard", { index = "index.html", max_age = 60 }))
http.handle("GET /{$}", function(req, res) res:redirect("/static/", 302) end)
http.handle("GET /health", function(req, res)
  res:header("Content-Type", "text/plain")
  res:write("ok\n")
end)

-- A name is enough on a team board: no passwords.
http.handle("POST /login", function(req, res)
  local form, err = req:form()
  if not form then return res:json({ error = err }, 400) end
  if not form.name or not form.name:match("^[%w_%-]+$") or #form.name > 32 then
    return res:json({ error = "a name is letters, digits, _ and -, at most 32" }, 400)
  end
  local s = session.of(req)
  s.data.user = form.name
  s:save()
  res:json({ user = form.name })
end)

http.handle("GET /links", function(req, res)
  local rows, err = db:query([[select id, url, title, author, extract(epoch from created)::int8 as created
    from links order by created desc limit 20]])
  if not rows then return res:json({ error = tostring(err) }, 503) end
  -- rows also carries .affected and .columns: copy the list alone, so it is a JSON array
  local links = http.json.array()
  for i, row in ipairs(rows) do links[i] = row end
  res:json({ links = links })
end)

-- Sockets of this worker that want new links (a WebSocket per open page).
local watchers = {}

-- PUT, not POST: the client names the link, so sending it twice is harmless.
http.handle("PUT /links/{id}", function(req, res)
  local user = session.of(req).data.user
  if not user then return res:json({ error = "log in first" }, 401) end
  local id = req:pathvalue("id")
  local link, err = req:json()
  if not link then return res:json({ error = err }, 400) end
  if type(link.url) ~= "string" or not link.url:match("^https?://") or #link.url > 2000 then
    return res:json({ error = "url must be an http(s) URL" }, 400)
  end
  local title = type(link.title) == "string" and link.title:sub(1, 200) or link.url
  local rows, qerr = db:query([[insert into links (id, url, title, author) values ($1, $2, $3, $4)
    on conflict (id) do update set url = excluded.url, title = excluded.title returning id]],
    id, link.url, title, user)
  if not rows then return res:json({ error = tostring(qerr) }, 503) end
  for ws in pairs(watchers) do ws:send(http.json.encode({ link = id, title = title })) end
  res:json({ id = id })
end)

http.handle("POST /links/{id}/vote", function(req, res)
  local r, err = votes()
  if not r then return res:json({ error = err }, 503) end
  local n, verr = r:incr("votes:" .. req:pathvalue("id"))
  if not n then
    r:close()
    return res:json({ error = verr }, 503)
  end
  r:keepalive()
  res:json({ votes = n })
end)

http.handle("GET /stats", function(req, res)
  res:json({ requests = board:get("requests"), ticks = board:get("ticks"), links = board:get("links") })
end)

-- New links as they come, and "ping N" answered "pong N" (the page's heartbeat).
http.handle("GET /ws", function(req, res)
  local ws = req:websocket{ max_message = "4k" }
  if not ws then return end
  watchers[ws] = true
  while true do
    local text = ws:receive()
    if not text then break end
    local n = text:match("^ping (%d+)$")
    if n then ws:send("pong " .. n) end
  end
  watchers[ws] = nil
end)

-- The live counters, every `every` seconds (1); ends on its own on a reload or stop.
http.handle("GET /events", function(req, res)
  local every = math.max(tonumber(req:arg("every")) or 1, 0.2)
  local n = tonumber(req:header("Last-Event-ID")) or 0
  local sse = res:sse()
  while true do
    n = n + 1
    local data = http.json.encode({ links = board:get("links") or 0, ticks = board:get("ticks") or 0 })
    if not sse:send{ event = "stats", id = n, data = data } then return end
    if not http.sleep(every) then return end
  end
end)
