-- What each complete example of README.md and docs/ does, as its page says
-- it: one row per app block ("page NAME.lua") and per file a fragment names
-- ("examples/guide/x.lua"), read by spec/docs_spec.lua, which runs the
-- example through the binary and calls the row's check(app, stand, dir).
--
-- A row may ask for local stand-ins of what the page talks to:
--   redis = true        a redis-server (stand.redis.port)
--   pg = { db = sql }   a PostgreSQL cluster with these databases, owned by
--                       role app (password "secret"), each set up by its SQL
--   upstream = source   a moonhttp script serving what the page's upstream does
--   replace = { [text] = "...{upstream}..." }: the page's address, pointed at
--                       the stand-in ({upstream} is 127.0.0.1:port, {redis}
--                       and {pg} the ports)
--   files = { [path] = content }: files beside the app
--   prepare = function(dir): makes what else the app needs in its folder
--   start = { ... }     options for H.start (flags, no_listen, env)
local H = require "helper"
local assert = require "luassert"
local cjson = require "cjson"
local W = require "helpers.ws"

local E = {}

-- One request's answer, checked: status, and (when given) body and headers.
local function expect(res, status, body, headers)
  assert(res, "no answer")
  assert.equal(status, res.status, res.body)
  if type(body) == "table" then
    assert.same(body, cjson.decode(res.body))
  elseif body then
    assert.equal(body, res.body)
  end
  for k, v in pairs(headers or {}) do assert.equal(v, res.headers[k:lower()], k) end
  return res
end

-- Waits up to `t` seconds for `pattern` in the app's log; returns the log.
local function log_shows(app, pattern, t)
  local deadline = H.now() + (t or 5)
  repeat
    local text = app:logtext()
    if text:find(pattern) then return text end
    H.sleep(0.05)
  until H.now() > deadline
  error(("the log never showed %q:\n%s"):format(pattern, app:logtext()))
end

-- A login whose password hash is made at start, on the thread pool, while
-- the loop already serves: tried until the hash is there (up to 5 s).
local function login(app, body, status)
  local deadline, res = H.now() + 5, nil
  repeat
    res = app:request("POST", "/login", { ["Content-Type"] = "application/x-www-form-urlencoded" }, body)
    if res.status == status then return res end
    H.sleep(0.05)
  until H.now() > deadline
  return expect(res, status)
end

