-- db:pipeline against a real PostgreSQL 15 (spec/pg_helper.lua's cluster):
-- the queries of a pipeline sent at once on one connection, their answers
-- in order, an error in the middle standing in its query's place while the
-- others run, pipelines longer than one write window, statements prepared
-- and evicted around a pipeline, the one-at-a-time path when they do not
-- fit the statement cache, pipelines inside a transaction, and misuse.
local H = require "helper"
local P = require "pg_helper"

local PRELUDE = [[
local http = require "moonhttp"
local pg = require "moonhttp.pg"
local function checkouts(s) return s.connects + s.reuses end
]]

describe("moonhttp.pg pipelines", function()
  local cluster

  setup(function() cluster = P.start() end)
  teardown(function() if cluster then cluster:stop() end end)

  local function run(source, extra)
    return H.run_kv(PRELUDE .. "local OPTS = " .. cluster:pool_opts("trust", extra)
      .. "\nlocal db = pg.pool(OPTS)\n", source)
  end

  -- One pipeline with errors at each stage: a unique violation when
  -- executing, a syntax error when preparing, a NUL the client refuses, a
  -- division by zero; the queries after each still run.
  local MIXED = [==[
assert(db:exec("create table if not exists pl(id int primary key, v text)"))
assert(db:exec("truncate pl"))
assert(db:query("select 1 as warm"))
local before = db:stats()
local res = assert(db:pipeline(function(p)
  for i = 1, 5 do p:query("insert into pl values ($1, $2) returning id, v", i, "v" .. i) end
  p:query("insert into pl values ($1, 'dup')", 3)
  p:query("selec oops")
  p:query("select $1::text as t", "a\0b")
  p:query("select 1 / $1::int as x", 0)
  p:query("select count(*) as n, sum(id) as s from pl")
  p:query("select $1::int * 2 as d", 21)
end))
local after = db:stats()
print("n", #res)
print("rows", res[1][1].id, res[1][1].v, res[5][1].id, res[5].affected)
print("errors", res[6].code, res[7].code, res[8].code, res[9].code)
print("is_error", getmetatable(res[6]) == pg.Error and getmetatable(res[9]) == pg.Error)
print("count", res[10][1].n, res[10][1].s)
print("double", res[11][1].d, res[11].columns[1].name)
print("checkouts", checkouts(after) - checkouts(before))
print("stored", db:query("select count(*) as n from pl")[1].n)
print("empty", #db:pipeline(function() end))
print("open", db:stats().open)
]==]

  local function check_mixed(kv)
    assert.equal(11, kv.n)
    assert.equal("1\tv1\t5\t1", kv.rows)
    assert.equal("23505\t42601\t22021\t22012", kv.errors)
    assert.equal("true", kv.is_error)
    assert.equal("5\t15", kv.count)
    assert.equal("42\td", kv.double)
    assert.equal(5, kv.stored)
    assert.equal(0, kv.empty)
    assert.equal(1, kv.open)
  end

  it("runs the queries on one connection, answers in order, an error only ending its own query", function()
    local kv = run(MIXED)
    check_mixed(kv)
    assert.equal(1, kv.checkouts) -- one pool checkout for the 11 queries
  end)

  it("gives the same results one at a time when the statements do not fit the statement cache", function()
    check_mixed(run(MIXED, "statement_cache = 0"))
    check_mixed(run(MIXED, "statement_cache = 3"))
  end)

  -- 500 queries of ~300 bytes each are ~150 KiB of Bind/Execute/Sync: more
  -- than one write window, each answered before the next is sent.
  it("runs pipelines longer than one write window, in order", function()
    local kv = run([==[
local pad = string.rep("p", 300)
local res = assert(db:pipeline(function(p)
  for i = 1, 500 do p:query("select $1::int as i, $2::text as pad", i, pad .. i) end
end))
local ok = #res == 500
for i = 1, #res do ok = ok and res[i][1].i == i and res[i][1].pad == pad .. i end
print("long", ok and #res or "bad")
print("after", db:query("select 1 as one")[1].one)
]==])
    assert.equal(500, kv.long)
    assert.equal(1, kv.after)
  end)

  -- With room for 3 statements, a, b and c cached, a pipeline of a, d and
  -- e must evict b and c (not a, which it binds) to prepare d and e.
  it("prepares new statements without evicting those the pipeline binds", function()
    local kv = run([==[
local c <close> = assert(db:acquire())
for _, s in ipairs({ "a", "b", "c" }) do assert(c:query("select $1::text as " .. s, s)) end
local res = assert(c:pipeline(function(p)
  p:query("select $1::text as a", "A")
  p:query("select $1::text as d", "D")
  p:query("select $1::text as e", "E")
  p:query("select $1::text as a", "A2")
end))
print("got", res[1][1].a, res[2][1].d, res[3][1].e, res[4][1].a)
print("on_server", c:query("select count(*) as n from pg_prepared_statements")[1].n)
]==], "statement_cache = 3")
    assert.equal("A\tD\tE\tA2", kv.got)
    assert.equal(3, kv.on_server)
  end)

  it("inside a transaction: an error aborts the statements after it, and the transaction", function()
    local kv = run([==[
assert(db:exec("create table if not exists plt(id int primary key)"))
local ok, err = db:transaction(function(tx)
  local res = assert(tx:pipeline(function(p)
    p:query("insert into plt values ($1)", 1)
    p:query("insert into plt values ($1)", 1)
    p:query("insert into plt values ($1)", 2)
  end))
  print("in_tx", res[1].affected, res[2].code, res[3].code)
  return true
end)
print("tx", tostring(ok), err and err.code)
print("stored", db:query("select count(*) as n from plt")[1].n)
]==])
    assert.equal("1\t23505\t25P02", kv.in_tx)
    assert.equal("nil\t25P02", kv.tx) -- COMMIT rolled back; the last error is reported
    assert.equal(0, kv.stored)
  end)

  it("raises on misuse before taking a connection", function()
    local kv = run([==[
local function msg(f) local ok, e = pcall(f); return ok and "no error" or e end
print("not_fn", msg(function() db:pipeline("select 1") end))
print("bad_param", msg(function() db:pipeline(function(p) p:query("select $1", print) end) end))
print("bad_sql", msg(function() db:pipeline(function(p) p:query(42) end) end))
local kept
db:pipeline(function(p) kept = p end)
print("late", msg(function() kept:query("select 1") end))
print("open", db:stats().open)
]==])
    assert.truthy(kv.not_fn:find("pg: pipeline expects a function(p)", 1, true), kv.not_fn)
    assert.truthy(kv.bad_param:find("pg: parameter $1: cannot send a function", 1, true), kv.bad_param)
    assert.truthy(kv.bad_sql:find("pg: query expects SQL text as a string", 1, true), kv.bad_sql)
    assert.truthy(kv.late:find("pg: pipeline already sent", 1, true), kv.late)
    assert.equal(0, kv.open)
  end)
end)
