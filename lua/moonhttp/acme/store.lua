-- Where automatic HTTPS keeps its keys and certificates, one folder per CA
-- under the `storage` option (so staging and production never mix).
-- In it: account.key and account.url (the account), and <domain>.crt and
-- <domain>.key for each certificate, named after its first domain.
-- Every write goes to a temporary file renamed over the old one, so a reader
-- (another worker, a restart) sees the old file or the new one, never half.
-- Keys are made 0600 before the rename; the folders are 0700.
local S = {}

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

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

-- A shell command for what Lua's io cannot do (folders, modes). It forks, so it
-- runs only when something is written: once per account and per certificate.
local function sh(cmd)
  local ok = os.execute(cmd .. " 2>/dev/null")
  return ok == true
end

function S.ensure_dir(dir)
  if sh("test -d " .. quote(dir)) then return true end
  if not sh("mkdir -p -m 0700 " .. quote(dir)) then
    return nil, "cannot create the folder " .. dir
  end
  return true
end

--- Writes data to path atomically; private: the file is 0600 before it appears.
function S.write(path, data, private)
  local tmp = string.format("%s.tmp-%d", path, math.random(1, 1e9))
  local f, err = io.open(tmp, "wb")
  if not f then return nil, "cannot write " .. path .. ": " .. tostring(err) end
  local ok
  ok, err = f:write(data)
  if ok then ok, err = f:close() else f:close() end
  if ok and private and not sh("chmod 0600 " .. quote(tmp)) then
    ok, err = nil, "chmod failed"
  end
  if ok then ok, err = os.rename(tmp, path) end
  if not ok then
    os.remove(tmp)
    return nil, "cannot write " .. path .. ": " .. tostring(err)
  end
  return true
end

--- The paths of a certificate of this CA folder.
function S.cert_paths(dir, name)
  local safe = name:gsub("^%*", "_wildcard"):gsub("[^%w%.%-_]", "_")
  return dir .. "/" .. safe .. ".crt", dir .. "/" .. safe .. ".key"
end

return S
