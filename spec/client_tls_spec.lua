-- The client over HTTPS: a CA and certificates made here with the openssl
-- CLI, and bench/client/delayproxy (compiled here, no delay) terminating TLS
-- in front of the counting upstream (spec/servers/upstream.lua).
local H = require "helper"
local certs = require "helpers.certs"
local socket = require "socket"

local sh = H.must

local function spawn(cmd, log)
  local pipe = assert(io.popen(string.format("sh -c '%s >%s 2>&1 & echo $!'", cmd, log), "r"))
  local pid = tonumber(pipe:read("l"))
  pipe:close()
  local deadline = socket.gettime() + 5
  while socket.gettime() < deadline do
    local port = (H.read_file(log) or ""):match("port (%d+)")
    if port then return pid, tonumber(port) end
    socket.sleep(0.02)
  end
  os.execute("kill " .. pid)
  error("did not start: " .. cmd .. "\n" .. (H.read_file(log) or ""))
end

local function run(source, ...)
  return H.run_kv(nil, source, ...)
end

describe("http client over TLS", function()
  local dir, pids, up_port, good, expired = nil, {}, nil, nil, nil

  setup(function()
    dir = certs.ca_and_server(".pki", "/CN=moonhttp test CA")
    local function in_dir(cmd) sh("cd " .. dir .. " && " .. cmd) end
    certs.self_signed(dir, "other", "/CN=other CA")
    -- an expired certificate needs `openssl ca` for explicit dates
    H.write_file(dir .. "/ca.cnf", table.concat({
      "[ ca ]", "default_ca = tca", "[ tca ]", "dir = .", "database = index.txt", "new_certs_dir = .",
      "serial = serial", "default_md = sha256", "policy = pol", "copy_extensions = copy",
      "[ pol ]", "commonName = supplied", "" }, "\n"))
    H.write_file(dir .. "/index.txt", "")
    H.write_file(dir .. "/serial", "01\n")
    in_dir("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout old.key -out old.csr"
      .. " -subj /CN=localhost")
    in_dir("openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in old.csr -out old.pem"
      .. " -startdate 20200101000000Z -enddate 20200201000000Z")
    -- built by CMake beside the binary, against the same Mbed TLS (3.6)
    assert(os.execute("cp " .. H.shell_quote((H.bin:gsub("moonhttp$", "delayproxy"))) ..
      " " .. dir .. "/delayproxy"))
    local pid
    pid, up_port = spawn("lua5.4 spec/servers/upstream.lua 0", dir .. "/up.log")
    pids[#pids + 1] = pid
    pid, good = spawn(string.format("%s/delayproxy -u 127.0.0.1:%d -d 0 --cert %s/srv.pem --key %s/srv.key",
      dir, up_port, dir, dir), dir .. "/px1.log")
    pids[#pids + 1] = pid
    pid, expired = spawn(string.format("%s/delayproxy -u 127.0.0.1:%d -d 0 --cert %s/old.pem --key %s/old.key",
      dir, up_port, dir, dir), dir .. "/px2.log")
    pids[#pids + 1] = pid
  end)

  teardown(function()
    for _, pid in ipairs(pids) do os.execute("kill " .. pid .. " 2>/dev/null") end
    if dir then os.execute("rm -rf " .. dir) end
  end)

  local function count()
    return tonumber(assert(H.request(up_port, "GET", "/_count")).body)
  end
  before_each(function() assert(H.request(up_port, "GET", "/_reset")) end)

  it("verifies against a custom CA and reuses one connection for unread bodies", function()
    -- As client_spec's chunked case: the terminator may come later than the
    -- default 50 ms drain_timeout on a loaded machine, and a fetch made while
    -- a drain still waits rightly dials another connection; what must hold is
    -- that no drain gave up and nearly every fetch reused.
    local s = run([[
local c = http.client{ tls = { ca = arg[2] }, drain_timeout = 1 }
for _, p in ipairs{ "/small", "/chunked" } do
  for i = 1, 50 do
    local r = assert(c:fetch(arg[1] .. p))
    assert(r.status == 200)
    r:close()
  end
end
for k, v in pairs(c:stats()) do print(k, v) end
]], "https://localhost:" .. good, dir .. "/ca.pem")
    assert.equal(0, s.drains_abandoned or 0)
    assert.equal(100, s.dials + s.reuses)
    assert.is_true(s.reuses >= 90, s.reuses .. " of 100 fetches reused a connection")
    assert.equal(s.dials, count())
  end)

  it("names the reason a certificate is refused", function()
    local s = run([[
local function err(url, tls) return select(2, http.client{ tls = tls }:fetch(url)) end -- kind, detail
print("system", err(arg[1], nil))
print("other", err(arg[1], { ca = arg[3] }))
print("mismatch", err(arg[4], { ca = arg[2] }))
print("expired", err(arg[5], { ca = arg[2] }))
print("noverify", assert(http.client{ tls = { verify = false } }:fetch(arg[1] .. "/small")).status)
print("badca", err(arg[1], { ca = "/nonexistent.pem" }))
]], "https://localhost:" .. good, dir .. "/ca.pem", dir .. "/other.pem",
      "https://127.0.0.1:" .. good, "https://localhost:" .. expired)
    assert.equal("tls\ttls: certificate signed by unknown authority", s.system)
    assert.equal("tls\ttls: certificate signed by unknown authority", s.other)
    assert.equal("tls\ttls: certificate hostname mismatch", s.mismatch)
    assert.equal("tls\ttls: certificate expired", s.expired)
    assert.equal(200, s.noverify)
    assert.equal("tls\ttls: cannot load the CA file", s.badca)
  end)

  it("resumes TLS sessions per host", function()
    local s = run([[
local c = http.client{ tls = { ca = arg[2] }, max_idle = 0 } -- every fetch dials
for i = 1, 4 do assert(c:fetch(arg[1] .. "/small")):close() end
for k, v in pairs(c:stats()) do print(k, v) end
]], "https://localhost:" .. good, dir .. "/ca.pem")
    assert.equal(4, s.dials)
    assert.equal(3, s.tls_resumed)
    s = run([[
local c = http.client{ tls = { ca = arg[2], resume = false }, max_idle = 0 }
for i = 1, 3 do assert(c:fetch(arg[1] .. "/small")):close() end
for k, v in pairs(c:stats()) do print(k, v) end
]], "https://localhost:" .. good, dir .. "/ca.pem")
    assert.equal(3, s.dials)
    assert.equal(0, s.tls_resumed)
  end)

  it("drains over TLS in the background and gives up on big bodies", function()
    local s = run([[
local c = http.client{ tls = { ca = arg[2] } }
for i = 1, 3 do assert(c:fetch(arg[1] .. "/big")):close() end
for i = 1, 3 do
  local r = assert(c:fetch(arg[1] .. "/big"))
  local n = 0
  while true do local d = r:read() if not d then break end n = n + #d end
  print("read" .. i, n)
end
for k, v in pairs(c:stats()) do print(k, v) end
]], "https://localhost:" .. good, dir .. "/ca.pem")
    assert.equal(3, s.closed_unread)
    assert.equal(1048576, s.read3)
    assert.equal(4, s.dials)
  end)
end)
