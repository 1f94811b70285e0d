-- systemd socket activation (issue 45): started with LISTEN_FDS, LISTEN_PID
-- and LISTEN_FDNAMES, the server serves on the passed sockets, matched to
-- its listen entries by address, and binds none of its own; a script whose
-- listen list and the passed sockets disagree is refused with a clear error.
-- spec/clients/pass_sockets.py plays systemd: it binds without
-- SO_REUSEPORT, so the server could not have bound that port itself.
local H = require "helper"
local O = require "ops_helper"

local APP = [[
local http = require "moonhttp"
http.handle("GET /hello", function(req, res) res:write("hello") end)
]]

local function passing(addrs, extra)
  return ("/usr/bin/python3 spec/clients/pass_sockets.py %s%s %s"):format(extra or "", addrs,
    H.shell_quote(H.bin))
end

-- Starts the server behind pass_sockets.py; returns it and the ports passed.
local function start(addrs, flags, opts)
  opts = opts or {}
  local real = H.bin
  H.bin = passing(addrs, opts.extra)
  local ok, srv = pcall(H.start, APP, { flags = flags, no_listen = opts.no_listen })
  H.bin = real
  assert(ok, srv)
  local passed = {}
  for port in srv:logtext():gmatch("passed [%d.]+:(%d+)") do passed[#passed + 1] = tonumber(port) end
  return srv, passed
end

-- Runs the server behind pass_sockets.py until it exits; returns its status and output.
local function run(addrs, args)
  local out = H.tmpname(".out")
  local cmd = passing(addrs)
  for _, a in ipairs(args) do cmd = cmd .. " " .. H.shell_quote(a) end
  local ok, how, code = os.execute(("timeout 10 %s >%s 2>&1 </dev/null"):format(cmd, out))
  local text = H.read_file(out) or ""
  os.remove(out)
  return ok and 0 or code, text
end

describe("systemd socket activation", function()
  for _, workers in ipairs({ "1", "2" }) do
    it(("serves on the passed socket and binds none of its own (--workers %s)"):format(workers), function()
      local srv, passed = start("127.0.0.1:0=web", { "--listen", "127.0.0.1:0", "--workers", workers }, { no_listen = true })
      assert.same({ srv.port }, passed, srv:logtext())
      if workers == "2" then
        assert.truthy(O.wait_for(function() return #O.children(srv.pid) == 2 end, 5))
      end
      for _ = 1, 20 do assert.equal("hello", srv:try_get("/hello")) end
      assert.is_nil(srv:logtext():find("address already in use", 1, true))
      -- a reload keeps serving on it (the master's copy stays)
      srv:signal("HUP")
      H.sleep(0.3)
      assert.equal("hello", srv:try_get("/hello"))
      assert.equal(0, srv:stop())
    end)
  end

  it("matches several passed sockets to the listen entries by address, whatever their order", function()
    local srv, passed = start("127.0.0.2:0=second,127.0.0.1:0=first",
      { "--listen", "127.0.0.1:0", "--listen", "127.0.0.2:0", "--workers", "2" }, { no_listen = true })
    assert.equal(2, #passed)
    local log = srv:logtext()
    assert.truthy(log:find("listening on http://127.0.0.1:0 (port " .. passed[2] .. ")", 1, true), log)
    assert.truthy(log:find("listening on http://127.0.0.2:0 (port " .. passed[1] .. ")", 1, true), log)
    assert.equal(0, srv:stop())
  end)

  it("ignores variables meant for another process (LISTEN_PID) and binds its own", function()
    local srv, passed = start("127.0.0.1:0", { "--listen", "127.0.0.1:0" }, { no_listen = true, extra = "--pid-of-other " })
    assert.equal(1, #passed)
    assert.are_not.equal(passed[1], srv.port)
    assert.equal("hello", srv:try_get("/hello"))
    assert.equal(0, srv:stop())
  end)

  -- The .socket unit and the script disagree: passed addresses, the script's listen, what the error says.
  local disagree = {
    { "127.0.0.1:0", "127.0.0.2:8", "listen \"127.0.0.2:8\": systemd passed no socket for this address" },
    { "127.0.0.1:0", "127.0.0.1:0,127.0.0.2:0", "listen \"127.0.0.2:0\": systemd passed no socket for this address" },
    { "127.0.0.1:0,127.0.0.2:0=extra", "127.0.0.1:0", "systemd passed a socket on 127.0.0.2:%d+ %(named extra%)"
      .. " %(fd 4%) that no listen entry of the script names" },
  }
  for _, row in ipairs(disagree) do
    local addrs, listen, says = row[1], row[2], row[3]
    for _, workers in ipairs({ "1", "2" }) do
      it(("refuses to start when passed %s and the script listens on %s (--workers %s)"):format(addrs, listen, workers), function()
        local args = {}
        for a in listen:gmatch("[^,]+") do args[#args + 1] = "--listen"; args[#args + 1] = a end
        for _, a in ipairs({ "--workers", workers, H.script(APP) }) do args[#args + 1] = a end
        local code, text = run(addrs, args)
        assert.equal(1, code, text)
        assert.truthy(text:find(says) or text:find(says, 1, true), text)
        assert.truthy(text:find("ListenStream= and the script's listen list disagree", 1, true), text)
      end)
    end
  end
end)

-- The packaged units (build/ holds them as configured): the socket unit is
-- accepted by systemd-analyze beside the service, and listens where the
-- starter app does, so turning it on needs no edit.
describe("the packaged moonhttp.socket", function()
  local dir = H.bin:match("^(.*)/[^/]+$") or "."

  it("passes systemd-analyze verify with moonhttp.service", function()
    if not O.has("systemd-analyze") then
      pending("systemd-analyze not installed")
      return
    end
    local tmp = H.tmpname(".units")
    assert(os.execute("mkdir -p " .. tmp))
    finally(function() os.execute("rm -rf " .. tmp) end)
    local bin = H.bin:sub(1, 1) == "/" and H.bin or (os.getenv("PWD") .. "/" .. H.bin)
    local service = assert(H.read_file(dir .. "/moonhttp.service")):gsub("ExecStart(%w*)=%S+", "ExecStart%1=" .. bin)
    H.write_file(tmp .. "/moonhttp.service", service)
    H.write_file(tmp .. "/moonhttp.socket", assert(H.read_file(dir .. "/moonhttp.socket")))
    local out = H.sh(("systemd-analyze verify --man=no %s/moonhttp.socket %s/moonhttp.service 2>&1; echo rc=$?"):format(tmp, tmp))
    assert.equal("rc=0", (out:gsub("%s+$", "")))
  end)

  it("listens where the starter app does", function()
    local socket_unit = assert(H.read_file(dir .. "/moonhttp.socket"))
    local app = assert(H.read_file(dir .. "/app.lua"))
    local streams = {}
    for addr in socket_unit:gmatch("\nListenStream=(%S+)") do streams[#streams + 1] = addr end
    assert.same({ app:match('listen = "([^"]+)"') }, streams)
  end)
end)
