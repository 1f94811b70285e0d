-- The lua-language-server annotations of share/meta/moonhttp/ (installed
-- to share/moonhttp/meta, docs/guide/editor.md) describe the API the binary
-- has: every function the reference documents is annotated and every
-- annotated function exists; every method of req, res, ws and the other
-- objects the API hands an app is annotated and every annotated one
-- exists; every option a reference page's table lists is a field of its
-- ---@class.
local H = require "helper"
local API = require "helpers.api"

local DIR = "share/meta/moonhttp"

-- The annotation files: name -> text.
local function files()
  local list = {}
  local p = assert(io.popen("ls " .. DIR .. "/*.lua"))
  for path in p:lines() do list[path] = assert(H.read_file(path)) end
  p:close()
  assert(next(list), "no annotation files in " .. DIR)
  return list
end

-- The local tables the annotations declare the objects' methods on, and
-- the names the binary's objects go by (helpers/api.lua's methods and
-- object_methods).
local OBJECTS = {
  Request = "req", Response = "res", WebSocket = "ws", Group = "api", Thread = "t", Timer = "timer",
  Channel = "ch", Subscription = "sub", SharedDict = "d", Counter = "counter", Gauge = "gauge",
  Histogram = "histogram", Socket = "sock", Upstream = "group", FetchResponse = "resp", Client = "client",
  Cache = "c", Pool = "db", Presence = "p", Limiter = "limiter", Redis = "r", Session = "s",
  SessionStore = "store", SSE = "sse",
}

-- What a set of annotation files declares: functions ("http.fetch"),
-- methods of the OBJECTS ("req:body") and each ---@class's fields
-- (its parents' included).
local function declared(texts)
  local functions, methods, classes, parents = {}, {}, {}, {}
  for _, text in pairs(texts) do
    local class
    for line in (text .. "\n"):gmatch("([^\n]*)\n") do
      local t, rest = line:match("^function ([%w_]+)%.([%w_%.]+)%(")
      if t then functions[#functions + 1] = t .. "." .. rest end
      local obj, m = line:match("^function ([%w_]+):([%w_]+)%(")
      if obj and OBJECTS[obj] then methods[#methods + 1] = OBJECTS[obj] .. ":" .. m end
      local c, parent = line:match("^%-%-%-@class ([%w_%.]+)%s*:?%s*([%w_%.]*)")
      if c then
        class = c
        classes[c] = classes[c] or {}
        parents[c] = parent ~= "" and parent or nil
      elseif class and line:find("^%-%-%-@field ") then
        local field = line:match("^%-%-%-@field ([%w_]+)") -- nil for an index type: [string] any
        if field then classes[class][field] = true end
      elseif not line:find("^%-%-%-") then
        class = nil
      end
    end
  end
  for c, fields in pairs(classes) do
    local p = parents[c]
    while p and classes[p] do
      for f in pairs(classes[p]) do fields[f] = true end
      p = parents[p]
    end
  end
  table.sort(functions)
  table.sort(methods)
  return functions, methods, classes
end

-- The members of `list` that `set` lacks.
local function missing(list, set)
  local have, out = {}, {}
  for _, v in ipairs(set) do have[v] = true end
  for _, v in ipairs(list) do
    if not have[v] then out[#out + 1] = v end
  end
  return out
end

-- The option names an option table of a reference page lists: its rows
-- whose first cell is only backticked names (`max_message`, `max_frame`).
local function option_rows(page)
  local names = {}
  for line in assert(H.read_file(page), page):gmatch("[^\n]+") do
    local cell = line:match("^| (`[%w_]+`[^|]-) |")
    if cell and cell:gsub("`[%w_]+`", ""):find("^[%s,]*$") then
      for n in cell:gmatch("`([%w_]+)`") do names[#names + 1] = n end
    end
  end
  assert(#names > 0, page .. " has no option rows")
  return names
end

-- Each reference page with an option table, and the class that describes it.
local OPTION_TABLES = {
  { page = "docs/reference/settings.md", class = "moonhttp.Settings" },
  { page = "docs/reference/fetch.md", class = "moonhttp.FetchOptions" },
  { page = "docs/reference/cache.md", class = "moonhttp.CacheOptions" },
  { page = "docs/reference/ratelimit.md", class = "moonhttp.RateLimitOptions" },
  { page = "docs/reference/websocket-client.md", class = "moonhttp.WebSocketClientOptions" },
  { page = "docs/reference/websocket-proxy.md", class = "moonhttp.RelayOptions" },
  { page = "docs/reference/test.md", class = "moonhttp.TestOptions" },
}

describe("editor annotations (share/meta/moonhttp)", function()
  local functions, methods, classes = declared(files())

  it("annotate every function docs/reference/ documents, and no other", function()
    local text = API.reference_text()
    local real, documented = API.functions(), {}
    for _, name in ipairs(real) do
      if API.documents(text, name) then documented[#documented + 1] = name end
    end
    assert.same({ documented = {}, unknown = {} },
      { documented = missing(documented, functions), unknown = missing(functions, real) })
  end)

  it("annotate every method of the objects the API hands an app, and no other", function()
    local real = API.methods()
    for _, name in ipairs(API.object_methods()) do real[#real + 1] = name end
    table.sort(real)
    assert.same({ real = {}, unknown = {} }, { real = missing(real, methods), unknown = missing(methods, real) })
  end)

  for _, row in ipairs(OPTION_TABLES) do
    it("describe " .. row.page .. "'s options as " .. row.class, function()
      local fields = assert(classes[row.class], "no ---@class " .. row.class)
      local absent = {}
      for _, name in ipairs(option_rows(row.page)) do
        if not fields[name] then absent[#absent + 1] = name end
      end
      assert.same({}, absent)
    end)
  end

  it("are read as written: functions, methods and a class's inherited fields", function()
    local f, m, c = declared { x = table.concat({
      "---@class moonhttp.A", "---@field one? integer", "local http = {}",
      "function http.json.encode(v) end", "---@class moonhttp.B: moonhttp.A", "---@field two string",
      "local Request = {}", "function Request:body() end", "function Other:x() end",
    }, "\n") }
    assert.same({ "http.json.encode" }, f)
    assert.same({ "req:body" }, m)
    assert.same({ one = true, two = true }, c["moonhttp.B"])
    assert.same({ "b" }, missing({ "a", "b" }, { "a", "c" }))
  end)

  it("are files lua-language-server reads as definitions, not modules to run", function()
    for path, text in pairs(files()) do
      assert.matches("^%-%-%-@meta", text, nil, path)
      assert(load(text, "@" .. path)) -- they compile: a syntax error would hide the rest of the file
    end
  end)
end)
