-- A small web app: a login that keeps a server-side session, a form, a
-- file upload streamed to disk, a WebSocket chat, and a live feed of
-- server-sent events. Cross-site form posts are refused (moonhttp.csrf).
--   moonhttp examples/webapp.lua    then open http://localhost:8080/
-- Its spec (spec/webapp_example_spec.lua) drives it with moonhttp.test.
local http = require "moonhttp"
local session = require "moonhttp.session"
local template = require "moonhttp.template"
local csrf = require "moonhttp.csrf"

http.server{ max_body_bytes = 64 << 20, shared = { sessions = "4m" } }

local SECRET = os.getenv("WEBAPP_SECRET") or "change me: a secret of at least 32 bytes"
local UPLOADS = os.getenv("WEBAPP_UPLOADS") or "/tmp"
-- Passwords are kept only as Argon2id hashes (a real app stores them in its
-- database): made with http.crypto.password_hash("wonderland") and ("builder").
local USERS = {
  ann = "$argon2id$v=19$m=19456,t=2,p=1$0xasTlxr2X5hwUXbkUAaSg$oUgSBhM/bnjGAl/Zgut33spgYJzKMWvli+SyRrchR6A",
  bob = "$argon2id$v=19$m=19456,t=2,p=1$D/9S1FOpEmcff4hC1TyM+Q$MjwIYCgy6jpRTIC5NsJHSpKNAYDhMyQpWhXLdH3Au5c",
}
-- Unknown names are checked against a hash too, so the answer takes as long
-- for a name that exists as for one that does not.
local NOBODY = "$argon2id$v=19$m=19456,t=2,p=1$rJITCym6uG8LcBxqmWoSpg$vEgxXd2Skckga1ttu0IPC3tWvsNgUp0lFOIMBlncG5k"

-- Sessions live in a shared dict, the cookie carries only a signed id: logout
-- and a new id at login really end the old session.
http.use(session.middleware{ secret = SECRET, max_age = 3600,
                             store = session.shared_store(http.shared.sessions) })
-- Browsers say where a request comes from (Sec-Fetch-Site, Origin): another
-- site's form that posts here gets a 403 before any handler runs.
http.use(csrf.middleware{})

local function user_of(req) return session.of(req).data.user end

http.handle("GET /{$}", function(req, res)
  res:header("Content-Type", "text/html; charset=utf-8")
  -- views/ sits next to this script; {{ user }} is escaped, so a name is text, never markup
  res:write(template.render("views/home.html", { user = user_of(req) }))
end)

http.handle("POST /login", function(req, res)
  local form, err = req:form()
  if not form then return res:json({ error = err }, 400) end
  local s = session.of(req)
  -- The hash is checked on the worker's thread pool: other requests go on meanwhile.
  local known = form.user and USERS[form.user]
  local ok = http.crypto.password_verify(form.password or "", known or NOBODY)
  if not (known and ok) then
    return res:json({ error = "wrong name or password" }, 403)
  end
  s.data.user = form.user
  -- a new session id at login: an id planted in the browser before it is worth nothing
  assert(s:regenerate())
  res:redirect("/", 303)
end)

http.handle("POST /logout", function(req, res)
  session.of(req):destroy()
  res:redirect("/", 303)
end)

http.handle("GET /me", function(req, res)
  local user = user_of(req)
  if not user then return res:json({ error = "not logged in" }, 401) end
  res:json({ user = user })
end)

-- Files go to UPLOADS under a name we choose: never trust part.filename as a path.
http.handle("POST /upload", function(req, res)
  if not user_of(req) then return res:json({ error = "not logged in" }, 401) end
  local parts, err = req:multipart()
  if not parts then return res:json({ error = err }, 400) end
  local saved = {}
  for part in parts do
    if part.filename then
      local path = UPLOADS .. "/upload-" .. http.hex.encode(http.crypto.random(8))
      local size, serr = part:save(path)
      if not size then return res:json({ error = serr }, 400) end
      saved[#saved + 1] = { field = part.name, filename = part.filename, size = size,
                            sha256 = http.hex.encode(http.crypto.sha256(io.open(path, "rb"):read("a"))) }
      os.remove(path)
    end
  end
  if parts.err then return res:json({ error = parts.err }, 400) end
  res:json({ saved = saved })
end)

-- A feed of numbered events; a reconnecting browser resumes after Last-Event-ID.
http.handle("GET /feed", function(req, res)
  local n = tonumber(req:header("Last-Event-ID")) or 0
  local sse = res:sse()
  while true do
    n = n + 1
    local ok = sse:send{ event = "tick", id = n, data = "tick " .. n }
    if not ok then return end -- the client went away
    if n % 10 == 0 then sse:comment("keep-alive") end
    http.sleep(tonumber(req:arg("every")) or 1)
  end
end)

-- A chat room over WebSocket for logged-in users: each socket's handler
-- reads its client; whatever one says goes to every socket of this worker.
local room = {}
http.handle("GET /chat", function(req, res)
  local user = user_of(req)
  if not user then return res:json({ error = "not logged in" }, 401) end
  local ws, err = req:websocket{ protocols = { "chat" }, max_message = "64k" }
  if not ws then return end -- a bad handshake: the 400 is already staged
  room[ws] = user
  for peer in pairs(room) do peer:send(user .. " joined") end
  while true do
    local text, kind = ws:receive()
    if not text then break end
    if kind == "text" then
      for peer in pairs(room) do peer:send(user .. ": " .. text) end
    end
  end
  room[ws] = nil
  for peer in pairs(room) do peer:send(user .. " left") end
end)
