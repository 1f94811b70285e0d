-- http.json.encode against a reference written from its rules in Lua (the
-- same traversal: `next` follows lua_next), on thousands of generated
-- values in the same process, so that key order, which changes from one
-- process to the next with Lua's string seed, is compared too.
local H = require "helper"

-- The reference: a table marked by __jsonarray, or whose keys are exactly
-- 1..#t (#t > 0), is a list; other tables are objects with number keys
-- written as strings; integers in decimal, floats in the shorter of %.15g
-- and %.17g that reads back the same; control bytes, 0x7f, '"' and '\'
-- escaped; the encoder's errors, the first one met in this order.
local REF = [==[
local json = http.json
local ESC = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\t"] = "\\t", ["\n"] = "\\n",
  ["\f"] = "\\f", ["\r"] = "\\r" }
local function str(s)
  return '"' .. s:gsub('[%c"\\]', function(c) return ESC[c] or string.format("\\u%04x", c:byte()) end) .. '"'
end
local function num(v)
  if math.type(v) == "integer" then return string.format("%d", v) end
  if v ~= v or v == math.huge or v == -math.huge then error("cannot encode NaN or infinity", 0) end
  local s = string.format("%.15g", v)
  if tonumber(s) ~= v then s = string.format("%.17g", v) end
  return s
end
local enc
local function tbl(t, depth, out)
  if depth > 1000 then error("nesting deeper than 1000 (a table that contains itself?)", 0) end
  local mt = getmetatable(t)
  local n = rawlen(t)
  local list = type(mt) == "table" and rawget(mt, "__jsonarray") ~= nil
  if not list and n > 0 then
    local count = 0
    list = true
    for k in next, t do
      if math.type(k) ~= "integer" or k < 1 or k > n then list = false break end
      count = count + 1
    end
    list = list and count == n
  end
  if list then
    out[#out + 1] = "["
    for i = 1, n do
      if i > 1 then out[#out + 1] = "," end
      enc(rawget(t, i), depth + 1, out)
    end
    out[#out + 1] = "]"
    return
  end
  out[#out + 1] = "{"
  local first = true
  for k, v in next, t do
    if not first then out[#out + 1] = "," end
    first = false
    if type(k) == "string" then out[#out + 1] = str(k)
    elseif type(k) == "number" then out[#out + 1] = '"' .. num(k) .. '"'
    else error("table keys must be strings or numbers", 0) end
    out[#out + 1] = ":"
    enc(v, depth + 1, out)
  end
  out[#out + 1] = "}"
end
enc = function(v, depth, out)
  local t = type(v)
  if t == "nil" or v == json.null then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "number" then out[#out + 1] = num(v)
  elseif t == "string" then out[#out + 1] = str(v)
  elseif t == "table" then tbl(v, depth, out)
  else error("cannot encode a " .. t, 0) end
end
local function ref(v)
  local out = {}
  local ok, err = pcall(enc, v, 0, out)
  if not ok then return nil, err end
  return table.concat(out)
end

local checked, bad = 0, {}
local function check(v)
  checked = checked + 1
  local want, werr = ref(v)
  local ok, got = pcall(json.encode, v)
  if ok and got == want then return end
  if not ok and werr and got:find("json.encode: " .. werr, 1, true) then return end
  if #bad < 3 then bad[#bad + 1] = ("want %s, got %s"):format(want or werr, got):sub(1, 300) end
end
]==]

-- Values made by a seeded generator: lists, marked lists, rows with the
-- same keys (the encoder remembers clean keys), keys that need escaping,
-- integer keys in and out of 1..n, float keys, mixed tables, and every
-- kind of scalar, integers at the limits among them.
local GEN = [==[
math.randomseed(tonumber(arg[1]))
local KEYS = { "id", "randomNumber", "a", 'b"q', "ключ", "x\1y", "", "message", "a\127" }
local function gen(d)
  local r = math.random(1, d > 4 and 7 or 12)
  if r == 1 then return math.random(-100000, 100000) end
  if r == 2 then return (math.random() - 0.5) * 10 ^ math.random(-300, 300) end
  if r == 3 then return KEYS[math.random(#KEYS)] end
  if r == 4 then return math.random(2) == 1 end
  if r == 5 then return json.null end
  if r == 6 then return ({ math.mininteger, math.maxinteger, 0, -1, 10 ^ 15, 2 ^ 53 })[math.random(6)] end
  if r == 7 then return math.random(1, 10) == 1 and {} or math.random(0, 10 ^ math.random(1, 18)) end
  local t, kind, n = {}, math.random(1, 7), math.random(0, 6)
  for i = 1, n do
    if kind == 1 then t[i] = gen(d + 1)
    elseif kind == 2 then t[KEYS[math.random(#KEYS)]] = gen(d + 1)
    elseif kind == 3 then t[math.random(-1, 8)] = gen(d + 1)
    elseif kind == 4 then t[i] = gen(d + 1); t["k" .. i] = gen(d + 1)
    elseif kind == 5 then t[i + 0.5] = gen(d + 1)
    elseif kind == 6 then t[#t + 1] = { id = i, randomNumber = gen(d + 1) }
    else t[i] = gen(d + 1) end
  end
  if kind == 1 and n > 2 and math.random(2) == 1 then t[2] = nil end -- a hole
  if (kind == 6 or kind == 7) and math.random(2) == 1 then json.array(t) end
  return t
end
for _ = 1, 4000 do check(gen(0)) end
]==]

describe("http.json.encode against a reference encoder", function()
  it("writes the reference's bytes or raises its error for 4,000 generated values", function()
    local kv, out = H.run_kv(nil, REF .. GEN .. [[
print("checked", checked)
print("bad", #bad)
for _, b in ipairs(bad) do print("mismatch", b) end
]], "34")
    assert.equal(4000, kv.checked, out)
    assert.equal(0, kv.bad, out)
  end)

  it("agrees on the edges: holes, integer and float keys, the limits, depth, cycles", function()
    local kv, out = H.run_kv(nil, REF .. [[
local holes = { 1, 2, 3 }
holes[2] = nil
local cycle = {}
cycle.self = cycle
local listcycle = json.array({})
listcycle[1] = listcycle
local function nest(n, list)
  local root = {}
  local t = root
  for _ = 2, n do
    local c = {}
    if list then t[1] = c else t.x = c end
    t = c
  end
  return root
end
local ints = {}
for k = 0, 18 do
  local p = math.tointeger(10 ^ k)
  for _, v in ipairs({ p - 1, p, p + 1, -p + 1, -p, -p - 1 }) do ints[#ints + 1] = v end
end
ints[#ints + 1] = math.maxinteger
ints[#ints + 1] = math.mininteger
ints[#ints + 1] = math.mininteger + 1
for _, v in ipairs({
  holes, { [1] = 1, [3] = 3 }, { [0] = "zero" }, { [-1] = 1, [1] = 2 }, { 1, 2, x = 3 },
  { [1] = "a", [2] = "b" }, { [2 ^ 53] = 1, [1.5] = 2 }, { [math.huge] = 1 }, { [true] = 1 },
  { {}, { {} }, json.array({}), json.empty_array, { a = {} } },
  { -0.0, 0.1, 1 / 3, 1e15, 1e16, 2 ^ 63, -2 ^ 63, 1e300, 5e-324, 2 ^ -1074 },
  { 0 / 0 }, { -math.huge }, ints, cycle, listcycle, nest(1001, true), nest(1001, false),
  nest(1002, true), nest(1002, false), { f = print }, { co = coroutine.create(print) },
  setmetatable({ x = 1 }, { __jsonarray = true }), setmetatable({ 1, 2 }, {}),
}) do check(v) end
print("checked", checked)
print("bad", #bad)
for _, b in ipairs(bad) do print("mismatch", b) end
]])
    assert.equal(24, kv.checked, out)
    assert.equal(0, kv.bad, out)
  end)
end)

describe("http.json.array(n)", function()
  it("makes an empty list with room for n entries", function()
    local kv, out = H.run_kv(nil, [[
local json = http.json
local t = json.array(3)
print("empty", json.encode(t) .. " " .. #t .. " " .. tostring(next(t) == nil))
t[1], t[2], t[3] = "a", 2, { id = 3 }
print("filled", json.encode(t))
t[4] = true -- past the room: it grows as any table
print("grown", json.encode(t))
print("zero", json.encode(json.array(0)))
-- the room is taken at once: 100,000 list slots, not an empty table
collectgarbage("stop")
local before = collectgarbage("count")
local big = json.array(100000)
print("kib", math.floor(collectgarbage("count") - before) .. " " .. #big)
]])
    assert.equal("[] 0 true", kv.empty, out)
    assert.equal('["a",2,{"id":3}]', kv.filled, out)
    assert.equal('["a",2,{"id":3},true]', kv.grown, out)
    assert.equal("[]", kv.zero, out)
    local kib, len = kv.kib:match("^(%d+) (%d+)$")
    assert.is_true(tonumber(kib) >= 1500, out) -- 100,000 slots of 16 bytes
    assert.equal("0", len)
  end)

  for _, row in ipairs({
    { "-1", "room for 0..16777216 entries" },
    { "2.5", "number has no integer representation" },
    { "2 ^ 24 + 1", "room for 0..16777216 entries" },
    { "'3'", "table expected, got string" },
  }) do
    it("raises for json.array(" .. row[1] .. ")", function()
      local kv, out = H.run_kv(nil, "print('err', select(2, pcall(http.json.array, " .. row[1] .. ")))")
      assert.truthy(tostring(kv.err):find(row[2], 1, true), out)
    end)
  end
end)
