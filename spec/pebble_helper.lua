-- A throw-away ACME CA for the automatic HTTPS specs: Debian's pebble (an
-- RFC 8555 server made for tests) and pebble-challtestsrv as its DNS, which
-- answers every name with 127.0.0.1, both on free loopback ports. Pebble
-- validates HTTP-01 on `http_port` and TLS-ALPN-01 on `tls_port`: the ports
-- the spec's moonhttp listens on, so the helper picks them before either
-- starts. Pebble's API is HTTPS with a certificate made here (the package
-- ships none); `ca` is that certificate, for acme's `ca =` option. Its issuing
-- root is new at every start and served at `mgmt`/roots/0 (root_pem()).
local H = require "helper"
local certs = require "helpers.certs"
local socket = require "socket"

local P = {}

local q = H.shell_quote

function P.free_port()
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

--- True when pebble is installed (scripts/deps.sh); the specs are pending without it.
function P.available()
  return os.execute("command -v pebble >/dev/null 2>&1 && command -v pebble-challtestsrv >/dev/null 2>&1") == true
end

local CA = {}
CA.__index = CA

local function start_pebble(ca)
  -- va_sleep: pebble waits up to that many seconds before it validates (an order in progress
  -- to interrupt); by default it does not wait
  local env = { ca.opts.va_sleep and ("PEBBLE_VA_SLEEPTIME=" .. ca.opts.va_sleep) or "PEBBLE_VA_NOSLEEP=1",
    "PEBBLE_WFE_NONCEREJECT=" .. (ca.opts.nonce_reject or 0),
    -- pebble reuses a valid authorization half the time; the specs want each order validated
    "PEBBLE_AUTHZREUSE=" .. (ca.opts.authz_reuse or 0) }
  ca.pebble = H.service(string.format("%s pebble -config %s -dnsserver 127.0.0.1:%d", table.concat(env, " "),
    q(ca.config), ca.dns_port), function(text)
    if text:find("Listening on: 127.0.0.1:" .. ca.port, 1, true) then return ca.port end
  end, 15)
  -- pebble logs its addresses as it starts listening on them, not once it does
  for _, port in ipairs { ca.port, ca.mgmt_port } do
    local deadline = socket.gettime() + 5
    while true do
      local c = socket.connect("127.0.0.1", port)
      if c then c:close() break end
      assert(socket.gettime() < deadline, "pebble does not listen on port " .. port)
      socket.sleep(0.02)
    end
  end
end

--- Starts the DNS and pebble. opts: http_port, tls_port (default: free ports),
--- validity (seconds a certificate lasts; pebble's default is 5 years), va_sleep,
--- nonce_reject (percent of good nonces refused as bad, default 0), eab
--- ({ kid = hmac_b64url }: accounts must be bound).
function P.start(opts)
  opts = opts or {}
  local ca = setmetatable({ opts = opts, dir = certs.dir("-pebble"), port = P.free_port(),
    mgmt_port = P.free_port(), dns_port = P.free_port(), dns_mgmt_port = P.free_port(),
    http_port = opts.http_port or P.free_port(), tls_port = opts.tls_port or P.free_port() }, CA)
  local ok, err = pcall(function()
    ca.ca = certs.self_signed(ca.dir, "api", "/CN=localhost", { san = "DNS:localhost,IP:127.0.0.1" })
    ca.config = ca.dir .. "/pebble.json"
    local eab = ""
    if opts.eab then
      local keys = {}
      for kid, hmac in pairs(opts.eab) do keys[#keys + 1] = string.format("%q: %q", kid, hmac) end
      eab = ', "externalAccountMACKeys": {' .. table.concat(keys, ", ") .. "}"
    end
    H.write_file(ca.config, string.format([[
{ "pebble": { "listenAddress": "127.0.0.1:%d", "managementListenAddress": "127.0.0.1:%d",
  "certificate": "%s", "privateKey": "%s", "httpPort": %d, "tlsPort": %d,
  "ocspResponderURL": "", "externalAccountBindingRequired": %s%s%s } }
]], ca.port, ca.mgmt_port, ca.dir .. "/api.pem", ca.dir .. "/api.key", ca.http_port, ca.tls_port,
      tostring(opts.eab ~= nil), eab,
      opts.validity and (', "certificateValidityPeriod": ' .. opts.validity) or ""))
    -- Only the DNS server of challtestsrv: moonhttp answers the challenges itself. No AAAA
    -- answers, so pebble dials 127.0.0.1, where the spec's listeners are.
    ca.dns = H.service(string.format("pebble-challtestsrv -defaultIPv4 127.0.0.1 -defaultIPv6 '' "
      .. "-dns01 127.0.0.1:%d -http01 '' -https01 '' -tlsalpn01 '' -management 127.0.0.1:%d",
      ca.dns_port, ca.dns_mgmt_port), function(text)
      if text:find("Starting challenge servers", 1, true) then return ca.dns_port end
    end)
    start_pebble(ca)
  end)
  if not ok then
    ca:stop()
    error("could not start pebble: " .. tostring(err), 2)
  end
  ca.directory = string.format("https://127.0.0.1:%d/dir", ca.port)
  ca.mgmt = string.format("https://127.0.0.1:%d", ca.mgmt_port)
  return ca
end

--- Pebble's log so far (what it validated, the errors it answered).
function CA:log()
  return self.pebble and H.read_file(self.pebble.log) or ""
end

-- Neither program stops at once on SIGTERM; they keep nothing, so SIGKILL. What
-- is left is a zombie until its new parent reaps it (kill -0 would still see
-- it): the ports are free once it has died, so no waiting.
local function kill(svc)
  if not svc or svc.stopped then return end
  svc.stopped = true
  os.execute(string.format("kill -9 %d 2>/dev/null", svc.pid))
  os.remove(svc.log)
end

--- Stops pebble alone (the DNS stays): the CA is down, as in an outage.
function CA:pause()
  kill(self.pebble)
end

--- Starts pebble again after pause(), on the same ports (a new root: pebble makes one per start).
function CA:resume()
  start_pebble(self)
end

--- The root that issued this run's certificates, PEM, written to a file; returns its path.
function CA:root_file()
  local path = self.dir .. "/root.pem"
  H.must(string.format("curl -sSf --cacert %s -o %s %s/roots/0", q(self.ca), q(path), self.mgmt))
  return path
end

--- The `tls = { acme = ... }` table for a listener, as Lua source; `extra` is more fields.
function CA:acme_opts(storage, extra)
  return string.format("{ domains = { %s }, directory = %q, ca = %q, storage = %q%s }",
    self.opts.domains_src or '"a.test"', self.directory, self.ca, storage,
    extra and (", " .. extra) or "")
end

function CA:stop()
  if self.stopped then return end
  self.stopped = true
  kill(self.pebble)
  kill(self.dns)
  os.execute("rm -rf " .. q(self.dir))
end

return P
