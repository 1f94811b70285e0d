-- The documentation keeps up with the code: README.md's quick start answers
-- what it says it answers, every complete Lua example in README.md and
-- docs/ loads (`moonhttp --check`) and the ones a page shows answering curl
-- answer so, every other Lua block compiles, docs/reference/ names every
-- function of the Lua modules, and every relative link of every *.md in the
-- tree leads to a file (and heading) that exists.
local H = require "helper"
local cjson = require "cjson"

-- Every Markdown page of the tree (tracked or new, not ignored build output).
local function markdown_files()
  local list = {}
  local p = assert(io.popen("git ls-files --cached --others --exclude-standard '*.md' 2>/dev/null"))
  for f in p:lines() do
    if io.open(f, "r") then list[#list + 1] = f end -- a deleted file stays listed until committed
  end
  p:close()
  assert(#list > 0, "git ls-files found no *.md: run the specs from the repository")
  return list
end

-- The pages whose Lua examples are checked: README.md, docs/ at any depth,
-- bench/README.md.
local function pages()
  local list = {}
  for _, f in ipairs(markdown_files()) do
    if f == "README.md" or f:find("^docs/") or f == "bench/README.md" then list[#list + 1] = f end
  end
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
    local block = { line = line + 1, code = text:sub(e + 1, close) }
    blocks[#blocks + 1] = block
    pos = close + 4
    -- The commands that follow it, when the next block is a ```sh one.
    local ns, ne = text:find("\n```%w*\n", pos)
    if ns and text:sub(ns, ne):find("```sh\n", 1, true) then
      local sclose = text:find("\n```", ne, true)
      if sclose then block.sh = text:sub(ne + 1, sclose) end
    end
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

-- The requests of a ```sh block that a script's example runs: each
-- `curl [-s] [-d 'body'] [-X METHOD] localhost:PORT/path   # expected body`
-- line, as { method, path, body, expected }.
local function curl_lines(sh)
  local list = {}
  for line in (sh or ""):gmatch("[^\n]+") do
    local cmd, expected = line:match("^(curl%s.-)%s+#%s*(.-)%s*$")
    if cmd then
      local body = cmd:match("%-d%s+'([^']*)'") or cmd:match('%-d%s+"([^"]*)"')
      local method = cmd:match("%-X%s+(%u+)") or (body and "POST" or "GET")
      local path = cmd:match("localhost:%d+(/%S*)") or cmd:match("127%.0%.0%.1:%d+(/%S*)")
      if path then
        list[#list + 1] = { method = method, path = path:gsub("^'", ""):gsub("'$", ""), body = body, expected = expected }
      end
    end
  end
  return list
end

-- An answer matches what the page shows: the same JSON value (key order is
-- not the page's to promise), or the same text.
local function same_answer(expected, body)
  if expected:find("^[%[{]") then
    local ok, want = pcall(cjson.decode, expected)
    local ok2, got = pcall(cjson.decode, body)
    local function same(a, b)
      if type(a) ~= "table" or type(b) ~= "table" then return a == b end
      for k, v in pairs(a) do if not same(v, b[k]) then return false end end
      for k in pairs(b) do if a[k] == nil then return false end end
      return true
    end
    return ok and ok2 and same(want, got)
  end
  return body:gsub("\n$", "") == expected
end

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

  -- A script followed by a ```sh block of curl lines, each with the answer
  -- it shows, runs: the server answers each request as the page says.
  local runnable = 0
  for _, page in ipairs(pages()) do
    for _, b in ipairs(lua_blocks(page)) do
      local requests = is_script(b.code) and curl_lines(b.sh) or {}
      if #requests > 0 then
        runnable = runnable + 1
        it(("%s:%d answers the requests the page shows"):format(page, b.line), function()
          local srv = H.start(b.code, { env = ("SECRET=%s JWT_SECRET=%s"):format(SECRET, SECRET) })
          local ok, err = pcall(function()
            for _, r in ipairs(requests) do
              local res = assert(srv:request(r.method, r.path, {}, r.body))
              assert(same_answer(r.expected, res.body), ("%s:%d: %s %s answered %d %q, the page shows %q")
                :format(page, b.line, r.method, r.path, res.status, res.body, r.expected))
            end
          end)
          srv:stop()
          assert(ok, err)
        end)
      end
    end
  end

  -- The other blocks are pieces of a script: they must at least compile.
  for _, page in ipairs(pages()) do
    for _, b in ipairs(lua_blocks(page)) do
      if not is_script(b.code) then
        it(("%s:%d compiles"):format(page, b.line), function()
          local fn, err = load(b.code, "=" .. page .. ":" .. b.line)
          assert(fn, err)
        end)
      end
    end
  end

  it("include complete scripts, and runnable ones", function()
    assert.is_true(scripts >= 5, "found " .. scripts)
    assert.is_true(runnable >= 3, "found " .. runnable)
  end)

  it("are run as the page shows: a wrong answer on the page fails", function()
    assert.same({ { method = "POST", path = "/echo", body = "hi", expected = "hi" },
                  { method = "GET", path = "/x", expected = '{"a":1}' } },
      curl_lines("moonhttp app.lua &\ncurl -d 'hi' localhost:8080/echo   # hi\ncurl -s localhost:8080/x  # {\"a\":1}\n"))
    assert.is_true(same_answer('{"a":1,"b":[2]}', '{"b":[2],"a":1}\n'))
    assert.is_false(same_answer('{"a":1}', '{"a":2}'))
    assert.is_false(same_answer("ok", "not ok\n"))
  end)
end)

-- Every function of the http module and of the moonhttp.* modules, as the
-- binary has them: "http.fetch", "pg.pool", ...
local function lua_functions()
  local script = H.script([[
local http = require "moonhttp"
local out = {}
local function walk(t, prefix, depth)
  for k, v in pairs(t) do
    if type(k) == "string" and not k:find("^_") then
      if type(v) == "function" then out[#out + 1] = prefix .. "." .. k
      elseif type(v) == "table" and depth < 1 and getmetatable(v) == nil then walk(v, prefix .. "." .. k, depth + 1) end
    end
  end
end
walk(http, "http", 0)
for _, m in ipairs { "pg", "redis", "session", "csrf", "template", "test", "ratelimit" } do
  walk(require("moonhttp." .. m), m, 1)
end
table.sort(out)
print(table.concat(out, " "))
]])
  local p = assert(io.popen(H.shell_quote(H.bin) .. " run " .. H.shell_quote(script) .. " 2>&1"))
  local text = p:read("a")
  p:close()
  local list = {}
  for name in text:gmatch("%S+") do list[#list + 1] = name end
  assert(#list > 40, text)
  return list
end

describe("docs/reference/", function()
  it("lists every Lua function of the modules", function()
    local text = assert(H.read_file("docs/reference/http.md"))
    for _, m in ipairs { "pg", "redis", "session", "csrf", "template", "test", "ratelimit" } do
      text = text .. assert(H.read_file("docs/reference/" .. m .. ".md"), "docs/reference/" .. m .. ".md")
    end
    local missing = {}
    for _, name in ipairs(lua_functions()) do
      if not text:find("`" .. name:gsub("%p", "%%%0") .. "[%(`{]") then missing[#missing + 1] = name end
    end
    assert.same({}, missing)
  end)
end)

-- GitHub's anchor for a heading: lower case, punctuation dropped, spaces to
-- hyphens, a -1, -2... suffix for repeats.
local function anchors(text)
  local set, seen = {}, {}
  local in_code = false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:find("^```") then in_code = not in_code end
    local title = not in_code and line:match("^#+%s+(.-)%s*$")
    if title then
      local slug = title:lower():gsub("[^%w%- _]", ""):gsub(" ", "-")
      local n = seen[slug]
      seen[slug] = (n or 0) + 1
      set[n and (slug .. "-" .. n) or slug] = true
    end
  end
  return set
end

-- The relative links of a page that lead nowhere: a missing file, or a
-- #fragment naming no heading of the Markdown page it points at.
local function broken_links(page)
  local broken = {}
  local dir = page:match("^(.*)/") or "."
  local text = assert(H.read_file(page), page)
  text = text:gsub("\n```.-\n```", "") -- links inside code blocks are code
  for target, frag in text:gmatch("%]%(([^)#%s]*)#?([^)%s]*)[^)]*%)") do
    if not target:find("^%a+:") then
      local path = target == "" and page or dir .. "/" .. target
      local f = io.open(path, "r")
      if not f then
        broken[#broken + 1] = page .. " -> " .. target
      else
        local body = f:read("a")
        f:close()
        if frag ~= "" and path:find("%.md$") and body and not anchors(body)[frag] then
          broken[#broken + 1] = page .. " -> " .. target .. "#" .. frag
        end
      end
    end
  end
  return broken
end

describe("links in every *.md of the tree", function()
  it("lead to files that exist, and to headings that exist", function()
    local broken = {}
    for _, page in ipairs(markdown_files()) do
      for _, b in ipairs(broken_links(page)) do broken[#broken + 1] = b end
    end
    assert.same({}, broken)
  end)

  it("are checked: a link to a missing page or heading is reported", function()
    local page = H.tmpname(".md")
    local f = assert(io.open(page, "w"))
    f:write("# Top\n[ok](#top) [gone](no-such-page.md) [bad](#nowhere) [web](https://example.com/x.md)\n")
    f:close()
    local got = broken_links(page)
    os.remove(page)
    assert.same({ page .. " -> no-such-page.md", page .. " -> #nowhere" }, got)
  end)
end)
