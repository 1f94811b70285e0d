-- The examples keep working: they are what new users run first.
local H = require "helper"
local cjson = require "cjson"

describe("examples/api.lua", function()
  local srv
  setup(function() srv = H.start("examples/api.lua") end)
  teardown(function() srv:stop() end)

  local bodies = {
    ["/api/users"] = '{"name":"baseline","users":[]}',
    ["/api/users/"] = '{"name":"baseline","user":{}}',
    ["/api/users/42"] = '{"name":"baseline","user":{}}',
    ["/api/orders"] = '{"name":"baseline","orders":[]}',
    ["/api/orders/7"] = '{"name":"baseline","order":{}}',
    ["/api/items/0"] = '{"name":"baseline","item":{}}',
    ["/api/items/7"] = '{"name":"baseline","item":{}}',
  }
  for path, body in pairs(bodies) do
    it("serves " .. path .. " byte for byte", function()
      local res = assert(srv:get(path))
      assert.equal(200, res.status)
      assert.equal(body, res.body)
      assert.equal("application/json", res.headers["content-type"])
    end)
  end

  it("has exactly the 12 routes of the article", function()
    assert.equal(404, srv:get("/api/items/8").status)
    assert.equal(404, srv:get("/api/items").status)
    local code, out = H.run({ "--check", "examples/api.lua" })
    assert.equal(0, code)
    assert.truthy(out:find("(12 routes)", 1, true))
  end)
end)

describe("examples/todo.lua", function()
  local srv
  setup(function() srv = H.start("examples/todo.lua") end)
  teardown(function() srv:stop() end)

  it("creates, reads, updates, lists and deletes", function()
    local res = assert(srv:request("POST", "/api/todos", {}, '{"title":"write docs"}'))
    assert.equal(201, res.status)
    assert.equal("/api/todos/1", res.headers["location"])
    assert.same({ id = 1, title = "write docs", done = false }, cjson.decode(res.body))
    res = assert(srv:request("PUT", "/api/todos/1", {}, '{"title":"write docs","done":true}'))
    assert.is_true(cjson.decode(res.body).done)
    res = assert(srv:get("/api/todos?done=true"))
    assert.equal("1", res.headers["x-total"])
    assert.equal(204, srv:request("DELETE", "/api/todos/1").status)
    res = assert(srv:get("/api/todos"))
    assert.equal("[]", res.body)
  end)

  it("answers errors as JSON", function()
    local res = assert(srv:get("/api/todos/99"))
    assert.equal(404, res.status)
    assert.equal("no todo 99", cjson.decode(res.body).error)
    res = assert(srv:request("POST", "/api/todos", {}, "not json"))
    assert.equal(422, res.status)
    res = assert(srv:request("PATCH", "/api/todos/1"))
    assert.equal(405, res.status)
    assert.equal("allowed: DELETE, GET, HEAD, PUT", cjson.decode(res.body).error)
    res = assert(srv:get("/nowhere"))
    assert.equal(404, res.status)
    assert.equal("no route for /nowhere", cjson.decode(res.body).error)
  end)
end)

describe("examples/todo.lua with two workers", function()
  -- The list is in a shared dict: with a Lua table per worker, the two workers
  -- would hand out the same ids and each list only its own items. Every
  -- request is a new connection, so both workers take some of them.
  it("hands out unique ids and keeps every item", function()
    local srv = H.start("examples/todo.lua", { flags = { "--workers", "2" } })
    local ids = {}
    for i = 1, 20 do
      local res = assert(srv:request("POST", "/api/todos", {}, '{"title":"item ' .. i .. '"}'))
      assert.equal(201, res.status)
      local id = cjson.decode(res.body).id
      assert.is_nil(ids[id], "duplicate id " .. tostring(id))
      ids[id] = true
    end
    local res = assert(srv:get("/api/todos"))
    assert.equal("20", res.headers["x-total"])
    assert.equal(20, #cjson.decode(res.body))
    srv:stop()
  end)
end)
