-- PostgreSQL values <-> Lua values. Pure Lua (no sockets, no C of ours), so
-- plain busted can test it. Results arrive in the text format; decoders are
-- chosen once per column from its type OID. Parameters leave in the text
-- format with their types left to the server (so "42" works for an int
-- column and 42 for a text one); pg.bytea values, and plain strings the
-- server says are bytea (pg.lua), go in binary, byte for byte.
local cjson = require "cjson"

local M = {}

-- SQL NULL, both ways. It is lua-cjson's null, so res:json(rows) writes
-- `null` for a NULL column.
M.null = cjson.null

local BYTEA = 17

local tointeger, tonumber, sfmt, schar = math.tointeger, tonumber, string.format, string.char

local function decode_int(s) return tointeger(tonumber(s)) end

local special_floats = { NaN = 0 / 0, Infinity = math.huge, ["-Infinity"] = -math.huge }
local function decode_float(s) return tonumber(s) or special_floats[s] end

local function decode_bool(s) return s == "t" end

local function hex_byte(h) return schar(tonumber(h, 16)) end

-- bytea's hex output (bytea_output = 'hex', the default since 9.0): \x0aff...
local function decode_bytea(s)
  if s:sub(1, 2) == "\\x" then return (s:sub(3):gsub("%x%x", hex_byte)) end
  -- the old escape format, should a server be configured with it
  return (s:gsub("\\(%d%d%d)", function(o) return schar(tonumber(o, 8)) end):gsub("\\\\", "\\"))
end

local function decode_json(s) return cjson.decode(s) end

-- Scalar decoders by type OID; anything else stays a string (text, varchar,
-- name, numeric, uuid, date and time types, and types we do not know).
local scalar = {
  [16] = decode_bool,
  [17] = decode_bytea,
  [20] = decode_int, [21] = decode_int, [23] = decode_int, [26] = decode_int, [28] = decode_int,
  [700] = decode_float, [701] = decode_float,
  [114] = decode_json, [3802] = decode_json,
}

-- Array type OID -> element type OID.
local array_of = {
  [1000] = 16, [1001] = 17, [1005] = 21, [1007] = 23, [1016] = 20, [1028] = 26,
  [1021] = 700, [1022] = 701, [1231] = 1700,
  [1009] = 25, [1015] = 1043, [1014] = 1042, [1003] = 19, [1002] = 18,
  [199] = 114, [3807] = 3802, [2951] = 2950,
  [1182] = 1082, [1115] = 1114, [1185] = 1184, [1183] = 1083, [1270] = 1266, [1187] = 1186,
}

M.names = {
  [16] = "bool", [17] = "bytea", [18] = "char", [19] = "name", [20] = "int8", [21] = "int2",
  [23] = "int4", [25] = "text", [26] = "oid", [114] = "json", [700] = "float4",
  [701] = "float8", [1042] = "bpchar", [1043] = "varchar", [1082] = "date", [1083] = "time",
  [1114] = "timestamp", [1184] = "timestamptz", [1186] = "interval", [1266] = "timetz",
  [1700] = "numeric", [2950] = "uuid", [3802] = "jsonb",
}
for arr, elem in pairs(array_of) do
  if M.names[elem] then M.names[arr] = "_" .. M.names[elem] end
end

local identity = function(s) return s end

