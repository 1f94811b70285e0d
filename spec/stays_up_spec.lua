-- A server that stays up when its pools go quiet. Each pooled kind parks a
-- connection with a 1 s idle timeout, the client that caused it goes away,
-- and the pooled connection expires with nothing else open: the worker's
-- loop must go on (it once ended there, exiting 0), with one worker and
-- with two (where the master would silently replace the worker).
local H = require "helper"
local certs = require "helpers.certs"
local P = require "pg_helper"
local O = require "ops_helper"

local q = H.shell_quote

-- After a line that sets up, up_tls, redis_port, pg_port and ca.
local APP = [[
local http = require "moonhttp"
local redis = require "moonhttp.redis"
local pg = require "moonhttp.pg"

local client = http.client{ idle_timeout = 1, tls = { ca = ca } }
local db = pg.pool{ host = "127.0.0.1", port = pg_port, user = "postgres", database = "postgres",
  idle_timeout = 1 }

-- One request over a raw socket, parked for 1 s.
local function raw(tls)
  local s = http.tcp()
  assert(s:connect("127.0.0.1", tls and up_tls or up))
  if tls then assert(s:tls_handshake{ server_name = "localhost", ca = ca }) end
  assert(s:send("GET / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n"))
  local n
  repeat
    local line = assert(s:receive("l"))
    n = n or tonumber(line:match("^[Cc]ontent%-[Ll]ength:%s*(%d+)"))
  until line == ""
  assert(s:receive(n))
  return assert(s:keepalive(1))
end

local kinds = {
  socket = function() return raw(false) end,
  socket_tls = function() return raw(true) end,
  redis = function()
    local r = redis.connect{ port = redis_port, idle_timeout = 1 }
    assert(r:ping())
    return assert(r:keepalive())
  end,
  pg = function() return assert(db:query("select 1 as one"))[1].one == 1 end,
  fetch = function()
    local r <close> = assert(client:fetch("http://127.0.0.1:" .. up .. "/"))
    return r:body() == "up"
  end,
  fetch_tls = function()
    local r <close> = assert(client:fetch("https://localhost:" .. up_tls .. "/"))
    return r:body() == "up"
  end,
}

http.handle("GET /park/{kind}", function(req, res)
  res:write(tostring(kinds[req:pathvalue("kind")]()))
end)
http.handle("GET /ping", function(req, res) res:write("pong") end)
]]

local UPSTREAM = [[
local http = require "moonhttp"
http.server{ listen = { "127.0.0.1:0", { addr = "127.0.0.1:0", tls = { cert = %q, key = %q } } } }
http.handle("GET /", function(req, res) res:write("up") end)
]]

local KINDS = { "socket", "socket_tls", "redis", "pg", "fetch", "fetch_tls" }

describe("a worker whose pooled connections expire", function()
  local dir, upstream, redis, cluster, ports

  setup(function()
    dir = certs.dir("-up")
    local cert, key = certs.self_signed(dir, "cert", "/CN=localhost", { san = "DNS:localhost,IP:127.0.0.1" })
    upstream = H.start(string.format(UPSTREAM, cert, key),
      { no_listen = true })
    assert(O.wait_for(function()
      local n = 0
      for _ in upstream:logtext():gmatch("%(port %d+%)") do n = n + 1 end
      return n == 2
    end, 5), "upstream did not listen twice")
    ports = {}
    for p in upstream:logtext():gmatch("%(port (%d+)%)") do ports[#ports + 1] = tonumber(p) end
    redis = H.redis()
    cluster = P.start()
  end)

  teardown(function()
    if upstream then upstream:stop() end
    if redis then redis:stop() end
    if cluster then cluster:stop() end
    if dir then os.execute("rm -rf " .. q(dir)) end
  end)

  local function app()
    return string.format("local up, up_tls, redis_port, pg_port, ca = %d, %d, %d, %d, %q\n",
      ports[1], ports[2], redis.port, cluster.port, dir .. "/cert.pem") .. APP
  end

  -- Rows: one server per pooled kind, all parked at once, then one wait past
  -- the idle timeout for all of them.
  for _, workers in ipairs({ 1, 2 }) do
    it("keeps serving after every pooled kind expires, " .. workers .. " worker(s)", function()
      local servers = {}
      for _, kind in ipairs(KINDS) do
        local s = H.start(app(), { flags = { "--workers", tostring(workers) } })
        servers[kind] = s
        if workers > 1 then
          assert(O.wait_for(function() return #O.children(s.pid) == workers end, 5))
          s.children = O.children(s.pid)
        end
        -- H.request closes its connection: no client connection is left open to hide the bug.
        local r = assert(s:get("/park/" .. kind))
        assert.equal(200, r.status, kind .. ": " .. tostring(r.body) .. "\n" .. s:logtext())
        assert.equal("true", r.body, kind)
      end
      H.sleep(2.5) -- every parked connection's 1 s idle timer has fired by now
      local failed = {}
      for _, kind in ipairs(KINDS) do
        local s = servers[kind]
        local ok, r = pcall(s.get, s, "/ping")
        if not (ok and r and r.body == "pong") then
          failed[#failed + 1] = kind .. ": the server stopped answering"
        elseif workers > 1 and not O.children(s.pid)[workers] then
          failed[#failed + 1] = kind .. ": a worker exited"
        elseif workers > 1 and table.concat(O.children(s.pid), " ") ~= table.concat(s.children, " ") then
          failed[#failed + 1] = kind .. ": a worker was replaced"
        end
        local status = s:stop()
        if status ~= 0 then failed[#failed + 1] = kind .. ": exit status " .. tostring(status) end
        if s:logtext():find("bug:", 1, true) then failed[#failed + 1] = kind .. ":\n" .. s:logtext() end
      end
      assert.same({}, failed)
    end)
  end
end)

describe("workers of a master that was killed", function()
  it("stop within 1 s, so a new server can listen on the same address at once", function()
    local srv = H.start([[
local http = require "moonhttp"
http.handle("GET /ping", function(req, res) res:write("pong") end)
]], { flags = { "--workers", "2" } })
    assert(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
    local workers = O.children(srv.pid)
    assert.equal("pong", srv:get("/ping").body)
    srv:signal("KILL")
    srv:wait(5)
    srv.stopped = true
    local t0 = H.now()
    local gone = O.wait_for(function()
      for _, pid in ipairs(workers) do
        -- an exited worker may stay a zombie until init reaps it: that is gone too
        local stat = H.read_file("/proc/" .. pid .. "/stat")
        if stat and not stat:match("^%d+ %b() Z") then return false end
      end
      return true
    end, 3, 0.02)
    local took = H.now() - t0
    for _, pid in ipairs(workers) do os.execute("kill -9 " .. pid .. " 2>/dev/null") end
    assert.truthy(gone, "the workers outlived their master")
    assert.truthy(took < 1, took)
    local again = H.start(string.format([[
local http = require "moonhttp"
http.server{ listen = "127.0.0.1:%d" }
http.handle("GET /ping", function(req, res) res:write("again") end)
]], srv.port), { no_listen = true })
    assert.equal("again", again:get("/ping").body)
    assert.equal(0, again:stop())
  end)
end)
