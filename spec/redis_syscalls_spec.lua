-- The system calls around a Redis round trip (issue 34, bench/TFB.md): a
-- pooled Redis connection and a keep-alive HTTP connection whose handler
-- waits for a reply keep their epoll registration (src/net/socket.c set_io
-- and mh_socket_cancel_read, src/http/conn.c mh_conn_update_io), and no
-- read is tried right after the command is written (mh_socket_fill): it
-- could only fail with EAGAIN. Counted with strace on the worker, through
-- the real binary against a real redis-server.
local H = require "helper"
local O = require "ops_helper"

local APP = [[
local http = require "moonhttp"
local redis = require "moonhttp.redis"
local REDIS = { port = %d, pool_size = 4 }
http.handle("/one", function(req, res)
  local r = assert(redis.connect(REDIS))
  local v = assert(r:get("sys:k"))
  assert(r:keepalive())
  res:write(v)
end)
http.handle("/many", function(req, res)
  local n = tonumber(req:arg("n"))
  for _ = 1, n do
    local r = assert(redis.connect(REDIS))
    -- a reply that comes a millisecond or two later (redis-server --hz 500),
    -- as one does under load, however slow strace makes this worker
    assert(r:blpop("sys:empty", 0.001) == redis.null)
    assert(r:keepalive())
  end
  res:write("done")
end)
-- two tasks, one connection: each command's connection is handed over
-- from the other task through the pool
http.handle("/contended", function(req, res)
  local n = tonumber(req:arg("n"))
  local ONE = { port = %d, pool_size = 1 }
  local function loop()
    for _ = 1, n do
      local r = assert(redis.connect(ONE))
      assert(r:get("sys:k") == "v")
      assert(r:keepalive())
    end
  end
  local a, b = http.spawn(loop), http.spawn(loop)
  assert(a:join())
  assert(b:join())
  res:write("done")
end)
]]

-- Runs fn while strace counts the worker's epoll_ctl and read calls:
-- returns the epoll_ctl calls, the failed reads and strace's summary.
local function counted(pid, fn)
  local calls, errors, summary = O.syscalls(pid, "epoll_ctl,read", fn)
  return calls.epoll_ctl, errors.read, summary
end

describe("Redis round trips", function()
  local srv, app
  setup(function()
    srv = H.redis("--hz 500")
    assert(os.execute(string.format("redis-cli -p %d SET sys:k v >/dev/null", srv.port)))
    app = H.start(string.format(APP, srv.port, srv.port))
  end)
  teardown(function()
    if app then app:stop() end
    if srv then srv:stop() end
  end)

  local need_strace = O.need_strace

  it("cost no epoll_ctl and no failed read per command on a pooled connection", function()
    if not need_strace() then return end
    assert.equal(200, H.request(app.port, "GET", "/many?n=5").status)
    local n, res = 100, nil
    local ctl, failed, summary = counted(app.pid, function()
      res = H.request(app.port, "GET", "/many?n=" .. n)
    end)
    assert.equal(200, res.status, res.body)
    -- before: an epoll_ctl (EEXIST) at each reply's wait and each park, and a
    -- read failing with EAGAIN right after each command was written
    assert.is_true(ctl < n / 10, string.format("%d epoll_ctl for %d commands:\n%s", ctl, n, summary))
    assert.is_true(failed < n / 10, string.format("%d failed reads for %d commands:\n%s", failed, n, summary))
  end)

  it("cost no epoll_ctl per keep-alive request whose handler waits for Redis", function()
    if not need_strace() then return end
    local c = H.connect(app.port)
    local n = 200
    local ctl, _, summary = counted(app.pid, function()
      for _ = 1, n do
        c:send("GET /one HTTP/1.1\r\nHost: x\r\n\r\n")
        local res = c:read_response()
        assert.equal(200, res.status)
        assert.equal("v", res.body)
      end
    end)
    c:close()
    -- before: one for the Redis socket and one for the client's connection per request
    assert.is_true(ctl < n / 10, string.format("%d epoll_ctl for %d requests:\n%s", ctl, n, summary))
  end)

  it("cost no epoll_ctl when a pooled connection is handed to a task waiting for it", function()
    if not need_strace() then return end
    assert.equal(200, H.request(app.port, "GET", "/contended?n=5").status)
    local n, res = 100, nil
    local ctl, _, summary = counted(app.pid, function()
      res = H.request(app.port, "GET", "/contended?n=" .. n)
    end)
    assert.equal(200, res.status, res.body)
    -- before: the watcher stopped when the pool handed the connection over,
    -- started again in the waiting task's next iteration
    assert.is_true(ctl < n / 5, string.format("%d epoll_ctl for %d hand-overs:\n%s", ctl, 2 * n, summary))
  end)

  it("still reads a pipelined request sent while the handler waits", function()
    -- the read interest kept armed during the handler sees these bytes and
    -- drops itself; they are read once the first response is out
    local c = H.connect(app.port)
    c:send("GET /one HTTP/1.1\r\nHost: x\r\n\r\nGET /one HTTP/1.1\r\nHost: x\r\n\r\n"
      .. "GET /one HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    for _ = 1, 3 do
      local res = c:read_response()
      assert.equal(200, res.status)
      assert.equal("v", res.body)
    end
    c:close()
  end)
end)
