-- Accounts and transfers on PostgreSQL: a pool per worker, parameters
-- (never string building), and a transfer that either happens whole or not
-- at all.
--   PGPORT=5432 PGUSER=postgres moonhttp examples/bank.lua
--   curl -X POST localhost:8080/accounts -d '{"owner":"ann","balance":100}'
--   curl -X POST localhost:8080/transfers -d '{"from":1,"to":2,"amount":30}'
--   curl localhost:8080/accounts/1
local http = require "moonhttp"
local pg = require "moonhttp.pg"

local db = pg.pool{
  host = os.getenv("PGHOST") or "127.0.0.1",
  port = tonumber(os.getenv("PGPORT") or "5432"),
  user = os.getenv("PGUSER") or "postgres",
  password = os.getenv("PGPASSWORD"),
  database = os.getenv("PGDATABASE"),
  size = 10,
  query_timeout = 5,
}

local schema_ready = false
local function ensure_schema()
  if schema_ready then return true end
  local ok, err = db:exec([[
    create table if not exists accounts (
      id bigserial primary key,
      owner text not null,
      balance bigint not null check (balance >= 0));
    create table if not exists transfers (
      id bigserial primary key,
      from_id bigint not null references accounts,
      to_id bigint not null references accounts,
      amount bigint not null check (amount > 0),
      at timestamptz not null default now())]])
  schema_ready = ok ~= nil
  return ok, err
end

local function fail(res, status, message) res:json({ error = message }, status) end

local function body_json(req, res)
  local ok, value = pcall(http.json.decode, req:body() or "")
  if not ok or type(value) ~= "table" then
    fail(res, 400, "expected a JSON object")
    return nil
  end
  return value
end

http.use(function(next)
  return function(req, res)
    local ok, err = ensure_schema()
    if not ok then return fail(res, 503, "database unavailable: " .. tostring(err)) end
    return next(req, res)
  end
end)

http.handle("POST /accounts", function(req, res)
  local a = body_json(req, res)
  if not a then return end
  local balance = math.tointeger(a.balance) -- JSON numbers decode as floats
  if type(a.owner) ~= "string" or not balance then
    return fail(res, 422, "owner (string) and balance (integer) are required")
  end
  local rows, err = db:query("insert into accounts(owner, balance) values ($1, $2) returning *",
    a.owner, balance)
  if not rows then return fail(res, err.code == "23514" and 422 or 503, tostring(err)) end
  res:header("Location", "/accounts/" .. rows[1].id)
  res:json(rows[1], 201)
end)

http.handle("GET /accounts/{id}", function(req, res)
  local rows, err = db:query("select * from accounts where id = $1", req:pathvalue("id"))
  if not rows then
    return fail(res, type(err) == "table" and err.code == "22P02" and 400 or 503, tostring(err))
  end
  if not rows[1] then return fail(res, 404, "no account " .. req:pathvalue("id")) end
  res:json(rows[1])
end)

-- Moves money between two accounts: both balances and the ledger change
-- together, or nothing does (the CHECK on balance refuses an overdraft,
-- which rolls the whole transaction back).
http.handle("POST /transfers", function(req, res)
  local t = body_json(req, res)
  if not t then return end
  local from_id, to_id, amount = math.tointeger(t.from), math.tointeger(t.to), math.tointeger(t.amount)
  if not from_id or not to_id or not amount or amount <= 0 then
    return fail(res, 422, "from, to (account ids) and a positive integer amount are required")
  end
  local result, err = db:transaction(function(tx)
    local from, e = tx:query("update accounts set balance = balance - $1 where id = $2 returning balance",
      amount, from_id)
    if not from then return nil, e end
    local to
    to, e = tx:query("update accounts set balance = balance + $1 where id = $2 returning balance",
      amount, to_id)
    if not to then return nil, e end
    if not from[1] or not to[1] then return nil, "no such account" end
    local ledger
    ledger, e = tx:query("insert into transfers(from_id, to_id, amount) values ($1, $2, $3) returning id, at",
      from_id, to_id, amount)
    if not ledger then return nil, e end
    return { id = ledger[1].id, at = ledger[1].at, from_balance = from[1].balance, to_balance = to[1].balance }
  end)
  if not result then
    if err == "no such account" then return fail(res, 404, err) end
    if type(err) == "table" and err.code == "23514" then return fail(res, 409, "insufficient funds") end
    return fail(res, 503, tostring(err))
  end
  res:json(result, 201)
end)
