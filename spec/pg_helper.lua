-- A throw-away PostgreSQL cluster for the specs: Debian's postgresql 15,
-- initdb into a temporary folder as the `postgres` user (CI runs as root,
-- and the server refuses to run as root), on a free loopback port, with a
-- self-signed certificate, and users for each authentication method.
-- stop() removes everything; start() cleans up after itself when it fails.
local H = require "helper"
local certs = require "helpers.certs"
local socket = require "socket"

local P = {}

P.bindir = os.getenv("PG_BINDIR") or "/usr/lib/postgresql/15/bin"

P.users = {
  trust = { user = "trust_user" },
  md5 = { user = "md5_user", password = "md5 pass'word" },
  scram = { user = "scram_user", password = "scram-pass\"word" },
  tls = { user = "tls_user", password = "tls-password" },
  cert = { user = "cert_user" }, -- authenticated by its client certificate (c.client_cert)
}

local q = H.shell_quote

local function must(cmd)
  local text, ok = H.sh(cmd)
  if not ok then error("command failed: " .. cmd .. "\n" .. text, 2) end
  return text
end

local function as_postgres(cmd) return "runuser -u postgres -- " .. cmd end

function P.free_port()
  local s = assert(socket.bind("127.0.0.1", 0))
  local _, port = s:getsockname()
  s:close()
  return tonumber(port)
end

local Cluster = {}
Cluster.__index = Cluster

-- A self-signed certificate for 127.0.0.1 / localhost (its own CA).
local function make_cert(dir, name, cn)
  return certs.self_signed(dir, name, "/CN=" .. cn, { san = "DNS:localhost,IP:127.0.0.1" })
end

function Cluster:psql(sql)
  return must(string.format("%s/psql -X -q -A -t -v ON_ERROR_STOP=1 -h %s -p %d -U postgres -d postgres -c %s",
    P.bindir, q(self.dir), self.port, q(sql)))
end

--- One value from a query, as a string.
function Cluster:scalar(sql) return (self:psql(sql):gsub("%s+$", "")) end

function Cluster:ctl(args)
  return must(as_postgres(string.format("%s/pg_ctl -D %s -l %s -w -t 60 %s", P.bindir,
    q(self.data), q(self.dir .. "/server.log"), args)))
end

function Cluster:restart() self:ctl("restart -m fast") end

function Cluster:stop()
  if self.stopped then return end
  self.stopped = true
  if self.running then H.sh(as_postgres(string.format("%s/pg_ctl -D %s -w -t 30 stop -m immediate",
    P.bindir, q(self.data)))) end
  os.execute("rm -rf " .. q(self.dir))
end

function Cluster:log() return H.read_file(self.dir .. "/server.log") or "" end

--- Options for pg.pool{} as a Lua source fragment, for one of P.users.
function Cluster:pool_opts(kind, extra)
  local u = P.users[kind or "trust"]
  local parts = { string.format("host = '127.0.0.1', port = %d, user = %q, database = 'postgres'",
    self.port, u.user) }
  if u.password then parts[#parts + 1] = string.format("password = %q", u.password) end
  if extra then parts[#parts + 1] = extra end
  return "{ " .. table.concat(parts, ", ") .. " }"
end

local INITDB_ARGS = "-U postgres --auth=trust -E UTF8 --locale=C --no-sync"

-- initdb's output, made once per machine and copied for each cluster: initdb
-- is most of a start (7 of 13 s on a loaded machine, a copy 1 s), and seven
-- spec files start a cluster. The copy keeps each file's cluster its own.
-- The name holds the server's folder and initdb's arguments, so a template
-- made otherwise is never taken; it is renamed into place whole, so a run
-- beside another never sees half of one.
local function template()
  local name = string.format("/tmp/mh-pg-template-%s-%s", P.bindir:gsub("[^%w]", "_"),
    (INITDB_ARGS:gsub("[^%w]", "")))
  if os.execute("test -f " .. q(name .. "/PG_VERSION")) then return name end
  local tmp = must("mktemp -d /tmp/mh-pg-template-XXXXXX"):gsub("%s+$", "")
  must("chown postgres: " .. q(tmp))
  must(as_postgres(string.format("%s/initdb -D %s %s", P.bindir, q(tmp .. "/data"), INITDB_ARGS)))
  -- mv -T fails when another run won the race: theirs is as good as ours
  if not os.execute("mv -T " .. q(tmp .. "/data") .. " " .. q(name) .. " 2>/dev/null") then
    os.execute("rm -rf " .. q(tmp .. "/data"))
  end
  os.execute("rmdir " .. q(tmp))
  return name
end

function P.start()
  local dir = must("mktemp -d /tmp/mh-pg-XXXXXX"):gsub("%s+$", "")
  local c = setmetatable({ dir = dir, data = dir .. "/data", port = P.free_port() }, Cluster)
  local ok, err = pcall(function()
    must("chown postgres: " .. q(dir))
    must(string.format("cp -a %s %s", q(template()), q(c.data)))
    c.cert, c.key = make_cert(dir, "server", "localhost")
    c.other_ca = make_cert(dir, "other", "other-ca")
    -- self-signed, so its own CA (ssl_ca_file): pg_hba's `cert` wants CN = the user
    c.client_cert, c.client_key = certs.self_signed(dir, "client", "/CN=cert_user")
    must("chown postgres: " .. q(c.key) .. " && chmod 600 " .. q(c.key))
    local conf = assert(io.open(c.data .. "/postgresql.conf", "a"))
    conf:write(string.format([[
listen_addresses = '127.0.0.1'
port = %d
unix_socket_directories = '%s'
password_encryption = 'scram-sha-256'
ssl = on
ssl_cert_file = '%s'
ssl_key_file = '%s'
ssl_ca_file = '%s'
max_connections = 60
fsync = off
synchronous_commit = off
full_page_writes = off
log_min_messages = warning
timezone = 'UTC'
]], c.port, dir, c.cert, c.key, c.client_cert))
    conf:close()
    local hba = assert(io.open(c.data .. "/pg_hba.conf", "w"))
    hba:write([[
local   all  all                       trust
hostssl all  tls_user    127.0.0.1/32  scram-sha-256
hostssl all  cert_user   127.0.0.1/32  cert
host    all  tls_user    127.0.0.1/32  reject
host    all  md5_user    127.0.0.1/32  md5
host    all  scram_user  127.0.0.1/32  scram-sha-256
host    all  trust_user  127.0.0.1/32  trust
host    all  postgres    127.0.0.1/32  trust
]])
    hba:close()
    c:ctl("start")
    c.running = true
    local U = P.users
    c:psql(string.format([[
SET password_encryption = 'md5';
CREATE ROLE md5_user LOGIN SUPERUSER PASSWORD '%s';
RESET password_encryption;
CREATE ROLE scram_user LOGIN SUPERUSER PASSWORD '%s';
CREATE ROLE tls_user LOGIN SUPERUSER PASSWORD '%s';
CREATE ROLE trust_user LOGIN SUPERUSER;
CREATE ROLE cert_user LOGIN SUPERUSER;
]], U.md5.password:gsub("'", "''"), U.scram.password:gsub("'", "''"), U.tls.password:gsub("'", "''")))
  end)
  if not ok then
    local log = c:log()
    c:stop()
    error("could not start a PostgreSQL cluster: " .. tostring(err) .. "\n" .. log, 2)
  end
  return c
end

return P
