-- Even load across workers (issue 33): with reuseport (the default) each
-- worker slot accepts on its own SO_REUSEPORT socket, made by the master,
-- and the kernel spreads new connections over them; a reload hands slot i's
-- socket and its backlog to slot i's new worker, so a stream of new
-- connections meets no reset. The route answers with the worker's pid.
local H = require "helper"
local certs = require "helpers.certs"
local O = require "ops_helper"
local socket = require "socket"

local APP = [[
local http = require "moonhttp"
-- read in the handler: the script loads in the master, before the fork
http.handle("GET /pid", function(req, res) res:write(io.open("/proc/self/stat"):read("n")) end)
]]

-- Opens n connections at once, then sends one request on each, then reads
-- every answer: { pid = count }, and the errors (connect, reset) by kind.
local function burst(port, n)
  local conns, errors = {}, {}
  for _ = 1, n do
    local c = socket.tcp()
    c:settimeout(10)
    local ok, err = c:connect("127.0.0.1", port)
    if ok then conns[#conns + 1] = c else errors[err] = (errors[err] or 0) + 1; c:close() end
  end
  local req = "GET /pid HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
  for _, c in ipairs(conns) do c:send(req) end
  local pids = {}
  for _, c in ipairs(conns) do
    local text, err, part = c:receive("*a")
    text = text or part
    local pid = text and text:match("\r\n\r\n(%d+)$")
    if pid then pids[pid] = (pids[pid] or 0) + 1
    else
      err = err or "no answer"
      errors[err] = (errors[err] or 0) + 1
    end
    c:close()
  end
  return pids, errors
end

local function shares(pids)
  local n, total, most = 0, 0, 0
  for _, c in pairs(pids) do
    n, total = n + 1, total + c
    if c > most then most = c end
  end
  return n, total, most
end

local function show(t)
  local parts = {}
  for k, v in pairs(t) do parts[#parts + 1] = k .. "=" .. v end
  table.sort(parts)
  return table.concat(parts, " ")
end

local function start(flags)
  local f = { "--workers", "2" }
  for _, x in ipairs(flags or {}) do f[#f + 1] = x end
  local srv = H.start(APP, { flags = f })
  assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
  -- both workers serve before the burst
  assert.truthy(O.wait_for(function()
    local pids = burst(srv.port, 20)
    return (shares(pids)) == 2
  end, 5), "both workers answer")
  return srv
end

describe("balanced accepts over 2 workers", function()
  local srv
  after_each(function()
    if srv then assert.equal(0, srv:stop()) end
    srv = nil
  end)

  it("gives the busier worker at most 1.3x the even share of 1,000 connections opened in a burst", function()
    srv = start()
    local pids, errors = burst(srv.port, 1000)
    local n, total, most = shares(pids)
    print(string.format("\n  reuseport: %s (busier %.2fx of even)", show(pids), most / (total / 2)))
    assert.same({}, errors)
    assert.equal(2, n, show(pids))
    assert.equal(1000, total)
    assert.truthy(most <= 1.3 * 500, "uneven: " .. show(pids))
  end)

  it("shares one socket with reuseport = false (still serves from both slots)", function()
    srv = start({ "--reuseport", "off" })
    local pids, errors = burst(srv.port, 200)
    local _, total, most = shares(pids)
    print(string.format("\n  shared socket: %s (busier %.2fx of even)", show(pids), most / (total / 2)))
    assert.same({}, errors)
    assert.equal(200, total)
  end)

  it("keeps every connection of a stream through SIGHUP reloads: no reset, no refusal", function()
    srv = start()
    local served, errors, reloads = 0, {}, 0
    local t_end = socket.gettime() + 2.5
    local next_hup = socket.gettime() + 0.3
    while socket.gettime() < t_end do
      if socket.gettime() >= next_hup and reloads < 3 then
        srv:signal("HUP")
        reloads, next_hup = reloads + 1, next_hup + 0.6
      end
      local pids, errs = burst(srv.port, 40)
      local _, total = shares(pids)
      served = served + total
      for k, v in pairs(errs) do errors[k] = (errors[k] or 0) + v end
    end
    print(string.format("\n  reload stream: %d answered, %d reloads, errors: %s", served, reloads, show(errors)))
    assert.same({}, errors)
    assert.equal(3, reloads)
    -- the reloads happened: the workers now are new ones
    assert.truthy(O.wait_for(function()
      return select(2, srv:logtext():gsub("reload %(SIGHUP%): new code", "")) == 3
        and #O.children(srv.pid) == 2
    end, 5), srv:logtext())
  end)

  it("restarts a killed worker in its slot: both slots serve again", function()
    srv = start()
    local victim = O.children(srv.pid)[1]
    os.execute("kill -9 " .. victim)
    assert.truthy(O.wait_for(function()
      local pids = burst(srv.port, 40)
      return (shares(pids)) == 2 and not pids[tostring(victim)]
    end, 5), srv:logtext())
  end)
end)

describe("balanced accepts over TLS and h2", function()
  local dir, srv
  setup(function()
    dir = certs.dir("-bal")
    certs.self_signed(dir, "srv", "/CN=localhost", { san = "DNS:localhost,IP:127.0.0.1" })
  end)
  teardown(function()
    if srv then assert.equal(0, srv:stop()) end
    os.execute("rm -rf " .. H.shell_quote(dir))
  end)

  it("spreads TLS (h2 and HTTP/1.1) and h2c connections over both workers", function()
    local script = H.script(string.format([[
      local http = require "moonhttp"
      http.server{ listen = { "127.0.0.1:0", { addr = "127.0.0.1:0", tls = { cert = %q, key = %q } } } }
      http.handle("GET /pid", function(req, res)
        res:write(req.proto, " ", io.open("/proc/self/stat"):read("n"), "\n")
      end)
    ]], dir .. "/srv.pem", dir .. "/srv.key"))
    srv = H.start(script, { no_listen = true, flags = { "--workers", "2" } })
    assert.truthy(O.wait_for(function() return srv:logtext():find("https://", 1, true) end, 5))
    local tls_port = tonumber(srv:logtext():match("https://[^\n]* %(port (%d+)%)"))
    assert.truthy(tls_port, srv:logtext())
    local cases = {
      { "--http2 https://127.0.0.1:" .. tls_port, "h2 over TLS" },
      { "--http1.1 https://127.0.0.1:" .. tls_port, "HTTP/1.1 over TLS" },
      { "--http2-prior-knowledge http://127.0.0.1:" .. srv.port, "h2c" },
    }
    for _, case in ipairs(cases) do
      -- 100 curls, 10 at a time: each its own connection (errors in the output)
      local out = H.sh(string.format(
        "seq 100 | xargs -P 10 -I{} curl -sSk --max-time 30 %s/pid 2>&1", case[1]))
      local pids, total = {}, 0
      for ver, pid in out:gmatch("(HTTP/[%d.]+) (%d+)\n") do
        pids[pid] = (pids[pid] or 0) + 1
        total = total + 1
        assert.equal(case[2] == "HTTP/1.1 over TLS" and "HTTP/1.1" or "HTTP/2.0", ver, case[2])
      end
      local n, _, most = shares(pids)
      print(string.format("\n  %s: %s", case[2], show(pids)))
      assert.equal(100, total, case[2] .. ": " .. out)
      assert.equal(2, n, case[2] .. ": " .. show(pids))
      assert.truthy(most <= 75, case[2] .. " uneven: " .. show(pids))
    end
  end)
end)
