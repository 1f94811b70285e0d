-- Differential check (issue 30): every hostile row (spec/hostile_rows.lua) is
-- sent to moonhttp and given to h11 (Debian python3-h11, spec/h11_verdict.py),
-- a server-side parser that follows RFC 9112 to the letter on framing. A row
-- fails when moonhttp answers more of its requests than h11 reads whole:
-- moonhttp took bytes as a request (or a body's end) that a strict parser
-- refuses, the shape request smuggling is made of. The other way round
-- (moonhttp refusing what h11 takes) is policy and is not judged here.
local H = require "helper"
local cases = require "hostile_rows"

local PY = "/usr/bin/python3"

-- Statuses that say the request was refused as a message, not answered.
local refusal = { [400] = true, [413] = true, [414] = true, [417] = true, [431] = true,
                  [501] = true, [505] = true }

-- Rows where moonhttp takes more than h11 on purpose, each with the reason.
local differs = {
  -- RFC 9112 §2.2: a server SHOULD ignore at least one empty line before the
  -- request-line; h11 refuses it. Nothing is framed by those bytes.
  ["empty lines before the request are ignored"] = true,
}

local function hex(s) return (s:gsub(".", function(b) return string.format("%02x", b:byte()) end)) end

-- h11's verdict on each row: { taken = n, how = "ok" | "refused" }, by index.
local function h11_verdicts()
  local input = os.tmpname()
  local f = assert(io.open(input, "wb"))
  for i, case in ipairs(cases) do f:write(i, " ", hex(case[2]), "\n") end
  f:close()
  local p = assert(io.popen(PY .. " spec/h11_verdict.py < " .. input .. " 2>&1"))
  local out = p:read("a")
  p:close()
  os.remove(input)
  local verdicts = {}
  for i, taken, how in out:gmatch("(%d+) (%d+) (%a+)\n") do
    verdicts[tonumber(i)] = { taken = tonumber(taken), how = how }
  end
  assert(#verdicts == #cases, "h11_verdict.py: " .. out)
  return verdicts
end

-- The requests moonhttp answered, not refused, before it closed or went quiet.
local function moonhttp_taken(srv, bytes)
  local c = srv:connect(2)
  assert(c:send(bytes))
  local taken = 0
  while true do
    local res = c:read_response()
    if not res then break end
    if not refusal[res.status] then taken = taken + 1 end
    c:settimeout(0.3) -- the first answer is there by now: later ones come at once or not at all
  end
  c:close()
  return taken
end

describe("moonhttp against h11 on the hostile rows", function()
  local srv, verdicts
  setup(function()
    verdicts = h11_verdicts()
    srv = H.start("spec/apps/basic.lua", { flags = { "--max-body-bytes", "1024", "--max-header-bytes", "2048" } })
  end)
  teardown(function() srv:stop() end)

  it("h11 is there and refuses a classic smuggling shape", function()
    local i
    for k, case in ipairs(cases) do
      if case[1] == "two bytes after chunk data that are not CRLF" then i = k end
    end
    assert.same({ taken = 0, how = "refused" }, verdicts[i])
  end)

  for i, case in ipairs(cases) do
    it(case[1], function()
      if differs[case[1]] then return end
      local v = verdicts[i]
      local taken = moonhttp_taken(srv, case[2])
      assert(taken <= v.taken, string.format(
        "moonhttp answered %d request(s), h11 read %d whole (%s)", taken, v.taken, v.how))
    end)
  end
end)