-- Parses PostgreSQL's text form of an array ('{1,NULL,"a \"b\"",{2,3}}',
-- optionally preceded by bounds like '[0:1]='). Elements become Lua values
-- through elem; NULL becomes M.null so the result stays a sequence. Raises
-- on malformed input (the caller turns that into `nil, err`).
function M.parse_array(s, elem)
  elem = elem or identity
  local pos = 1
  if s:sub(1, 1) == "[" then
    pos = s:find("=", 1, true)
    if not pos then error("malformed array: " .. s, 0) end
    pos = pos + 1
  end
  local function parse_level()
    if s:sub(pos, pos) ~= "{" then error("malformed array: " .. s, 0) end
    pos = pos + 1
    local out, n = {}, 0
    if s:sub(pos, pos) == "}" then pos = pos + 1; return out end
    while true do
      local c = s:sub(pos, pos)
      local v
      if c == "{" then
        v = parse_level()
      elseif c == '"' then
        local parts, i = {}, pos + 1
        while true do
          local j = s:find('[\\"]', i)
          if not j then error("malformed array: unterminated quote", 0) end
          parts[#parts + 1] = s:sub(i, j - 1)
          if s:sub(j, j) == '"' then pos = j + 1; break end
          parts[#parts + 1] = s:sub(j + 1, j + 1)
          i = j + 2
        end
        v = elem(table.concat(parts))
      else
        local j = s:find("[,}]", pos)
        if not j then error("malformed array: " .. s, 0) end
        local raw = s:sub(pos, j - 1)
        pos = j
        if raw:upper() == "NULL" then v = M.null else v = elem((raw:gsub("\\(.)", "%1"))) end
      end
      n = n + 1
      out[n] = v
      c = s:sub(pos, pos)
      pos = pos + 1
      if c == "}" then return out end
      if c ~= "," then error("malformed array: " .. s, 0) end
    end
  end
  local out = parse_level()
  if pos <= #s then error("malformed array: trailing bytes", 0) end
  return out
end

-- How moonhttp.pgrows (C) takes a column of type oid: 2, an integer type
-- (it parses the text itself, or falls back to the decoder); 1, a type kept
-- as its text; 0, through the decoder.
local INTEGER = { [20] = true, [21] = true, [23] = true, [26] = true, [28] = true }
function M.kind(oid)
  if INTEGER[oid] then return 2 end
  if M.decoder(oid) == identity then return 1 end
  return 0
end

-- The decoder for a column of type oid: a function(text) -> Lua value.
function M.decoder(oid)
  local d = scalar[oid]
  if d then return d end
  local e = array_of[oid]
  if e then
    local ed = scalar[e] or identity
    return function(s) return M.parse_array(s, ed) end
  end
  return identity
end

-- Wrappers for parameters whose Lua type does not say what they are.
local JSON_MT = { __name = "pg.json" }
local BYTEA_MT = { __name = "pg.bytea" }

function M.json(v) return setmetatable({ value = v }, JSON_MT) end
function M.bytea(s)
  if type(s) ~= "string" then error("pg.bytea: expects a string", 2) end
  return setmetatable({ value = s }, BYTEA_MT)
end

local function encode_float(f)
  if f ~= f then return "NaN" end
  if f == math.huge then return "Infinity" end
  if f == -math.huge then return "-Infinity" end
  return sfmt("%.17g", f)
end

local function hex(s) return "\\x" .. (s:gsub(".", function(c) return sfmt("%02x", c:byte()) end)) end

-- One array element in the text form of arrays: always quoted, so commas,
-- braces, quotes, backslashes, spaces and the word NULL are data.
local function array_literal(t, n)
  local parts = {}
  for i = 1, #t do
    local v = t[i]
    local tv = type(v)
    if v == M.null then
      parts[i] = "NULL"
    elseif tv == "table" and getmetatable(v) == nil then
      parts[i] = array_literal(v, n)
    else
      local s
      if tv == "string" then
        if v:find("\0", 1, true) then
          error(sfmt("pg: parameter $%d: array elements cannot contain NUL (use pg.bytea)", n), 0)
        end
        s = v
      elseif tv == "number" then
        s = math.type(v) == "integer" and sfmt("%d", v) or encode_float(v)
      elseif tv == "boolean" then
        s = v and "true" or "false"
      elseif getmetatable(v) == JSON_MT then
        s = cjson.encode(v.value)
      elseif getmetatable(v) == BYTEA_MT then
        s = hex(v.value)
      else
        error(sfmt("pg: parameter $%d: cannot send a %s in an array", n, tv), 0)
      end
      parts[i] = '"' .. s:gsub('[\\"]', "\\%0") .. '"'
    end
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- Encodes parameter n for Bind. Returns value (string, or nil for NULL),
-- format (0 text, 1 binary) and type OID (0: the server infers it).
-- pg.bytea(s) is binary bytea; a plain string is text here, and sent in
-- binary by the caller when the server says the parameter is bytea.
-- Misuse (a function, a table with holes meant as a map) raises.
function M.encode_param(v, n)
  local tv = type(v)
  if v == nil or v == M.null then return nil, 0, 0 end
  if tv == "string" then
    return v, 0, 0 -- the caller sends it in binary if the server says it is bytea
  elseif tv == "number" then
    if math.type(v) == "integer" then return sfmt("%d", v), 0, 0 end
    return encode_float(v), 0, 0
  elseif tv == "boolean" then
    return v and "true" or "false", 0, 0
  elseif tv == "table" then
    local mt = getmetatable(v)
    if mt == JSON_MT then return cjson.encode(v.value), 0, 0 end
    if mt == BYTEA_MT then return v.value, 1, BYTEA end
    if mt == nil then
      local len = #v
      for k in pairs(v) do
        if math.type(k) ~= "integer" or k < 1 or k > len then
          error(sfmt("pg: parameter $%d: a table is sent as an array; use pg.json(v) for objects", n), 0)
        end
      end
      return array_literal(v, n), 0, 0
    end
  end
  error(sfmt("pg: parameter $%d: cannot send a %s", n, tv), 0)
end

return M
