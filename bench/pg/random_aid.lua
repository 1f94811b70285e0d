-- wrk: GET /account/<random aid of pgbench's scale 1>, as pgbench -S picks them.
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/account/" .. math.random(1, 100000))
end
