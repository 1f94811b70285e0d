-- Where automatic HTTPS keeps its keys and certificates, one folder per CA
-- under the `storage` option (so staging and production never mix).
-- In it: account.key and account.url (the account), and <domain>.crt and
-- <domain>.key for each certificate, named after its first domain.
-- Writes are core.write_private's (src/lua/lua_private_file.c): a temporary
-- file made with its mode, synced and renamed over the old one, so a reader
-- (another worker, a restart) sees the old file or the new one, never half,
-- and a key is 0600 from its first byte. Folders are 0700. No shell is
-- forked: this runs in a serving worker.
local core = require "moonhttp.core"

local S = {}

-- The CA's folder name: the directory URL's host and path, with only safe characters.
function S.ca_dir(root, directory)
  local rest = directory:gsub("^%a+://", ""):gsub("[^%w%.%-]+", "_"):gsub("^_+", ""):gsub("_+$", "")
  return root:gsub("/+$", "") .. "/" .. rest
end

function S.read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

function S.ensure_dir(dir)
  return core.mkdir_private(dir, 448) -- 0700
end

--- Writes data to path atomically; private: the file is 0600 (else 0644) before it appears.
function S.write(path, data, private)
  return core.write_private(path, data, private and 384 or 420) -- 0600, 0644
end

--- The paths of a certificate of this CA folder.
function S.cert_paths(dir, name)
  local safe = name:gsub("^%*", "_wildcard"):gsub("[^%w%.%-_]", "_")
  return dir .. "/" .. safe .. ".crt", dir .. "/" .. safe .. ".key"
end

return S
