-- JSON that round-trips, http.clock() beside the cached http.now(), and
-- http.log lines without stray values.
local H = require "helper"
local cjson = require "cjson"

local APP = [[
local http = require "moonhttp"
local json = http.json
http.handle("GET /json/{case}", function(req, res)
  local cases = {
    empty_marked = json.array({}),
    empty_shared = json.empty_array,
    empty_plain = {},
    list = { 1, 2, 3 },
    marked_list = json.array({ "a", "b" }),
    nested = { items = json.array({}) },
    slash = { url = "http://example.com/a/b" },
    escapes = { s = "q\"\\\n\t\1\127é" },
    null = { v = json.null },
    float = { 0.1 },
    third = { 1 / 3 },
    big = { 2 ^ 53 },
    int = { math.maxinteger },
    ints = { 0, -1, 7, 10, -10000, 1234567890, math.mininteger },
    -- every byte that is escaped, and longer than the encoder's first (stack) buffer
    controls = { s = string.char(table.unpack((function()
      local t = {}
      for b = 0, 31 do t[#t + 1] = b end
      t[#t + 1] = 127
      return t
    end)())) },
    long_escaped = { string.rep('a"\1', 5000) },
    long_list = (function() local t = {} for i = 1, 3000 do t[i] = i * 7 end return t end)(),
    rows = (function()
      local t = json.array({})
      for i = 1, 400 do t[i] = { id = i, ['k"ey'] = "v" .. i } end
      return t
    end)(),
    numkey = { [2.5] = true },
    nested_empty = { {}, { {} }, json.array({}), { a = json.empty_array } },
    mixed = { 1, 2, x = 3 },
    intkey = { [5] = "five" },
    hash_list = { [1] = "a", [2] = "b" },
    floats = { -0.0, 1e15, 1e16, 2 ^ 63, 5e-324 },
    tens = { 9, 10, 99, 100, 999, 1000, 9999, 10000, 99999, -10000, 999999999999999999,
      1000000000000000000, math.mininteger + 1 },
    deep_1001 = (function()
      local root = {}
      local t = root
      for _ = 2, 1001 do t[1] = {} t = t[1] end
      return root
    end)(),
  }
  res:json(cases[req:pathvalue("case")])
end)
http.handle("GET /encode-error/{case}", function(req, res)
  local t = {}
  t.self = t
  local long_nan = {}
  for i = 1, 3000 do long_nan[i] = "x" .. i end
  long_nan[3001] = 0 / 0 -- past the first buffer: the grown one is freed before the error
  local deep = {}
  local d = deep
  for _ = 2, 1002 do d.x = {} d = d.x end
  local cases = { fn = { f = print }, cycle = t, nan = { 0 / 0 }, key = { [true] = 1 }, long_nan = long_nan,
    deep_1002 = deep, inf_key = { [math.huge] = 1 } }
  local ok, err = pcall(json.encode, cases[req:pathvalue("case")])
  res:write(tostring(ok), " ", err)
end)
http.handle("GET /roundtrip", function(req, res)
  local v = { b = { 1.5, -2, 1e300, 0.30000000000000004, 1 / 3, -1e-300 }, c = "x/y\1" }
  local d = json.decode(json.encode(v))
  local same = d.c == v.c and #d.b == #v.b
  for i = 1, #v.b do same = same and d.b[i] == v.b[i] end
  res:write(same and "same" or "differs")
end)
http.handle("GET /clock", function(req, res)
  local now0, clock0 = http.now(), http.clock()
  local x = 0
  while http.clock() - clock0 < 0.02 do x = x + 1 end -- busy, no wait
  res:json({ now = http.now() - now0, clock = http.clock() - clock0 })
end)
http.handle("GET /log", function(req, res)
  http.log("info", "plain text line")
  http.log("warn", "several ", 1, " ", nil, true)
  res:write("logged")
end)
]]

describe("http.json.encode", function()
  local srv
  setup(function() srv = H.start(APP) end)
  teardown(function() srv:stop() end)

  for _, row in ipairs({
    { "empty_marked", "[]" },
    { "empty_shared", "[]" },
    { "empty_plain", "{}" },
    { "list", "[1,2,3]" },
    { "marked_list", '["a","b"]' },
    { "nested", '{"items":[]}' },
    { "slash", '{"url":"http://example.com/a/b"}' },
    { "escapes", '{"s":"q\\"\\\\\\n\\t\\u0001\\u007fé"}' },
    { "null", '{"v":null}' },
    { "float", "[0.1]" },
    { "third", "[0.33333333333333331]" },
    { "big", "[9007199254740992]" },
    { "int", "[9223372036854775807]" },
    { "ints", "[0,-1,7,10,-10000,1234567890,-9223372036854775808]" },
    { "controls", '{"s":"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b'
      .. '\\f\\r\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019'
      .. '\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\\u007f"}' },
    { "long_escaped", '["' .. string.rep('a\\"\\u0001', 5000) .. '"]' },
    { "long_list", (function()
      local t = {}
      for i = 1, 3000 do t[i] = tostring(i * 7) end
      return "[" .. table.concat(t, ",") .. "]"
    end)() },
    { "numkey", '{"2.5":true}' },
    { "nested_empty", '[{},[{}],[],{"a":[]}]' },
    { "mixed", '{"1":1,"2":2,"x":3}' },
    { "intkey", '{"5":"five"}' },
    { "hash_list", '["a","b"]' },
    { "floats", "[-0,1e+15,1e+16,9.2233720368547758e+18,4.94065645841247e-324]" },
    { "tens", "[9,10,99,100,999,1000,9999,10000,99999,-10000,999999999999999999,"
      .. "1000000000000000000,-9223372036854775807]" },
    { "deep_1001", string.rep("[", 1000) .. "{}" .. string.rep("]", 1000) },
  }) do
    it("encodes " .. row[1] .. " as " .. (#row[2] > 80 and row[2]:sub(1, 60) .. "..." or row[2]), function()
      local res = assert(srv:get("/json/" .. row[1]))
      assert.equal(200, res.status)
      assert.equal("application/json", res.headers["content-type"])
      assert.equal(row[2], res.body)
    end)
  end

  for _, row in ipairs({
    { "fn", "cannot encode a function" },
    { "cycle", "nesting deeper than 1000" },
    { "nan", "cannot encode NaN or infinity" },
    { "key", "table keys must be strings or numbers" },
    { "long_nan", "cannot encode NaN or infinity" },
    { "deep_1002", "nesting deeper than 1000" },
    { "inf_key", "cannot encode NaN or infinity" },
  }) do
    it("refuses " .. row[1], function()
      local body = assert(srv:get("/encode-error/" .. row[1])).body
      assert.truthy(body:find("^false .*json.encode: " .. row[2]:gsub("%p", "%%%0")), body)
    end)
  end

  it("encodes 400 rows (past the first buffer) that decode to the same", function()
    local rows = cjson.decode(assert(srv:get("/json/rows")).body)
    assert.equal(400, #rows)
    for i = 1, 400 do
      assert.same({ id = i, ['k"ey'] = "v" .. i }, rows[i])
    end
  end)

  it("round-trips through decode", function()
    assert.equal("same", srv:get("/roundtrip").body)
  end)

  it("http.now() is the loop's cached time; http.clock() is fresh", function()
    local t = cjson.decode(srv:get("/clock").body)
    assert.equal(0, t.now)
    assert.is_true(t.clock >= 0.02, tostring(t.clock))
  end)

  it("http.log writes the text and nothing more", function()
    assert.equal("logged", srv:get("/log").body)
    local log = srv:logtext()
    assert.truthy(log:find(": plain text line\n", 1, true), log)
    assert.truthy(log:find(": several 1 niltrue\n", 1, true), log) -- no separator, as ngx.log
    assert.falsy(log:find("userdata:", 1, true), log)
  end)
end)
