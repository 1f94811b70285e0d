-- Automatic HTTPS against a real ACME CA: Debian's pebble on loopback
-- (spec/pebble_helper.lua), its DNS sending every name to 127.0.0.1, where
-- the spec's moonhttp listens on the ports pebble validates. Each row starts
-- its own CA and server; a certificate is proved by curl verifying the
-- served chain against the root pebble made for that run.
local H = require "helper"
local P = require "pebble_helper"
local certs = require "helpers.certs"
local O = require "ops_helper"

local pending_reason = not P.available() and "pebble is not installed (scripts/deps.sh)" or nil
local q = H.shell_quote

-- The app of every row: the HTTP-01 listener (plain) first, the acme one second.
-- `extra`: more acme options, as Lua source; opts.workers.
local function app(ca, storage, extra, opts)
  opts = opts or {}
  return string.format([[
local http = require "moonhttp"
http.server{ workers = %d, metrics = "127.0.0.1:0", listen = {
  %s{ addr = "127.0.0.1:%d", tls = { acme = %s } },
} }
http.handle("GET /", function(req, res) res:write("hello over ", req:tls() and "https" or "http", "\n") end)
http.handle("GET /status", function(req, res) res:write(http.json.encode(http.acme.status())) end)
]], opts.workers or 1, opts.no_plain and "" or string.format('{ addr = "127.0.0.1:%d" },\n  ', opts.plain_port or ca.http_port),
    ca.tls_port, ca:acme_opts(storage, extra))
end

local function start(ca, storage, extra, opts)
  local srv = H.start(app(ca, storage, extra, opts), { no_listen = true, flags = { "--workers",
    tostring((opts or {}).workers or 1) } })
  srv.port = (opts or {}).plain_port or ca.http_port
  return srv
end

-- curl over the acme listener, verifying against `root`: body and whether it verified.
local function curl(ca, root, path)
  local out, ok = H.sh(string.format("curl -sS --max-time 5 --cacert %s --resolve a.test:%d:127.0.0.1 https://a.test:%d%s",
    q(root), ca.tls_port, ca.tls_port, path or "/"))
  return out, ok
end

-- The serial of the certificate the acme listener serves now, verified against root, or nil, why.
local function served_serial(ca, root)
  local out, ok = H.sh(string.format("echo | openssl s_client -connect 127.0.0.1:%d -servername a.test "
    .. "-CAfile %s -verify_return_error 2>&1 | openssl x509 -noout -serial", ca.tls_port, q(root)))
  if not ok then return nil, out end
  return out:match("serial=(%x+)")
end

-- Waits (short polls) until curl verifies the served chain; returns the body, or nil and the last output.
local function wait_verified(ca, root, timeout)
  local deadline, out, ok = H.now() + (timeout or 20)
  repeat
    out, ok = curl(ca, root)
    if ok then return out end
    H.sleep(0.1)
  until H.now() > deadline
  return nil, out
end

local function status(srv)
  local res = srv:get("/status")
  local t = require("cjson").decode(res.body)
  return t[1]
end

local function mode(path)
  return (H.sh("stat -c %a " .. q(path)):gsub("%s+$", ""))
end

-- Starts strace on pid's worker (pid itself with one worker), following its threads: process creation and
-- exec only. Returns a function that stops it and returns the trace.
local function trace_forks(pid)
  local out, errs = os.tmpname(), os.tmpname()
  local p = io.popen(string.format("strace -f -e trace=clone,clone3,fork,vfork,execve -p %d -o %s 2>%s & echo $!",
    O.children(pid)[1] or pid, out, errs))
  local spid = assert(p:read("n"))
  p:close()
  local deadline = H.now() + 10
  while not (H.read_file(errs) or ""):find("attached", 1, true) and H.now() < deadline do H.sleep(0.02) end
  assert((H.read_file(errs) or ""):find("attached", 1, true), "strace did not attach: " .. (H.read_file(errs) or ""))
  return function()
    os.execute("kill -INT " .. spid)
    local text
    deadline = H.now() + 5
    repeat
      H.sleep(0.1)
      text = H.read_file(errs) or ""
    until text:find("detached", 1, true) or H.now() > deadline
    text = H.read_file(out) or ""
    os.remove(out)
    os.remove(errs)
    return text
  end
