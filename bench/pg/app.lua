-- bench/pg.sh: one row by primary key per request (pgbench's -S query).
local http = require "moonhttp"
local pg = require "moonhttp.pg"

local db = pg.pool{
  host = "127.0.0.1",
  port = tonumber(os.getenv("PGPORT")),
  user = "postgres",
  size = tonumber(os.getenv("PG_POOL_SIZE") or "10"),
}

http.handle("GET /account/{id}", function(req, res)
  local rows, err = db:query("SELECT abalance FROM pgbench_accounts WHERE aid = $1", req:pathvalue("id"))
  if not rows then
    res:status(503)
    res:write(tostring(err))
    return
  end
  res:write(tostring(rows[1] and rows[1].abalance))
end)

-- The same request without the query (bench/pg.sh --callgrind: the difference is the client's cost).
http.handle("GET /plain/{id}", function(req, res) res:write(tostring(#req:pathvalue("id"))) end)

http.handle("GET /stats", function(req, res) res:json(db:stats()) end)
