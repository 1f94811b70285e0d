-- moonhttp.pgrows.scan, the C reader of moonhttp.pg's answers (src/lua/lua_pgrows.c
-- over src/wire/pg_wire.c), on answers built byte by byte: rows decoded by
-- column kind, where it stops (a message it leaves to the Lua client, one
-- not wholly received, a DataRow that does not fit the statement), and the
-- integer text it does not take going through the column's decoder.
-- spec/pg_spec.lua and spec/pg_pipeline_spec.lua run it against a server.
local H = require "helper"

local PRELUDE = [[
local http = require "moonhttp"
local scan = require("moonhttp.pgrows").scan
local types = require "moonhttp.pg.types"
local null = types.null
local function msg(t, body) return t .. string.pack(">I4", #body + 4) .. body end
local function row(...)
  local parts = { string.pack(">i2", select("#", ...)) }
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    parts[#parts + 1] = v == nil and string.pack(">i4", -1) or string.pack(">s4", v)
  end
  return msg("D", table.concat(parts))
end
local function col(name, oid) return { name = name, oid = oid, decode = types.decoder(oid), kind = types.kind(oid) } end
local cols = { col("id", 23), col("name", 25), col("big", 20), col("ok", 16), col("tags", 1009) }
-- a row's values with their Lua types: id=integer:42 name=string:x ...
local function dump(r)
  local out = {}
  for _, c in ipairs(cols) do
    local v = r[c.name]
    local t = v == null and "null" or math.type(v) or type(v)
    out[#out + 1] = c.name .. "=" .. t .. ((v == null or type(v) == "table") and "" or ":" .. tostring(v))
  end
  return table.concat(out, " ")
end
]]

describe("moonhttp.pgrows.scan", function()
  it("reads an extended query's answer into rows, up to ReadyForQuery", function()
    local kv = H.run_kv(PRELUDE, [==[
local answer = msg("2", "") .. row("42", "héllo", "9223372036854775807", "t", '{a,"b c",NULL}')
  .. row("-7", "", nil, "f", "{}") .. msg("C", "SELECT 2\0") .. msg("Z", "I") .. "next"
local rows = { "kept" }
local pos, n, got, tag, status = scan(answer, 1, cols, rows, 1, null)
print("result", pos == #answer - 3, n, got, tag, status)
print("first", rows[1])
print("row1", dump(rows[2]))
print("row2", dump(rows[3]))
print("tags", #rows[2].tags, rows[2].tags[2], rows[2].tags[3] == null)
]==])
    assert.equal("true\t3\t5\tSELECT 2\tI", kv.result)
    assert.equal("kept", kv.first)
    assert.equal("id=integer:42 name=string:héllo big=integer:9223372036854775807 ok=boolean:true tags=table", kv.row1)
    assert.equal("id=integer:-7 name=string: big=null ok=boolean:false tags=table", kv.row2)
    assert.equal("3\tb c\ttrue", kv.tags)
  end)

  it("stops before what it leaves to the Lua client", function()
    local kv = H.run_kv(PRELUDE, [==[
local r1 = row("1", "a", "1", "t", "{}")
local function stop(answer, from)
  local rows = {}
  local pos, n, got, tag, status = scan(answer, from or 1, cols, rows, 0, null)
  return table.concat({ pos, n, got, tostring(tag), tostring(status) }, ",")
end
print("r1", #r1)
print("error", stop(r1 .. msg("E", "SERROR\0C22012\0Mdivision by zero\0\0") .. msg("Z", "I")))
print("notice", stop(r1 .. msg("N", "SNOTICE\0Mhi\0\0") .. r1))
print("rowdesc", stop(msg("1", "") .. msg("T", "\0\0")))
print("partial", stop(r1 .. r1:sub(1, 10)))
print("head", stop(r1 .. "D\0\0"))
print("count", stop(r1 .. row("1", "2")))
print("short", stop(msg("D", "\0\5\0\0\0\1x")))
print("bad_len", stop(r1 .. "D\0\0\0\2"))
print("offset", stop("xxxx" .. r1, 5))
print("empty", stop("", 1))
print("range", pcall(scan, "ab", 4, cols, {}, 0, null))
]==])
    local r1 = kv.r1
    assert.equal(5 + 2 + (4 + 1) * 4 + 4 + 2, r1) -- "1", "a", "1", "t", "{}"
    assert.equal(("%d,1,1,nil,nil"):format(r1 + 1), kv.error)
    assert.equal(("%d,1,1,nil,nil"):format(r1 + 1), kv.notice)
    assert.equal("6,0,1,nil,nil", kv.rowdesc)
    assert.equal(("%d,1,1,nil,nil"):format(r1 + 1), kv.partial)
    assert.equal(("%d,1,1,nil,nil"):format(r1 + 1), kv.head)
    assert.equal(("%d,1,1,nil,nil"):format(r1 + 1), kv.count)
    assert.equal("1,0,0,nil,nil", kv.short)
    assert.equal(("%d,1,1,nil,nil"):format(r1 + 1), kv.bad_len)
    assert.equal(("%d,1,1,nil,nil"):format(r1 + 5), kv.offset)
    assert.equal("1,0,0,nil,nil", kv.empty)
    assert.truthy(kv.range:find("^false\t.*out of range"), kv.range)
  end)

  it("passes integer text it does not take to the column's decoder", function()
    local kv = H.run_kv(PRELUDE, [==[
local seen = {}
local c = { name = "v", kind = 2, decode = function(s) seen[#seen + 1] = s; return "decoded:" .. s end }
local answer = row("12") .. row("99999999999999999999") .. row("+5") .. row("-9223372036854775808")
local rows = {}
local _, n = scan(answer, 1, { c }, rows, 0, null)
print("values", n, rows[1].v, rows[2].v, rows[3].v, rows[4].v)
print("decoder", table.concat(seen, ","))
]==])
    assert.equal("4\t12\tdecoded:99999999999999999999\tdecoded:+5\t-9223372036854775808", kv.values)
    assert.equal("99999999999999999999,+5", kv.decoder)
  end)
end)