end

-- The lines of an strace trace that start a process: a thread (CLONE_THREAD) is not one.
local function process_starts(trace)
  local found = {}
  for line in trace:gmatch("[^\n]+") do
    local call = line:match("^%d+%s+(%w+)%(")
    if call == "execve" or call == "fork" or call == "vfork"
        or ((call == "clone" or call == "clone3") and not line:find("CLONE_THREAD", 1, true)) then
      found[#found + 1] = line
    end
  end
  return found
end

-- A storage the server cannot write: { what, make it so (storage, the CA folder) -> the path
-- the error names, the system's words }. root ignores modes, so the folder is made immutable too.
local function unwritable(dir)
  H.must("chmod 0555 " .. q(dir))
  if H.sh("id -u"):match("^0") then H.must("chattr +i " .. q(dir)) end
end
local BAD_STORAGE = {
  { "a storage folder the server cannot write", function(storage, ca_dir)
    unwritable(storage)
    return ca_dir, { "Permission denied", "Operation not permitted" }
  end },
  { "a CA folder the server cannot write", function(_, ca_dir)
    H.must("mkdir -m 0700 " .. q(ca_dir))
    unwritable(ca_dir)
    return ca_dir .. "/account.key", { "Permission denied", "Operation not permitted" }
  end },
  { "a file where the storage folder should be", function(storage, _)
    H.must("rmdir " .. q(storage) .. " && touch " .. q(storage))
    return storage, { "Not a directory" }
  end },
}

describe("automatic HTTPS against pebble", function()
  if pending_reason then
    pending(pending_reason)
    return
  end
  local ca, srv, storage

  before_each(function()
    storage = certs.dir("-acme")
  end)

  after_each(function()
    if srv then srv:stop() end
    if ca then ca:stop() end
    srv, ca = nil, nil
    os.execute("chattr -R -i " .. q(storage) .. " 2>/dev/null; rm -rf " .. q(storage))
  end)

  it("gets the first certificate by HTTP-01, served with a chain that verifies", function()
    ca = P.start()
    srv = start(ca, storage)
    local root = ca:root_file()
    local body, out = wait_verified(ca, root)
    assert.truthy(body, "no verified HTTPS: " .. tostring(out) .. "\n" .. srv:logtext())
    assert.truthy(body:find("hello over https", 1, true), body)
    assert.truthy(ca:log():find("Attempting to validate w/ HTTP", 1, true))
    -- stored: keys private, the chain for a restart
    local dir = storage .. "/127.0.0.1_" .. ca.port .. "_dir"
    assert.equal("600", mode(dir .. "/account.key"))
    assert.equal("600", mode(dir .. "/a.test.key"))
    assert.equal("700", mode(dir))
    local st = status(srv)
    assert.same({ "a.test" }, st.names)
    assert.truthy(st.not_after > os.time() + 86400, srv:logtext())
    assert.equal(0, st.failures)
    local mport = srv:logtext():match("metrics on [^\n]*%(port (%d+)%)")
    local metrics = H.sh("curl -s http://127.0.0.1:" .. mport .. "/metrics")
    assert.truthy(metrics:find('moonhttp_acme_orders_total{name="a.test"} 1\n', 1, true), metrics)
    local days = tonumber(metrics:match('moonhttp_acme_days_left{name="a.test"} ([%d%.]+)'))
    assert.truthy(days and days > 1, metrics)
  end)

  it("gets the first certificate by TLS-ALPN-01, with no plain listener to answer HTTP-01", function()
    ca = P.start()
    srv = start(ca, storage, 'challenge = "tls-alpn-01"', { no_plain = true })
    local root = ca:root_file()
    local body, out = wait_verified(ca, root)
    assert.truthy(body, "no verified HTTPS: " .. tostring(out) .. "\n" .. srv:logtext())
    assert.equal("hello over https\n", body)
    assert.falsy(ca:log():find("Attempting to validate w/ HTTP", 1, true))
  end)

  it("serves the stored certificate after a restart without contacting the CA", function()
    ca = P.start()
    srv = start(ca, storage)
    local root = ca:root_file()
    assert.truthy(wait_verified(ca, root), srv:logtext())
    local serial = served_serial(ca, root)
    srv:stop()
    ca:pause() -- the CA is gone: what is served must come from storage
    srv = start(ca, storage)
    local body = wait_verified(ca, root, 5)
    assert.truthy(body, srv:logtext())
    assert.equal(serial, served_serial(ca, root))
    H.sleep(1.5) -- the ordering worker's first look (TICK) has passed
    local log = srv:logtext()
    assert.falsy(log:find("ordering a certificate", 1, true), log)
    assert.falsy(log:find("failed", 1, true), log)
  end)
  it("stores the account and the certificate without starting a process in the worker", function()
    if not O.need_strace() then return end
    ca = P.start()
    ca:pause() -- the first order fails: strace attaches before the one that stores the certificate
    srv = start(ca, storage, "retry_min = 0.5, retry_max = 1")
    assert.truthy(srv:wait_log("order failed %(1 failure%)", 10), srv:logtext())
    local stop = trace_forks(srv.pid)
    ca:resume()
    local dir = storage .. "/127.0.0.1_" .. ca.port .. "_dir"
    local root = ca:root_file()
    local body = wait_verified(ca, root)
    local trace = stop()
    assert.truthy(body, srv:logtext())
    assert.equal("600", mode(dir .. "/a.test.key"))
    assert.truthy(H.read_file(dir .. "/account.url"), srv:logtext())
    local starts = process_starts(trace)
    assert.equal(0, #starts, table.concat(starts, "\n"))
  end)

  for _, row in ipairs(BAD_STORAGE) do
    it("says why with " .. row[1] .. ", and keeps serving", function()
      ca = P.start()
      local named, words = row[2](storage, storage .. "/127.0.0.1_" .. ca.port .. "_dir")
      srv = start(ca, storage)
      local line = srv:wait_log("order failed %(1 failure%): ([^\n]*)", 10)
      assert.truthy(line, srv:logtext())
      local said = false
      for _, w in ipairs(words) do said = said or line:find(named .. ": " .. w, 1, true) ~= nil end
      assert.truthy(said, line)
      local res = srv:get("/")
      assert.equal(200, res.status)
      assert.equal("hello over http\n", res.body)
    end)
  end

  it("with 2 workers, completes the order in the other worker when the ordering one is killed", function()
    ca = P.start { va_sleep = 3 } -- pebble waits up to 3 s before validating: the order is in progress
    srv = start(ca, storage, nil, { workers = 2 })
    local pid = srv:wait_log("%[info%] (%d+): acme: listen%[2%]%.tls%.acme: ordering", 10)
    assert.truthy(pid, srv:logtext())
    -- killed once the challenge is answered and pebble is about to validate it
    local deadline = H.now() + 10
    while not ca:log():find("POST /chalZ/", 1, true) and H.now() < deadline do H.sleep(0.01) end
    assert.truthy(ca:log():find("POST /chalZ/", 1, true), ca:log())
    os.execute("kill -9 " .. pid)
    local root = ca:root_file()
    local body = wait_verified(ca, root, 25)
    assert.truthy(body, srv:logtext())
    local got = srv:logtext():match("%[info%] (%d+): acme: listen%[2%]%.tls%.acme: got a certificate")
    assert.truthy(got, srv:logtext())
    assert.not_equal(pid, got)
  end)

  it("renews before the end, while a client loop sees no failed handshake", function()
    ca = P.start { validity = 30 }
    srv = start(ca, storage, "renew_before = 25") -- each certificate is due 5 s after it was issued
    local root = ca:root_file()
    assert.truthy(wait_verified(ca, root), srv:logtext())
    local serials, seen, handshakes, failed, why = {}, 0, 0, 0, nil
    local deadline = H.now() + 15
    while H.now() < deadline and seen < 3 do
      local serial, err = served_serial(ca, root)
      handshakes = handshakes + 1
      if not serial then
        failed, why = failed + 1, err
      elseif not serials[serial] then
        serials[serial], seen = true, seen + 1
      end
    end
    assert.equal(0, failed, why)
    assert.truthy(seen >= 2, "one certificate in " .. handshakes .. " handshakes:\n" .. srv:logtext())
    assert.truthy(srv:logtext():find("renewing a certificate", 1, true))
  end)

  it("keeps serving the current certificate while the CA is down, and renews once it is back", function()
    ca = P.start { validity = 60 }
    srv = start(ca, storage, "renew_before = 55, retry_min = 0.5, retry_max = 1")
    local root = ca:root_file()
    assert.truthy(wait_verified(ca, root), srv:logtext())
    local first = served_serial(ca, root)
    ca:pause()
    local down = H.now()
    -- due 5 s after it was issued: the renewal fails, and is retried with backoff
    assert.truthy(srv:wait_log("renewal failed %(3 failures in a row%)", 15), srv:logtext())
    assert.equal(first, served_serial(ca, root))
    local log = srv:logtext()
    assert.truthy(log:find("the current certificate is still served", 1, true), log)
    local _, tries = log:gsub("renewal failed", "")
    -- never in a loop: at least retry_min / 2 between two tries
    assert.truthy(tries <= (H.now() - down) / 0.25 + 1, log)
    local st = status(srv)
    assert.truthy(st.failures >= 3 and st.last_error:find("connection", 1, true), st.last_error)
    ca:resume()
    local root2 = ca:root_file() -- pebble makes a new root at every start
    local deadline, serial = H.now() + 15, nil
    repeat
      serial = served_serial(ca, root2)
      if not serial then H.sleep(0.2) end
    until serial or H.now() > deadline
    assert.truthy(serial, srv:logtext())
    assert.equal(0, status(srv).failures)
  end)

  it("tries a bad nonce again a bounded number of times, and says so", function()
    ca = P.start { nonce_reject = 100 }
    srv = start(ca, storage)
    assert.truthy(srv:wait_log("order failed %(1 failure%): badNonce: JWS has an invalid anti%-replay nonce", 10),
      srv:logtext())
    H.sleep(1.5)
    local _, failures = srv:logtext():gsub("order failed", "")
    assert.equal(1, failures) -- the next attempt is a minute away (retry_min)
    local _, posts = ca:log():gsub("POST /sign%-me%-up", "")
    assert.equal(5, posts)
    local st = status(srv)
    assert.truthy(st.last_error:find("badNonce", 1, true))
    assert.truthy(st.next_attempt >= os.time() + 25, tostring(st.next_attempt))
  end)

  it("gets its certificate when the CA rejects some nonces", function()
    ca = P.start { nonce_reject = 15 }
    srv = start(ca, storage)
    assert.truthy(wait_verified(ca, ca:root_file()), srv:logtext())
  end)

  it("says why the CA refused the challenge, and backs off", function()
    ca = P.start() -- pebble validates on a port where nothing listens
    srv = start(ca, storage, nil, { plain_port = P.free_port() })
    local line = srv:wait_log("order failed %(1 failure%): ([^\n]*)", 15)
    assert.truthy(line, srv:logtext())
    assert.truthy(line:find("the authorization of a.test is invalid", 1, true), line)
    assert.truthy(line:find("refused", 1, true), line)
    H.sleep(1.5)
    local _, failures = srv:logtext():gsub("order failed", "")
    assert.equal(1, failures)
  end)
end)
