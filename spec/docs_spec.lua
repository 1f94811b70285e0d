-- The documentation keeps up with the code: README.md's quick start answers
-- what it says it answers, every complete Lua example in README.md and
-- docs/*.md loads (`moonhttp --check`), and every link between the pages
-- leads to a file that exists (bench/RESULTS.md's too).
local H = require "helper"
local cjson = require "cjson"

local function pages()
  local list = { "README.md", "bench/RESULTS.md" }
  local p = assert(io.popen("ls docs/*.md"))
  for f in p:lines() do list[#list + 1] = f end
  p:close()
  return list
end

-- The ```lua blocks of a page, each with the line it starts on.
local function lua_blocks(path)
  local text = assert(H.read_file(path), path)
  local blocks, pos = {}, 1
  while true do
    local s, e = text:find("```lua\n", pos, true)
    if not s then break end
    local close = assert(text:find("\n```", e, true), path .. ": unclosed ```lua block")
    local _, line = text:sub(1, s):gsub("\n", "")
    blocks[#blocks + 1] = { line = line + 1, code = text:sub(e + 1, close) }
    pos = close + 4
  end
  return blocks
end

-- A block is a whole script when it starts by requiring moonhttp (after a
-- comment naming its file, at most); the others are fragments of one.
local function is_script(code)
  local body = code:gsub("^%-%-[^\n]*\n", "")
  return body:find('^local http = require "moonhttp"') ~= nil
end

describe("README.md's quick start", function()
  local srv
  setup(function()
    local code
    for _, b in ipairs(lua_blocks("README.md")) do
      if b.code:find("^%-%- app%.lua\n") then code = b.code end
    end
    assert(code, "README.md has no `-- app.lua` example")
    srv = H.start(code)
  end)
  teardown(function() if srv then srv:stop() end end)

  it("answers the requests it shows", function()
    local res = assert(srv:get("/hello/ann"))
    assert.equal(200, res.status)
    assert.same({ hello = "ann", hits = 1 }, cjson.decode(res.body))
    res = assert(srv:request("POST", "/echo", {}, "hi there"))
    assert.equal(200, res.status)
    assert.equal("hi there", res.body)
  end)
end)

describe("the documentation's Lua examples", function()
  local SECRET = string.rep("0123456789abcdef", 2)
  local scripts = 0
  for _, page in ipairs(pages()) do
    for _, b in ipairs(lua_blocks(page)) do
      if is_script(b.code) then
        scripts = scripts + 1
        it(("%s:%d loads with moonhttp --check"):format(page, b.line), function()
          local out = H.tmpname(".out")
          -- The examples read their secrets from the environment, as an app should.
          local ok = os.execute(("SECRET=%s JWT_SECRET=%s %s --check %s >%s 2>&1 </dev/null")
            :format(SECRET, SECRET, H.shell_quote(H.bin), H.shell_quote(H.script(b.code)), out))
          local text = H.read_file(out) or ""
          os.remove(out)
          H.check_sanitizers(text, page)
          assert(ok == true, ("%s:%d: %s"):format(page, b.line, text))
        end)
      end
    end
  end

  it("include complete scripts", function()
    assert.is_true(scripts >= 5, "found " .. scripts)
  end)
end)

describe("links between the pages", function()
  it("lead to files that exist", function()
    local broken = {}
    for _, page in ipairs(pages()) do
      local dir = page:match("^(.*)/") or "."
      local text = H.read_file(page)
      for target in text:gmatch("%]%(([^)#%s]+)[^)]*%)") do
        if not target:find("^%a+://") then
          local path = dir .. "/" .. target
          if not io.open(path, "r") then broken[#broken + 1] = page .. " -> " .. target end
        end
      end
    end
    assert.same({}, broken)
  end)
end)
