-- Template rendering against the same page built by hand with table.concat
-- (issue: >= 0.8x its speed). A 100-row table of escaped values.
--   build/moonhttp run bench/template.lua [rounds] [renders per round]
-- Prints one line per round and the median of each, and the ratio.
local http = require "moonhttp"
local template = require "moonhttp.template"

local rounds, n = tonumber(arg[1]) or 5, tonumber(arg[2]) or 2000
local esc = http.html.escape

local rows = {}
for i = 1, 100 do
  rows[i] = { id = i, name = "user <" .. i .. ">", email = "u" .. i .. "@example.com", score = i * 7 % 100 }
end

local page = template.compile([[
<table>
{% for _, r in ipairs(rows) do %}
<tr><td>{{ r.id }}</td><td>{{ r.name }}</td><td>{{ r.email }}</td><td>{{ r.score }}</td></tr>
{% end %}
</table>
]], "bench")

local function by_hand(data)
  local b, k = { "<table>\n" }, 1
  for _, r in ipairs(data) do
    b[k + 1] = "<tr><td>"; b[k + 2] = esc(r.id); b[k + 3] = "</td><td>"; b[k + 4] = esc(r.name)
    b[k + 5] = "</td><td>"; b[k + 6] = esc(r.email); b[k + 7] = "</td><td>"; b[k + 8] = esc(r.score)
    b[k + 9] = "</td></tr>\n"
    k = k + 9
  end
  b[k + 1] = "</table>\n"
  return table.concat(b)
end

assert(page{ rows = rows } == by_hand(rows), "the two pages differ")

local function time(fn)
  local t0 = os.clock()
  for _ = 1, n do fn() end
  return (os.clock() - t0) / n * 1e6 -- µs per page
end

local tpl, hand = {}, {}
for round = 1, rounds do -- interleaved
  tpl[round] = time(function() return page{ rows = rows } end)
  hand[round] = time(function() return by_hand(rows) end)
  print(string.format("round %d: template %.1f us/page, by hand %.1f us/page", round, tpl[round], hand[round]))
end
local function median(t) table.sort(t); return t[(#t + 1) // 2] end
local mt, mh = median(tpl), median(hand)
print(string.format("median: template %.1f us (spread %.1f-%.1f), by hand %.1f us (spread %.1f-%.1f); speed ratio %.2fx",
  mt, tpl[1], tpl[#tpl], mh, hand[1], hand[#hand], mh / mt))
