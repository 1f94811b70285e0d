-- PostgreSQL's frontend/backend protocol 3.0: building the messages a client
-- sends and taking apart the ones it receives. Pure Lua over string.pack, no
-- sockets, so plain busted tests it byte for byte. Every message but the
-- first is a type byte, a 4-byte big-endian length that counts itself, and
-- a body.
local spack, sunpack, sfind, ssub = string.pack, string.unpack, string.find, string.sub

local M = {}

M.PROTOCOL = 196608        -- 3.0
M.SSL_REQUEST = 80877103
M.CANCEL_REQUEST = 80877102
M.MAX_MESSAGE = 1 << 30    -- the server's own limit on a field

local function msg(t, body) return t .. spack(">I4", #body + 4) .. body end

local function cstring(s, what)
  if sfind(s, "\0", 1, true) then error("pg: " .. what .. " must not contain NUL", 0) end
  return s .. "\0"
end

-- StartupMessage: params is a list of { name, value } pairs, sent in order.
function M.startup(params)
  local parts = { spack(">I4", M.PROTOCOL) }
  for _, p in ipairs(params) do
    parts[#parts + 1] = cstring(p[1], "startup parameter") .. cstring(p[2], "startup parameter")
  end
  parts[#parts + 1] = "\0"
  local body = table.concat(parts)
  return spack(">I4", #body + 4) .. body
end

M.ssl_request = spack(">I4I4", 8, M.SSL_REQUEST)

function M.cancel(pid, secret) return spack(">I4I4i4i4", 16, M.CANCEL_REQUEST, pid, secret) end

function M.password(s) return msg("p", cstring(s, "password")) end
function M.sasl_initial(mechanism, data)
  return msg("p", cstring(mechanism, "mechanism") .. spack(">i4", #data) .. data)
end
function M.sasl_response(data) return msg("p", data) end

function M.query(sql) return msg("Q", cstring(sql, "SQL text")) end

-- Parse: oids lists a type OID per parameter (0: let the server infer it).
function M.parse(name, sql, oids)
  local n = #oids
  return msg("P", cstring(name, "statement name") .. cstring(sql, "SQL text")
    .. spack(">i2" .. string.rep("I4", n), n, table.unpack(oids, 1, n)))
end

-- Bind: n parameters, values[i] a string or nil (NULL), formats[i] 0 (text)
-- or 1 (binary); all results in text.
function M.bind(portal, stmt, n, values, formats)
  local parts = { cstring(portal, "portal name"), cstring(stmt, "statement name") }
  local any_binary = false
  for i = 1, n do
    if formats[i] == 1 then any_binary = true; break end
  end
  if any_binary then
    parts[#parts + 1] = spack(">i2" .. string.rep("i2", n), n, table.unpack(formats, 1, n))
  else
    parts[#parts + 1] = "\0\0"
  end
  parts[#parts + 1] = spack(">i2", n)
  for i = 1, n do
    local v = values[i]
    parts[#parts + 1] = v == nil and "\255\255\255\255" or spack(">s4", v)
  end
  parts[#parts + 1] = "\0\0"
  return msg("B", table.concat(parts))
end

-- Execute of the unnamed portal with no row limit, then Sync: the tail of
-- every one-shot query's batch. pg.lua's queries are built in C
-- (src/lua/lua_pgbind.c over src/wire/pg_wire.c), to the same bytes as
-- bind(...) .. EXECUTE_SYNC; these two are the reference its specs compare with.
M.EXECUTE_SYNC = msg("E", "\0\0\0\0\0") .. msg("S", "")

function M.describe_statement(name) return msg("D", "S" .. cstring(name, "statement name")) end
function M.execute(portal) return msg("E", cstring(portal, "portal name") .. "\0\0\0\0") end
function M.close_statement(name) return msg("C", "S" .. cstring(name, "statement name")) end
M.sync = msg("S", "")
M.terminate = msg("X", "")

-- The 5-byte head of a backend message -> type, body length; or nil, err.
function M.head(h)
  local t, len = sunpack(">c1I4", h)
  if len < 4 or len > M.MAX_MESSAGE then return nil, "protocol error" end
  return t, len - 4
end

-- ErrorResponse / NoticeResponse: a field code byte and a C string each.
local field_names = {
  S = "severity_local", V = "severity", C = "code", M = "message", D = "detail", H = "hint",
  P = "position", p = "internal_position", q = "internal_query", W = "where",
  s = "schema", t = "table", c = "column", d = "datatype", n = "constraint",
  F = "file", L = "line", R = "routine",
}

local Error = { __name = "pg.error" }
Error.__index = Error
-- One line for logs: severity, message, SQLSTATE, and the detail when the server gave one
-- (for a unique violation, which key: "Key (email)=(a@b) already exists.").
function Error:__tostring()
  local s = string.format("%s: %s (SQLSTATE %s)", self.severity or "ERROR", self.message or "?",
    self.code or "?")
  if type(self.detail) == "string" and self.detail ~= "" then
    s = s .. " DETAIL: " .. self.detail:gsub("%s*[\r\n]+%s*", " ")
  end
  return s
end
M.Error = Error

function M.parse_fields(body)
  local e, pos = {}, 1
  while pos <= #body do
    local code = ssub(body, pos, pos)
    if code == "\0" then break end
    local z = sfind(body, "\0", pos + 1, true)
    if not z then break end
    e[field_names[code] or code] = ssub(body, pos + 1, z - 1)
    pos = z + 1
  end
  e.severity = e.severity or e.severity_local
  if e.position then e.position = math.tointeger(tonumber(e.position)) end
  return setmetatable(e, Error)
end

-- RowDescription -> list of { name, oid, table_oid, column, typmod }.
function M.parse_row_description(body)
  local n, pos = sunpack(">i2", body)
  local cols = {}
  for i = 1, n do
    local name, table_oid, column, oid, _, typmod
    name, table_oid, column, oid, _, typmod, _, pos = sunpack(">zI4i2I4i2i4i2", body, pos)
    cols[i] = { name = name, oid = oid, table_oid = table_oid, column = column, typmod = typmod }
  end
  return cols
end

-- DataRow -> a row table keyed by column name, each value through its
-- column's decode (NULL -> null). cols comes from parse_row_description
-- with a decode function added to each column.
function M.decode_row(body, cols, null)
  local n, pos = sunpack(">i2", body)
  local row = {}
  for i = 1, n do
    local len, col
    len, pos = sunpack(">i4", body, pos)
    col = cols[i]
    if len < 0 then
      row[col.name] = null
    else
      row[col.name] = col.decode(ssub(body, pos, pos + len - 1))
      pos = pos + len
    end
  end
  return row
end

-- ParameterDescription -> a list of type OIDs.
function M.parse_parameter_description(body)
  local n = sunpack(">i2", body)
  local oids = { sunpack(">" .. string.rep("I4", n), body, 3) }
  oids[n + 1] = nil -- unpack's next position
  return oids
end

-- CommandComplete's tag ("INSERT 0 3", "UPDATE 2", "SELECT 5", "CREATE TABLE")
-- -> rows affected, or nil when the command does not count rows.
function M.affected(tag)
  local n = tag:match(" (%d+)%z?$")
  return n and math.tointeger(tonumber(n)) or nil
end

function M.cstring(body)
  if ssub(body, -1) == "\0" then return ssub(body, 1, -2) end
  return body
end

-- ParameterStatus -> name, value
function M.parse_parameter_status(body)
  local k, v = sunpack("zz", body)
  return k, v
end

-- BackendKeyData -> pid, secret
function M.parse_backend_key(body)
  local pid, secret = sunpack(">I4i4", body)
  return pid, secret
end

-- NotificationResponse -> { pid, channel, payload }
function M.parse_notification(body)
  local pid, channel, payload = sunpack(">I4zz", body)
  return { pid = pid, channel = channel, payload = payload }
end

-- Authentication* -> code, rest of the body
function M.parse_auth(body)
  local code = sunpack(">I4", body)
  return code, ssub(body, 5)
end

-- The NUL-separated list of mechanisms in AuthenticationSASL.
function M.parse_mechanisms(rest)
  local list = {}
  for m in rest:gmatch("([^%z]+)") do list[#list + 1] = m end
  return list
end

-- Quotes an identifier (LISTEN's channel name) for SQL.
function M.quote_ident(s)
  return '"' .. cstring(s, "identifier"):sub(1, -2):gsub('"', '""') .. '"'
end

return M