-- A WebSocket handshake on a new connection to `port` with more (or other)
-- headers; returns the connection and the response.
local function ws_open(port, path, headers)
  local c = H.connect(port)
  local all = { Upgrade = "websocket", Connection = "Upgrade", ["Sec-WebSocket-Key"] = "dGhlIHNhbXBsZSBub25jZQ==",
    ["Sec-WebSocket-Version"] = "13" }
  for k, v in pairs(headers or {}) do all[k] = v end
  local lines = { "GET " .. path .. " HTTP/1.1", "Host: localhost" }
  for k, v in pairs(all) do lines[#lines + 1] = k .. ": " .. v end
  assert(c:send(table.concat(lines, "\r\n") .. "\r\n\r\n"))
  local res = assert(c:read_response())
  return c, res
end

-- The next text frame's payload (pings skipped).
local function ws_text(c)
  while true do
    local f = assert(W.read_frame(c), "the connection ended")
    if f.op == 1 then return f.payload end
    assert(f.op == 9 or f.op == 10, "frame op " .. f.op)
  end
end

E["README.md users.lua"] = {
  check = function(app)
    expect(app:get("/api/users/7"), 200, { id = "7" })
  end,
}

E["README.md app.lua"] = {
  check = function(app)
    expect(app:get("/hello/ann"), 200, { hello = "ann", hits = 1 })
    expect(app:get("/hello/bob"), 200, { hello = "bob", hits = 2 })
    expect(app:request("POST", "/echo", {}, "hi there"), 200, "hi there", { ["content-type"] = "text/plain" })
  end,
}

E["docs/guide/databases.md orders.lua"] = {
  pg = { shop = [[
create table orders (id int primary key, total int not null, items jsonb, paid bool not null default false);
create table wallets (owner text primary key, balance int not null check (balance >= 0));
insert into orders values (1, 30, '["tea"]', false), (2, 500, null, false);
insert into wallets values ('ann', 100);
alter table orders owner to app; alter table wallets owner to app;
]] },
  replace = { ["port = 5432"] = "port = {pg}" },
  check = function(app, stand)
    expect(app:get("/orders/1"), 200, { id = 1, total = 30, items = { "tea" } })
    expect(app:get("/orders/9"), 404, { error = "not found" })
    expect(app:request("POST", "/orders/1/pay", { ["X-User"] = "ann" }), 204)
    -- 500 is more than ann has: the CHECK refuses it, everything rolls back
    local res = expect(app:request("POST", "/orders/2/pay", { ["X-User"] = "ann" }), 409)
    assert.matches("balance", res.body)
    expect(app:request("POST", "/orders/9/pay", { ["X-User"] = "ann" }), 409, { error = "no such order" })
    local text, ok = H.sh(("psql -X -A -t -h 127.0.0.1 -p %d -U postgres -d shop -c %s"):format(stand.pg.port,
      H.shell_quote("select string_agg(id || ':' || paid, ',' order by id) from orders")))
    assert(ok, text)
    assert.equal("1:true,2:false", (text:gsub("%s+$", "")))
  end,
}

E["docs/guide/databases.md prices.lua"] = {
  redis = true,
  upstream = [[
local http = require "moonhttp"
http.handle("GET /prices", function(req, res)
  local part = req:arg("part")
  res:header("Content-Type", "application/json")
  if part == "1" then res:write('{"tea":3,') elseif part == "2" then res:write('"milk":1}')
  else res:write('{"tea":2,"milk":1}') end
end)
]],
  replace = { ["127.0.0.1:9000"] = "{upstream}", ["port = 6379"] = "port = {redis}" },
  check = function(app, stand)
    -- warmed at start: the upstream's whole answer, from Redis
    expect(app:get("/prices"), 200, { tea = 2, milk = 1 }, { ["content-type"] = "application/json" })
    -- cold: the two halves, fetched at once
    H.must(("redis-cli -p %d del cache:prices"):format(stand.redis.port))
    expect(app:get("/prices"), 200, { tea = 3, milk = 1 })
    -- cold and the upstream gone: a thread's error is a 502, not a 200 body
    stand.upstream:stop()
    expect(app:get("/prices"), 502, { error = "prices unavailable" })
    log_shows(app, "prices: .*refused")
  end,
}

E["docs/guide/lua-libraries.md files.lua"] = {
  files = { ["notes.txt"] = "x", [".hidden"] = "x" },
  check = function(app)
    expect(app:get("/files"), 200, { "app.lua", "notes.txt" }, { ["content-type"] = "application/json" })
  end,
}

E["docs/guide/deployment.md app.lua"] = {
  check = function(app)
    expect(app:get("/healthz"), 200, "ok\n", { ["cache-control"] = "no-store" })
    local res = expect(app:get("/hello", { ["X-Request-Id"] = "lb-7f3a" }), 200)
    assert.same({ hello = "world", id = "lb-7f3a" }, cjson.decode(res.body))
    -- SIGTERM: for shutdown_delay (1 s) it serves on, /healthz failing
    local c = app:connect()
    app:signal("TERM")
    H.sleep(0.2)
    assert(c:send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"))
    expect(c:read_response(), 503, "stopping\n")
    c:close()
    assert.equal(0, app:wait(10))
  end,
}

-- An app server that answers what the proxy examples' upstream does: its
-- request back as JSON, /health, /users/me, and a cacheable /cached.
local ECHO_UPSTREAM = [[
local http = require "moonhttp"
local n = 0
http.handle("GET /health", function(req, res) res:write("ok") end)
http.handle("GET /users/me", function(req, res) res:json({ me = "ann", cookie = req:header("cookie") }) end)
http.handle("GET /api/cached", function(req, res)
  n = n + 1
  res:header("Cache-Control", "max-age=60")
  res:json({ n = n })
end)
http.handle("/", function(req, res)
  res:header("Server", "upstream/1")
  res:json({ method = req.method, path = req.path, gateway = req:header("x-gateway"), via = req:header("via") })
end)
]]

E["examples/guide/gateway.lua"] = {
  upstream = ECHO_UPSTREAM,
  replace = { ["127.0.0.1:9000"] = "{upstream}" },
  check = function(app)
    local res = expect(app:get("/api/orders/7"), 200)
    local seen = cjson.decode(res.body)
    assert.same({ "GET", "/orders/7", "1" }, { seen.method, seen.path, seen.gateway })
    assert.matches("gateway", seen.via)
    assert.not_equal("upstream/1", res.headers["server"]) -- the hook dropped it
  end,
}

E["examples/guide/upstreams.lua"] = {
  upstream = ECHO_UPSTREAM,
  replace = { ["10.0.0.1:8080"] = "{upstream}", ["10.0.0.2:8080"] = "{upstream}",
              ["api3.internal:8080"] = "{upstream}" },
  check = function(app)
    for _ = 1, 4 do
      local res = expect(app:get("/api/x"), 200)
      assert.equal("/api/x", cjson.decode(res.body).path)
    end
    expect(app:get("/me", { Cookie = "s=1" }), 200, { me = "ann", cookie = "s=1" })
  end,
}

E["examples/guide/cache.lua"] = {
  upstream = ECHO_UPSTREAM,
  replace = { ["127.0.0.1:9000"] = "{upstream}" },
  check = function(app)
    local res = expect(app:get("/api/cached"), 200, { n = 1 })
    assert.equal("MISS", res.headers["x-cache"])
    res = expect(app:get("/api/cached"), 200, { n = 1 })
    assert.equal("HIT", res.headers["x-cache"])
    expect(app:get("/api/other"), 200)
    assert.equal("MISS", app:get("/api/other").headers["x-cache"]) -- no Cache-Control: not kept
  end,
}

E["examples/guide/handlers.lua"] = {
  check = function(app)
    expect(app:get("/fail"), 500, { error = "the database is away" })
    log_shows(app, "the database is away")
    expect(app:get("/api/users/7"), 401)
    expect(app:get("/api/users/7", { Authorization = "Bearer x" }), 200, { id = "7" })
    -- the stream: an event every second; SIGTERM ends it without waiting
    -- for shutdown_timeout (the loop checks http.draining())
    local c = app:connect()
    assert(c:send("GET /clock HTTP/1.1\r\nHost: a\r\n\r\n"))
    assert.equal("HTTP/1.1 200 OK", c:read_line())
    repeat local l = c:read_line() until l == ""
    c:read_line() -- the chunk's size
    assert.matches("^data: %d%d:%d%d:%d%d\n", c:read_line())
    local t0 = H.now()
    app:signal("TERM")
    assert.equal(0, app:wait(10))
    assert.is_true(H.now() - t0 < 5, "the stop waited for the stream")
    c:close()
  end,
}

E["docs/guide/metrics.md app.lua"] = {
  upstream = [[
local http = require "moonhttp"
http.handle("POST /accounts", function(req, res) res:status(201) end)
]],
  replace = { ["127.0.0.1:9000"] = "{upstream}" },
  check = function(app, stand)
    expect(app:request("POST", "/signup/pro", {}, ""), 201)
    expect(app:request("POST", "/signup/pro", {}, ""), 201)
    stand.upstream:stop()
    expect(app:request("POST", "/signup/free", {}, ""), 502)
    local text = expect(app:get("/metrics"), 200).body
    assert.matches('app_signups_total{plan="pro"} 2', text, 1, true)
    assert.matches('app_signups_total{plan="free"} 1', text, 1, true)
    assert.matches('app_queue_jobs 3', text, 1, true)
    assert.matches('app_upstream_seconds_count{api="accounts"} 3', text, 1, true)
  end,
}

E["docs/guide/security.md app.lua"] = {
  check = function(app)
    expect(app:get("/hello/%3Cb%3E"), 200, "<p>hello &lt;b&gt;</p>")
    local form = { ["Content-Type"] = "application/x-www-form-urlencoded" }
    expect(app:request("POST", "/login", form, "password=guess"), 403, { error = "wrong password" })
    local res = expect(login(app, "password=correct%20horse", 200), 200, { ok = true })
    assert.matches("HttpOnly", res.headers["set-cookie"])
    -- another site's form post: refused before the handler runs
    form["Sec-Fetch-Site"] = "cross-site"
    expect(app:request("POST", "/login", form, "password=correct%20horse"), 403)
  end,
}

E["examples/guide/static.lua"] = {
  files = { ["public/index.html"] = "<h1>home</h1>\n", ["public/app.css"] = string.rep("body { margin: 0 }\n", 100),
            ["public/.env"] = "SECRET=x\n" },
  check = function(app)
    expect(app:get("/static/"), 200, "<h1>home</h1>\n", { ["cache-control"] = "max-age=3600" })
    local res = expect(app:get("/static/app.css", { ["Accept-Encoding"] = "gzip" }), 200)
    assert.equal("gzip", res.headers["content-encoding"])
    expect(app:get("/static/.env"), 404)
  end,
}

E["examples/guide/tls.lua"] = {
  prepare = function(dir)
    local certs = require "helpers.certs"
    certs.self_signed(dir, "example.com", "/CN=example.com", { san = "DNS:example.com" })
    certs.self_signed(dir, "api.example.org", "/CN=api.example.org", { san = "DNS:api.example.org" })
  end,
  replace = { ['":8080"'] = '"127.0.0.1:0"', ['":8443"'] = '"127.0.0.1:0"', ['"example.com.'] = '"{dir}/example.com.',
              ['"api.example.org.'] = '"{dir}/api.example.org.' },
  start = { no_listen = true },
  check = function(app, _, dir)
    local ports = {}
    for p in app:logtext():gmatch("listening on [^\n]* %(port (%d+)%)") do ports[#ports + 1] = p end
    expect(app:get("/"), 200, { https = false })
    for _, name in ipairs { "example.com", "api.example.org" } do
      local out = H.sh(("curl -s --cacert %s/%s.pem --resolve %s:%s:127.0.0.1 https://%s:%s/"):format(
        dir, name, name, ports[2], name, ports[2]))
      assert.same({ https = true, sni = name }, cjson.decode(out))
    end
  end,
}

E["docs/guide/web-apps.md token.lua"] = {
  check = function(app)
    local token = cjson.decode(expect(app:request("POST", "/token", {}, ""), 200).body).token
    expect(app:get("/me", { Authorization = "Bearer " .. token }), 200, { user = "ann" })
    expect(app:get("/me", { Authorization = "Bearer " .. token .. "x" }), 401)
    expect(app:get("/me"), 401)
  end,
}

E["docs/guide/web-apps.md app.lua"] = {
  files = { ["views/home.html"] = assert(H.read_file("examples/views/home.html")) },
  check = function(app)
    local form = { ["Content-Type"] = "application/x-www-form-urlencoded" }
    assert.matches("Please log in", expect(app:get("/"), 200).body)
    expect(app:request("POST", "/login", form, "user=ann&password=guess"), 403)
    local res = login(app, "user=ann&password=wonderland", 303)
    local cookie = res.headers["set-cookie"]:match("^([^;]+)")
    assert.matches("Hello, ann", expect(app:get("/", { Cookie = cookie }), 200).body)
    expect(app:request("POST", "/logout", { Cookie = cookie }, ""), 303)
    assert.matches("Please log in", expect(app:get("/", { Cookie = cookie }), 200).body)
  end,
}

E["docs/guide/web-apps.md links.lua"] = {
  files = {
    ["views/links.html"] = '{% layout("views/layout.html") %}\n<h1>{{ title }}</h1>\n<ul>\n'
      .. '{% for _, l in ipairs(links) do %}\n  {% include("views/link.html", { link = l }) %}\n{% end %}\n</ul>\n',
    ["views/layout.html"] = "<!doctype html>\n{{! content }}",
    ["views/link.html"] = '<li><a href="{{ link.url }}">{{ link.title }}</a></li>',
  },
  check = function(app)
    local res = expect(app:get("/links"), 200)
    assert.matches('<h1>Links</h1>', res.body, 1, true)
    assert.matches('<li><a href="https://www.lua.org/">Lua</a></li>', res.body, 1, true)
  end,
}

E["docs/guide/websocket.md echo.lua"] = {
  check = function(app)
    local c, res = ws_open(app.port, "/echo", { ["Sec-WebSocket-Protocol"] = "chat" })
    assert.equal(101, res.status)
    assert.equal("chat", res.headers["sec-websocket-protocol"])
    assert(c:send(W.frame(1, "hello")))
    assert.equal("hello", ws_text(c))
    c:close()
    local _, bad = ws_open(app.port, "/echo", { ["Sec-WebSocket-Version"] = "8" })
    assert.is_true(bad.status == 400 or bad.status == 426)
  end,
}

E["docs/guide/websocket.md ws_auth.lua"] = {
  start = { flags = { "--workers", "2" } },
  check = function(app)
    local form = { ["Content-Type"] = "application/x-www-form-urlencoded" }
    expect(app:request("POST", "/ws-ticket", {}, ""), 401, { error = "log in first" })
    local res = expect(app:request("POST", "/login", form, "user=ann"), 204)
    local cookie = res.headers["set-cookie"]:match("^([^;]+)")
    -- the cookie: from the site's own page, or a client that sends no Origin
    for _, origin in ipairs { "http://localhost:8080", false } do
      local c, r = ws_open(app.port, "/live", { Cookie = cookie, Origin = origin or nil })
      assert.equal(101, r.status)
      assert.equal("hello ann", ws_text(c))
      c:close()
    end
    -- another site's page with the user's cookie: refused
    local _, r = ws_open(app.port, "/live", { Cookie = cookie, Origin = "https://evil.example" })
    assert.equal(401, r.status)
    -- a ticket: once
    local ticket = cjson.decode(expect(app:request("POST", "/ws-ticket", { Cookie = cookie }, ""), 200).body).ticket
    local c
    c, r = ws_open(app.port, "/live?ticket=" .. ticket)
    assert.equal(101, r.status)
    assert.equal("hello ann", ws_text(c))
    c:close()
    _, r = ws_open(app.port, "/live?ticket=" .. ticket)
    assert.equal(401, r.status)
    _, r = ws_open(app.port, "/live?ticket=forged")
    assert.equal(401, r.status)
  end,
}

E["docs/guide/websocket.md rooms.lua"] = {
  start = { flags = { "--workers", "2" } },
  check = function(app)
    local a = ws_open(app.port, "/rooms/lobby")
    local b = ws_open(app.port, "/rooms/lobby")
    local h = ws_open(app.port, "/rooms/help")
    H.sleep(0.3) -- all subscribed
    assert(a:send(W.frame(1, "hi lobby")))
    assert.equal("hi lobby", ws_text(a))
    assert.equal("hi lobby", ws_text(b))
    assert(h:send(W.frame(1, "help me")))
    assert.equal("help me", ws_text(h))
    -- the help room's message never reached the lobby: the next one there is the lobby's own
    assert(b:send(W.frame(1, "still lobby")))
    assert.equal("still lobby", ws_text(a))
    for _, c in ipairs { a, b, h } do c:close() end
    local _, r = ws_open(app.port, "/rooms/anything")
    assert.equal(404, r.status)
  end,
}

E["docs/guide/websocket.md ticks.lua"] = {
  check = function(app)
    local res = expect(app:get("/ticks"), 200)
    assert.matches("^text/event%-stream", res.headers["content-type"])
    local ids = {}
    for id, data in res.body:gmatch("event: tick\nid: (%d)\ndata: (%d)\n\n") do ids[#ids + 1] = id .. data end
    assert.same({ "11", "22", "33" }, ids)
  end,
}

E["examples/guide/shared.lua"] = {
  start = { flags = { "--workers", "2" } },
  check = function(app)
    for i = 1, 4 do expect(app:request("POST", "/visits", {}, ""), 200, { visits = i }) end
    expect(app:request("POST", "/online/ada", {}, ""), 200, { online = true })
  end,
}

E["docs/guide/workers.md ratelimit.lua"] = {
  check = function(app)
    for _ = 1, 10 do expect(app:get("/anything"), 404) end
    local res = expect(app:get("/anything"), 429, "too many requests\n")
    assert.matches("^%d+$", res.headers["retry-after"])
  end,
}

E["docs/reference/ratelimit.md ratelimit.lua"] = {
  check = function(app)
    expect(app:get("/"), 200, "hello\n", { ["RateLimit"] = '"default";r=1;t=30' })
    expect(app:get("/"), 200, "hello\n", { ["RateLimit"] = '"default";r=0;t=30' })
    expect(app:get("/"), 429, "Too Many Requests\n", { ["RateLimit-Policy"] = '"default";q=2;w=60',
      ["RateLimit"] = '"default";r=0;t=30', ["Retry-After"] = "30" })
  end,
}

E["docs/reference/ratelimit.md uploads.lua"] = {
  check = function(app)
    expect(app:request("POST", "/upload/ann", {}, ""), 200, "stored, 6 units left\n")
    expect(app:request("POST", "/upload/ann", {}, ""), 200, "stored, 2 units left\n")
    expect(app:request("POST", "/upload/ann", {}, ""), 429, "over quota, retry in 720 s\n",
      { ["Retry-After"] = "720" })
    expect(app:request("POST", "/upload/bob", {}, ""), 200, "stored, 6 units left\n")
  end,
}

E["docs/guide/cluster.md limits.lua"] = {
  redis = true,
  replace = { ["redis://127.0.0.1:6379/0"] = "redis://127.0.0.1:{redis}/0" },
  start = { flags = { "--workers", "2" } },
  check = function(app)
    for i = 1, 10 do
      expect(app:get("/", { ["X-Api-Key"] = "k1" }), 200, "hello\n", { ["RateLimit"] = '"default";r=' .. (10 - i) .. ';t=1' })
    end
    expect(app:get("/", { ["X-Api-Key"] = "k1" }), 429, "Too Many Requests\n", { ["Retry-After"] = "1" })
    expect(app:get("/", { ["X-Api-Key"] = "k2" }), 200, "hello\n")
  end,
}

E["docs/guide/cluster.md lobby.lua"] = {
  redis = true,
  replace = { ["redis://127.0.0.1:6379/0"] = "redis://127.0.0.1:{redis}/0" },
  start = { flags = { "--workers", "2" } },
  check = function(app)
    local deadline = H.now() + 5
    while app:get("/matchmaker").body ~= "token 1\n" and H.now() < deadline do H.sleep(0.05) end
    expect(app:get("/matchmaker"), 200, "token 1\n")
    expect(app:get("/instances"), 200, "1 instance(s), this one listed\n")
  end,
}

E["docs/guide/cluster.md feed.lua"] = {
  redis = true,
  replace = { ["redis://127.0.0.1:6379/0"] = "redis://127.0.0.1:{redis}/0" },
  start = { flags = { "--workers", "2" } },
  check = function(app, stand)
    local waiting = H.connect(app.port)
    waiting:send("GET /news/next HTTP/1.1\r\nHost: x\r\n\r\n")
    -- subscribed in Redis: the instance's one subscription connection has "news"
    local deadline = H.now() + 5
    while not H.sh(("redis-cli -p %d PUBSUB CHANNELS '*news'"):format(stand.redis.port)):find("news")
      and H.now() < deadline do H.sleep(0.05) end
    expect(app:request("POST", "/news", {}, "rain at noon\n"), 200, "sent\n")
    local res = waiting:read_response()
    assert.equal(200, res.status)
    assert.equal("rain at noon\n", res.body)
    waiting:close()
  end,
}

E["docs/guide/workers.md chat.lua"] = {
  start = { flags = { "--workers", "2" } },
  check = function(app)
    local a = ws_open(app.port, "/chat")
    local b = ws_open(app.port, "/chat")
    H.sleep(0.2) -- both subscribed
    assert(a:send(W.frame(1, "hi all")))
    assert.equal("hi all", ws_text(a))
    assert.equal("hi all", ws_text(b))
    a:close()
    b:close()
  end,
}

E["docs/guide/workers.md whoami.lua"] = {
  check = function(app)
    expect(app:get("/whoami"), 200, "worker 1")
  end,
}

E["docs/guide/workers.md schema.lua"] = {
  pg = { app = "" },
  replace = { ["port = 5432"] = "port = {pg}" },
  start = { flags = { "--workers", "2" } },
  check = function(app, stand)
    H.sleep(0.5) -- the schema made
    H.must(("psql -X -q -h 127.0.0.1 -p %d -U postgres -d app -c %s"):format(stand.pg.port, H.shell_quote(
      "insert into links values ('https://a.test/', now() - interval '1 hour'), ('https://b.test/', now() + interval '1 hour')")))
    log_shows(app, "swept 1 expired links", 15) -- every 10 s
    local text, ok = H.sh(("psql -X -A -t -h 127.0.0.1 -p %d -U postgres -d app -c %s"):format(stand.pg.port,
      H.shell_quote("select count(*) from information_schema.columns where table_name = 'links'")))
    assert(ok, text)
    assert.equal("2", (text:gsub("%s+$", "")))
    local _, n = app:logtext():gsub("swept ", "")
    assert.equal(1, n) -- one worker of the two
  end,
}

E["examples/guide/news.lua"] = {
  redis = true,
  replace = { ["redis.connect{ timeout = 60 }"] = "redis.connect{ timeout = 60, port = {redis} }" },
  start = { flags = { "--workers", "2" } },
  check = function(app, stand)
    local c = app:connect()
    assert(c:send("GET /news HTTP/1.1\r\nHost: a\r\n\r\n"))
    assert.equal("HTTP/1.1 200 OK", c:read_line())
    repeat local l = c:read_line() until l == ""
    H.sleep(0.2)
    H.must(("redis-cli -p %d publish news 'rain at noon'"):format(stand.redis.port))
    local body = ""
    while not body:find("data: rain at noon", 1, true) do
      assert(c:fill(), "the event never came")
      body = c.buf
    end
    c:close()
  end,
}

E["examples/guide/status.lua"] = {
  upstream = [[
local http = require "moonhttp"
local healthy = true
http.handle("GET /status", function(req, res)
  if not healthy then return res:json({ state = "down" }, 503) end
  res:json({ state = "green" })
end)
http.handle("POST /sick", function(req, res) healthy = false end)
]],
  replace = { ["https://api.example.com"] = "http://{upstream}" },
  check = function(app, stand)
    expect(app:get("/status"), 200, { api = "green" })
    expect(H.request(stand.upstream.port, "POST", "/sick", {}, ""), 200)
    expect(app:get("/status"), 502, { error = "the API is unwell" })
  end,
}

E["examples/guide/store.lua"] = {
  upstream = [[
local http = require "moonhttp"
http.handle("PUT /files/{name}", function(req, res)
  local body = assert(req:body())
  res:json({ stored = req:pathvalue("name"), bytes = #body }, 201)
end)
]],
  replace = { ["127.0.0.1:9000"] = "{upstream}" },
  check = function(app, stand)
    expect(app:request("PUT", "/files/a.txt", {}, string.rep("x", 100000)), 201, { stored = "a.txt", bytes = 100000 })
    stand.upstream:stop()
    local res = expect(app:request("PUT", "/files/a.txt", {}, "x"), 502)
    assert.equal("refused", cjson.decode(res.body).error)
  end,
}

E["examples/guide/ws_client.lua"] = {
  upstream = [[
local http = require "moonhttp"
http.handle("GET /live", function(req, res)
  if req:header("authorization") ~= "Bearer t0ken" then return res:status(401) end
  local ws = assert(req:websocket{ protocols = { "chat.v2" } })
  for _ = 1, 2 do
    local msg = ws:receive()
    if not msg then return end
    ws:send("heard: " .. msg)
  end
end)
]],
  replace = { ["wss://chat.example"] = "ws://{upstream}" },
  check = function(app)
    expect(app:request("POST", "/say", {}, "one\ntwo\n"), 200, { "heard: one", "heard: two" })
  end,
}

E["examples/guide/ws_relay.lua"] = {
  upstream = [[
local http = require "moonhttp"
http.handle("GET /{path...}", function(req, res)
  local ws = assert(req:websocket())
  local msg = ws:receive()
  if msg then ws:send(req.path .. ": " .. msg) end
end)
]],
  replace = { ["127.0.0.1:9001"] = "{upstream}" },
  check = function(app, stand)
    for _, path in ipairs { "/chat", "/app/room" } do
      local c, res = ws_open(app.port, path)
      assert.equal(101, res.status)
      assert(c:send(W.frame(1, "hi")))
      assert.equal(path .. ": hi", ws_text(c))
      c:close()
    end
    stand.upstream:stop()
    local _, res = ws_open(app.port, "/chat")
    assert.equal(502, res.status)
    assert.equal("upstream unavailable\n", res.body)
  end,
}

-- Against pebble (spec/pebble_helper.lua): the names resolve to 127.0.0.1 in its DNS, so
-- example.com's certificate is issued by HTTP-01 on the plain listener and curl verifies it.
E["docs/guide/automatic-https.md https_app.lua"] = {
  pebble = true,
  replace = { ['":80"'] = '"127.0.0.1:{acme_http}"', ['":443"'] = '"127.0.0.1:{acme_tls}"',
              ['"https://acme-staging-v02.api.letsencrypt.org/directory"'] = '"{acme_directory}", ca = "{acme_ca}"',
              ['"/var/lib/moonhttp/acme"'] = '"{dir}/acme"' },
  start = { no_listen = true },
  check = function(app, stand)
    local ca = stand.pebble
    local root = ca:root_file()
    local cmd = ("curl -sS --max-time 5 --cacert %s --resolve www.example.com:%s:127.0.0.1 https://www.example.com:%s/")
      :format(root, stand.acme_tls, stand.acme_tls)
    local deadline, out, ok = H.now() + 20, nil, nil
    repeat
      out, ok = H.sh(cmd)
      if not ok then H.sleep(0.1) end
    until ok or H.now() > deadline
    assert(ok, "no verified HTTPS: " .. out .. "\n" .. app:logtext())
    assert.equal("hello over HTTPS\n", out)
    app.port = ca.http_port
    local status = cjson.decode(expect(app:get("/acme"), 200).body)
    assert.same({ "example.com", "www.example.com" }, status[1].names)
    assert.equal(0, status[1].failures)
  end,
}

return E
