-- The response head through http.proxy (lua/moonhttp/proxy.lua send_head):
-- without a response hook the upstream's fields go to the client in the
-- upstream's order (as nginx passes them), repeated names keep their first
-- spelling, and a URL built per request still resolves once the memo of
-- split targets is full.
local H = require "helper"

local UPSTREAM = [[
local http = require "moonhttp"
http.handle("/", function(req, res)
  for _, name in ipairs({ "X-Fox", "X-Ant", "X-Eel", "X-Bee", "X-Dog", "X-Cat", "X-Gnu", "X-Hen" }) do
    res:header(name, name:sub(3):lower())
  end
  res:add_header("X-Multi", "1")
  res:add_header("x-multi", "2")
  res:write("path=" .. req.raw_path)
end)
]]

local FRONT = [[
local http = require "moonhttp"
local UP = %q
http.handle("/plain/", function(req, res) return http.proxy(req, res, UP) end)
http.handle("/via/", function(req, res) return http.proxy(req, res, UP, { via = "mh" }) end)
http.handle("/each/", function(req, res)
  -- a different target string per request
  return http.proxy(req, res, UP .. "/n" .. req.raw_path:match("%%d+"))
end)
]]

local function xnames(res)
  local out = {}
  for _, line in ipairs(res.raw_headers) do
    local name = line:match("^(X%-[^:]+):")
    if name and name ~= "X-Multi" then out[#out + 1] = name end
  end
  return table.concat(out, " ")
end

describe("http.proxy response head", function()
  local up, front
  setup(function()
    up = H.start(UPSTREAM)
    front = H.start(string.format(FRONT, "http://127.0.0.1:" .. up.port))
  end)
  teardown(function()
    if front then front:stop() end
    if up then up:stop() end
  end)

  it("keeps the upstream's order and first spelling", function()
    for _, path in ipairs({ "/plain/a", "/via/a" }) do
      local res = H.request(front.port, "GET", path)
      assert.equal(200, res.status)
      assert.equal("X-Fox X-Ant X-Eel X-Bee X-Dog X-Cat X-Gnu X-Hen", xnames(res))
      local multi = {}
      for _, line in ipairs(res.raw_headers) do
        if line:lower():match("^x%-multi:") then multi[#multi + 1] = line end
      end
      assert.same({ "X-Multi: 1", "X-Multi: 2" }, multi)
    end
    assert.equal("1.1 mh", H.request(front.port, "GET", "/via/a").headers["via"])
  end)

  it("proxies to a URL made per request past the memo's bound", function()
    for i = 1, 300 do
      local res = H.request(front.port, "GET", "/each/" .. i)
      assert.equal(200, res.status)
      assert.equal("path=/n" .. i .. "/each/" .. i, res.body)
    end
  end)
end)
