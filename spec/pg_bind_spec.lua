-- The Bind of moonhttp.pg's queries, built in C (moonhttp.pgbind over
-- src/wire/pg_wire.c), against a real PostgreSQL 15 (spec/pg_helper.lua):
-- every Lua value it takes as it arrives at the server (nil and pg.null as
-- NULL, booleans, integers at int64's bounds, floats as %.17g text,
-- strings with NUL bytes for text and bytea parameters, binary and text in
-- one Bind), through db:query, tx:query and db:pipeline alike, more
-- parameters than fit on its C stack, the bound of 65535, and the bytes
-- themselves against proto.lua's Lua reference.
local H = require "helper"
local P = require "pg_helper"

local PRELUDE = [[
local http = require "moonhttp"
local pg = require "moonhttp.pg"
local function show(v)
  if v == pg.null then return "null" end
  return (math.type(v) or type(v)) .. ":" .. tostring(v)
end
]]

describe("moonhttp.pg's Bind built in C", function()
  local cluster

  setup(function() cluster = P.start() end)
  teardown(function() if cluster then cluster:stop() end end)

  local function run(source)
    return H.run_kv(PRELUDE .. "local db = pg.pool(" .. cluster:pool_opts("trust") .. ")\n", source)
  end

  it("sends each kind of Lua value as the server reads it", function()
    local kv = run([==[
-- the parameter as text on the server (what was sent), and whether it is NULL
local function sent(v, cast)
  local rows, err = db:query("SELECT $1::" .. (cast or "text") .. "::text AS t, $1::" .. (cast or "text")
    .. " IS NULL AS n", v)
  if not rows then return "error:" .. tostring(err) end
  return show(rows[1].t) .. (rows[1].n and " NULL" or "")
end
print("nil", sent(nil))
print("null", sent(pg.null))
print("true", sent(true, "bool"))
print("false", sent(false, "bool"))
print("maxint", sent(math.maxinteger, "int8"))
print("minint", sent(math.mininteger, "int8"))
print("zero", sent(0, "int8"))
print("tenth", sent(0.1))
print("big", sent(-1.5e300))
print("inf", sent(math.huge, "float8"))
print("ninf", sent(-math.huge, "float8"))
print("nan", sent(0/0, "float8"))
print("empty", sent(""))
print("utf8", sent("héllo ☃"))
-- back as Lua values: int8 at both bounds, a float exactly
local rows = assert(db:query("SELECT $1::int8 AS a, $2::int8 AS b, $3::float8 AS f, $4::bool AS t",
  math.maxinteger, math.mininteger, 0.1, true))
print("back", show(rows[1].a), show(rows[1].b), rows[1].f == 0.1, show(rows[1].t))
]==])
    assert.equal("null NULL", kv["nil"])
    assert.equal("null NULL", kv.null)
    assert.equal("string:true", kv["true"])
    assert.equal("string:false", kv["false"])
    assert.equal("string:9223372036854775807", kv.maxint)
    assert.equal("string:-9223372036854775808", kv.minint)
    assert.equal("string:0", kv.zero)
    assert.equal("string:0.10000000000000001", kv.tenth)
    assert.equal("string:-1.5000000000000001e+300", kv.big) -- %.17g, every digit a float8 needs
    assert.equal("string:Infinity", kv.inf)
    assert.equal("string:-Infinity", kv.ninf)
    assert.equal("string:NaN", kv.nan)
    assert.equal("string:", kv.empty)
    assert.equal("string:héllo ☃", kv.utf8)
    assert.equal("integer:9223372036854775807\tinteger:-9223372036854775808\ttrue\tboolean:true", kv.back)
  end)

  it("sends NUL bytes as bytea in binary and refuses them in text, keeping the connection", function()
    local kv = run([==[
local blob = "a\0b\255\0"
local rows = assert(db:query("SELECT $1::bytea AS b, length($1::bytea) AS n, $2::text AS t", blob, "x"))
print("bytea", rows[1].b == blob, rows[1].n, rows[1].t)
-- binary and text parameters in one Bind (a format code for each), and NULL among them
rows = assert(db:query("SELECT $1::text AS a, $2::bytea AS b, $3::int AS c, $4::bytea IS NULL AS d",
  "t", "\0", 7, nil))
print("mixed", rows[1].a, rows[1].b == "\0", rows[1].c, rows[1].d)
local r, err = db:query("SELECT $1::text AS t", "a\0b")
print("nul_text", r, err.code, err.message)
rows = assert(db:query("SELECT $1::text AS t", "still usable"))
print("after", rows[1].t, db:stats().open)
]==])
    assert.equal("true\t5\tx", kv.bytea)
    assert.equal("t\ttrue\t7\ttrue", kv.mixed)
    assert.equal("nil\t22021\tparameter $1 contains a NUL byte, which text cannot carry (send bytes as bytea)",
      kv.nul_text)
    assert.equal("still usable\t1", kv.after)
  end)

  it("takes the same values in a transaction, a pipeline and past its C stack", function()
    local kv = run([==[
local N = 40 -- more than the 8 parameters moonhttp.pgbind keeps on its C stack
local args, cols = {}, {}
for i = 1, N do
  local k = i % 5
  args[i] = k == 0 and i or k == 1 and ("s" .. i) or k == 2 and (i % 2 == 0) or k == 3 and i + 0.5 or pg.null
  cols[i] = "$" .. i .. "::text"
end
local sql = "SELECT concat_ws('|', " .. table.concat(cols, ", ") .. ") AS s"
local want = {}
for i = 1, N do
  local a = args[i]
  if a ~= pg.null then want[#want + 1] = type(a) == "number" and string.format(math.type(a) == "integer" and "%d" or "%.17g", a) or tostring(a) end
end
want = table.concat(want, "|")
local rows = assert(db:query(sql, table.unpack(args, 1, N)))
print("many", rows[1].s == want, #rows[1].s)
local tx_s = assert(db:transaction(function(tx)
  return assert(tx:query(sql, table.unpack(args, 1, N)))[1].s
end))
print("tx", tx_s == want)
local results = assert(db:pipeline(function(p)
  p:query(sql, table.unpack(args, 1, N))
  p:query("SELECT $1::int8 AS a, $2::text AS b, $3::bool AS c", math.mininteger, "x", false)
  p:query("SELECT $1::text AS t", "a\0b")
  p:query("SELECT $1::bytea AS b", "\0\1")
end))
print("pipe", results[1][1].s == want, results[2][1].a == math.mininteger, results[2][1].b, results[2][1].c,
  results[3].code, results[4][1].b == "\0\1")
]==])
    assert.equal("true", kv.many:match("^(%S+)"))
    assert.equal("true", kv.tx)
    assert.equal("true\ttrue\tx\tfalse\t22021\ttrue", kv.pipe)
  end)

  it("answers more than 65535 parameters with an error, not a crash", function()
    local kv = run([==[
local args = {}
local n = 65536
local r, err = db:query("SELECT 1", table.unpack(args, 1, n))
print("query", r, err.code, err.message)
local results = assert(db:pipeline(function(p)
  p:query("SELECT 1", table.unpack(args, 1, n))
  p:query("SELECT 2 AS two")
end))
print("pipe", results[1].code, results[2][1].two)
local ok, e = pcall(db.query, db, "SELECT $1", print)
print("misuse", ok, e)
print("after", assert(db:query("SELECT $1::int AS x", 3))[1].x)
]==])
    assert.equal("nil\t54000\ttoo many parameters: 65536 (at most 65535)", kv.query)
    assert.equal("54000\t2", kv.pipe)
    assert.equal("false\tpg: parameter $1: cannot send a function", kv.misuse)
    assert.equal(3, kv.after)
  end)

  it("builds the bytes proto.lua's Lua reference builds", function()
    local kv = H.run_kv(nil, [==[
local bind = require("moonhttp.pgbind").bind
local proto = require "moonhttp.pg.proto"
local null = require("moonhttp.pg.types").null
local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end
local cases = {
  { "mh1", {}, {} },
  { "mh12", { 42, "ab", nil, null, true, 1.5 }, { 0, 0, 0, 0, 0, 0 } },
  { "", { "\0\1", "x" }, { 17, 25 } },
  { "s", { string.rep("v", 70000) }, {} },
}
local same = 0
for i, c in ipairs(cases) do
  local stmt, args, ptypes = c[1], c[2], c[3]
  local n = #ptypes > 0 and #ptypes or #args
  local values, formats = {}, {}
  for j = 1, n do
    local a = args[j]
    if a == nil or a == null then values[j] = nil
    elseif type(a) == "number" then values[j] = math.type(a) == "integer" and string.format("%d", a) or string.format("%.17g", a)
    else values[j] = tostring(a) end
    formats[j] = ptypes[j] == 17 and 1 or 0
  end
  local want = proto.bind("", stmt, n, values, formats) .. proto.EXECUTE_SYNC
  local got = bind(stmt, ptypes, null, table.unpack(args, 1, n))
  if got == want then same = same + 1 else print("diff" .. i, hex(got):sub(1, 200), hex(want):sub(1, 200)) end
end
print("same", same, #cases)
print("nul", bind("s", {}, null, "ok", "a\0"))
print("bad", pcall(bind, "s", {}, null, {}))
]==])
    assert.equal("4\t4", kv.same)
    assert.equal("nil\tnul\t2", kv.nul)
    assert.equal("false\tpg: parameter $1: cannot send a table", kv.bad)
  end)
end)
