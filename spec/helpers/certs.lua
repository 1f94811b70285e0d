-- Certificates for the TLS specs, made with openssl: EC P-256 keys, valid two
-- days. Every file goes in one folder the caller names: a CA is <name>.pem and
-- <name>.key, a leaf <name>.pem and <name>.key signed by a CA of that folder.
-- Each call raises with openssl's output when openssl fails, so a spec's
-- setup stops at the cause instead of at a server that cannot load its key.
local H = require "helper"

local C = {}
local q = H.shell_quote
local EC = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"

local function openssl(dir, args)
  H.must("cd " .. q(dir) .. " && openssl " .. args)
end

--- A new empty folder for certificates (H.tmpname with suffix).
function C.dir(suffix)
  local dir = H.tmpname(suffix or "-pki")
  H.must("mkdir -p " .. q(dir))
  return dir
end

--- A self-signed certificate: a CA, or a server certificate that is its own CA
--- when opts.san ("DNS:localhost,IP:127.0.0.1") is given. Returns the paths of
--- the certificate and the key.
function C.self_signed(dir, name, subj, opts)
  opts = opts or {}
  openssl(dir, string.format("req -x509 %s -days 2 -subj %s%s -keyout %s -out %s", EC, q(subj),
    opts.san and (" -addext " .. q("subjectAltName=" .. opts.san)) or "", q(name .. ".key"),
    q(name .. ".pem")))
  return dir .. "/" .. name .. ".pem", dir .. "/" .. name .. ".key"
end

--- A certificate for name signed by the CA `opts.ca` of the same folder (default
--- "ca"), with subject subj and the extension lines opts.ext ("subjectAltName=...",
--- "extendedKeyUsage=clientAuth", newline-separated); serial opts.serial or
--- one openssl counts. Leaves <name>.csr behind for callers that need a request.
function C.leaf(dir, name, subj, opts)
  opts = opts or {}
  local ca = opts.ca or "ca"
  openssl(dir, string.format("req %s -keyout %s -out %s -subj %s", EC, q(name .. ".key"),
    q(name .. ".csr"), q(subj)))
  local ext = ""
  if opts.ext then
    H.write_file(dir .. "/" .. name .. ".ext", opts.ext .. "\n")
    ext = " -extfile " .. q(name .. ".ext")
  end
  openssl(dir, string.format("x509 -req -in %s -CA %s -CAkey %s %s -out %s -days 2%s",
    q(name .. ".csr"), q(ca .. ".pem"), q(ca .. ".key"),
    opts.serial and ("-set_serial " .. opts.serial) or "-CAcreateserial", q(name .. ".pem"), ext))
  return dir .. "/" .. name .. ".pem", dir .. "/" .. name .. ".key"
end

--- A certificate for name signed by the CA `opts.ca` (default "ca") that expired in
--- January 2020 (openssl ca sets past dates; x509 -req cannot), from the request
--- <name>.csr that C.leaf left or a new one. Returns the paths of the certificate and the key.
function C.expired(dir, name, subj, opts)
  opts = opts or {}
  local ca = opts.ca or "ca"
  openssl(dir, string.format("req %s -keyout %s -out %s -subj %s", EC, q(name .. ".key"),
    q(name .. ".csr"), q(subj)))
  H.write_file(dir .. "/expired-ca.cnf", "[ca]\ndefault_ca = CA\n[CA]\ndatabase = expired-index.txt\n"
    .. "new_certs_dir = .\nserial = expired-serial.txt\ndefault_md = sha256\npolicy = any\n"
    .. "unique_subject = no\n[any]\ncommonName = supplied\n[ext]\nextendedKeyUsage = clientAuth\n")
  H.write_file(dir .. "/expired-index.txt", "")
  H.write_file(dir .. "/expired-serial.txt", "1000\n")
  openssl(dir, string.format("ca -batch -config expired-ca.cnf -extensions ext -cert %s -keyfile %s "
    .. "-startdate 20200101000000Z -enddate 20200102000000Z -notext -in %s -out %s",
    q(ca .. ".pem"), q(ca .. ".key"), q(name .. ".csr"), q(name .. ".pem")))
  return dir .. "/" .. name .. ".pem", dir .. "/" .. name .. ".key"
end

--- A CA "ca" and a server certificate "srv" for localhost signed by it, in a new
--- folder: what most TLS specs need. Returns the folder.
function C.ca_and_server(suffix, ca_subj)
  local dir = C.dir(suffix)
  C.self_signed(dir, "ca", ca_subj or "/CN=moonhttp spec CA")
  C.leaf(dir, "srv", "/CN=localhost", { ext = "subjectAltName=DNS:localhost" })
  return dir
end

return C
