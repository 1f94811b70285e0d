-- The client side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL speaks
-- it: client-first, server-first, client-final with the proof, and the check
-- of the server's signature (so a server that does not know the password
-- cannot pretend to). The crypto comes in as a table (moonhttp.pgauth in the
-- server; the spec passes the same), so this file is only the exchange.
-- Channel binding is not offered ("n,,"), as with libpq without TLS.
local M = {}

local Scram = {}
Scram.__index = Scram

-- crypto: { scram_salted, scram_proof, nonce }; opts.user (PostgreSQL
-- ignores the SCRAM user name and uses the startup one: libpq sends an
-- empty one), opts.nonce (tests), opts.cache (a table: salt and iteration
-- count -> salted password, so a pool derives its key once).
function M.scram(crypto, password, opts)
  opts = opts or {}
  local user = (opts.user or ""):gsub("=", "=3D"):gsub(",", "=2C")
  local nonce = opts.nonce or crypto.nonce()
  return setmetatable({
    crypto = crypto, password = password, cache = opts.cache,
    nonce = nonce, bare = "n=" .. user .. ",r=" .. nonce,
  }, Scram)
end

M.MECHANISM = "SCRAM-SHA-256"

-- The client-first message (gs2 header "n,," and the bare part).
function Scram:first() return "n,," .. self.bare end

-- Takes server-first, returns client-final, or nil, err.
function Scram:final(server_first)
  local attrs = {}
  for k, v in server_first:gmatch("(%a)=([^,]*)") do attrs[k] = attrs[k] or v end
  local r, s, i = attrs.r, attrs.s, math.tointeger(tonumber(attrs.i or ""))
  if attrs.e then return nil, "SCRAM: server error " .. attrs.e end
  if not (r and s and i) then return nil, "SCRAM: malformed server-first message" end
  if #r <= #self.nonce or r:sub(1, #self.nonce) ~= self.nonce then
    return nil, "SCRAM: server nonce does not extend ours"
  end
  local key = s .. ":" .. i
  local salted = self.cache and self.cache[key]
  if not salted then
    local err
    salted, err = self.crypto.scram_salted(self.password, s, i)
    if not salted then return nil, "SCRAM: " .. err end
    if self.cache then self.cache[key] = salted end
  end
  local without_proof = "c=biws,r=" .. r -- biws = base64("n,,")
  local auth = self.bare .. "," .. server_first .. "," .. without_proof
  local proof, signature = self.crypto.scram_proof(salted, auth)
  self.signature = signature
  return without_proof .. ",p=" .. proof
end

-- Takes server-final; true when the server proved it knows the password.
function Scram:verify(server_final)
  local e = server_final:match("^e=([^,]*)")
  if e then return nil, "SCRAM: server error " .. e end
  local v = server_final:match("^v=([^,]*)")
  if not v or not self.signature or v ~= self.signature then
    return nil, "SCRAM: server signature mismatch"
  end
  return true
end

return M
