-- The documentation keeps up with the code: every Lua block of README.md
-- and docs/ is a complete app, a complete spec or a marked fragment of one
-- (the convention is below, at block_kind); every complete app runs through
-- the binary with local stand-ins for what it talks to and does what its
-- page says (spec/docs_examples.lua holds what each one does), every
-- fragment stands as shown in its app, docs/reference/ names every
-- function of the Lua modules, and every relative link of every *.md in the
-- tree leads to a file (and heading) that exists.
local H = require "helper"
local cjson = require "cjson"
local API = require "helpers.api"
local broken_links = require "helpers.links"

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

-- What a ```lua block is, from its first line (the convention every page
-- follows; a block that follows none fails this spec):
--   -- NAME.lua        a complete app, run as it stands: the next line is
--                      `local http = require "moonhttp"`. NAME is unique on
--                      its page and spec/docs_examples.lua says what the
--                      page shows it doing (answers, headers, log lines).
--   -- NAME_spec.lua   a complete busted spec, run with busted.
--   -- part of WHERE   a fragment of a complete example: WHERE is an app
--                      block of the same page ("chat.lua") or a file of the
--                      repository ("examples/guide/proxy.lua"). Its lines
--                      (indentation aside) stand in WHERE as one run, so the
--                      fragment shows what runs.
local function block_kind(code)
  local first, rest = code:match("^%-%- ([^\n]*)\n(.*)$")
  if not first then return nil end
  local where = first:match("^part of (%S+)$")
  if where then return "fragment", where end
  local name = first:match("^(%S+_spec%.lua)$")
  if name then return "spec", name end
  name = first:match("^([%w_%-]+%.lua)$")
  if name and rest:find('^local http = require "moonhttp"\n') then return "app", name end
  return nil
end

-- True when the lines of `part` stand in `whole` as one run, each line's
-- indentation (and a trailing blank) aside.
local function contains(whole, part)
  local function lines(s)
    local t = {}
    for l in (s .. "\n"):gmatch("([^\n]*)\n") do t[#t + 1] = l:match("^%s*(.-)%s*$") end
    while t[#t] == "" do t[#t] = nil end
    return t
  end
  local w, p = lines(whole), lines(part)
  for i = 1, #w - #p + 1 do
    local j = 1
    while j <= #p and w[i + j - 1] == p[j] do j = j + 1 end
    if j > #p then return true end
  end
  return false
end

-- Every block of every page, classified: { page, line, code, kind, name|where }.
local function all_blocks()
  local list = {}
  for _, page in ipairs(pages()) do
    for _, b in ipairs(lua_blocks(page)) do
      b.page = page
      b.kind, b.name = block_kind(b.code)
      list[#list + 1] = b
    end
  end
  return list
end

local P -- spec/pg_helper.lua, loaded when an example needs PostgreSQL

-- psql on one database of a cluster started by pg_helper.
local function psql(cluster, db, sql)
  local text, ok = H.sh(("%s/psql -X -q -A -t -v ON_ERROR_STOP=1 -h 127.0.0.1 -p %d -U postgres -d %s -c %s")
    :format(P.bindir, cluster.port, db, H.shell_quote(sql)))
  assert(ok, text)
  return text
end

-- The local stand-ins an example's row asks for, started: stand.redis (a
-- redis-server), stand.pg (a PostgreSQL cluster, the row's `pg` SQL run on it,
-- a role `app` with password `secret` able to log in over TCP), stand.upstream
-- (the row's `upstream` script run by moonhttp).
local function start_stand_ins(row, stand)
  if row.redis then stand.redis = H.redis() end
  if row.pg then
    P = P or require "pg_helper"
    stand.pg = P.start()
    local hba = assert(io.open(stand.pg.data .. "/pg_hba.conf", "a"))
    hba:write("host all app 127.0.0.1/32 scram-sha-256\n")
    hba:close()
    psql(stand.pg, "postgres", "CREATE ROLE app LOGIN PASSWORD 'secret'; SELECT pg_reload_conf()")
    for db, sql in pairs(row.pg) do
      psql(stand.pg, "postgres", ("CREATE DATABASE %s OWNER app"):format(db))
      if sql ~= "" then psql(stand.pg, db, sql) end
    end
  end
  if row.upstream then stand.upstream = H.start(row.upstream) end
  if row.pebble then
    -- an ACME CA (spec/pebble_helper.lua): {acme_directory}, {acme_ca}, and the ports it validates on
    local ca = require("pebble_helper").start()
    stand.pebble, stand.acme_directory, stand.acme_ca = ca, ca.directory, ca.ca
    stand.acme_http, stand.acme_tls = tostring(ca.http_port), tostring(ca.tls_port)
  end
end

local function stop_stand_ins(stand)
  if stand.upstream then stand.upstream:stop() end
  if stand.redis then stand.redis:stop() end
  if stand.pg then stand.pg:stop() end
  if stand.pebble then stand.pebble:stop() end
end

-- The example's source with the row's `replace` applied: each address or
-- name the page shows (a port, a host off this machine) pointed at a stand-in;
-- "{upstream}" is the upstream's host:port, "{redis}" and "{pg}" the ports,
-- "{dir}" the app's folder; a stand-in's other strings ("{acme_ca}") as they are.
local function pointed(code, row, stand)
  for from, to in pairs(row.replace or {}) do
    to = to:gsub("{([%w_]+)}", function(k)
      local s = assert(stand[k], "no stand-in " .. k)
      if type(s) == "string" then return s end
    return k == "upstream" and ("127.0.0.1:" .. s.port) or tostring(s.port)
    end)
    local s, e = code:find(from, 1, true)
    assert(s, ("replace: %q is not in the example"):format(from))
    while s do
      code = code:sub(1, s - 1) .. to .. code:sub(e + 1)
      s, e = code:find(from, s + #to, true)
    end
  end
  return code
end

local SECRET = string.rep("0123456789abcdef", 2)
local ENV = ("SECRET=%s JWT_SECRET=%s"):format(SECRET, SECRET)

-- Runs an app as its row says: stand-ins up, the source pointed at them and
-- written into a folder of its own with the row's `files` beside it, started
-- (the row's `start` options on top of H.start's), row.check(app, stand, dir).
local function run_app(code, row)
  local stand, app = {}, nil
  local dir = H.tmpname(".d")
  local ok, err = pcall(function()
    start_stand_ins(row, stand)
    H.must("mkdir -p " .. H.shell_quote(dir))
    for path, content in pairs(row.files or {}) do
      H.must("mkdir -p " .. H.shell_quote((dir .. "/" .. path):match("^(.*)/")))
      H.write_file(dir .. "/" .. path, content)
    end
    if row.prepare then row.prepare(dir) end
    stand.dir = dir
    local script = dir .. "/app.lua"
    H.write_file(script, pointed(code, row, stand))
    local opts = { env = ENV }
    for k, v in pairs(row.start or {}) do opts[k] = v end
    app = H.start(script, opts)
    row.check(app, stand, dir)
  end)
  if app then app:stop() end
  stop_stand_ins(stand)
  os.execute("rm -rf " .. H.shell_quote(dir))
  assert(ok, err)
end

local EXAMPLES = require "docs_examples"

describe("the documentation's Lua examples", function()
  local blocks = all_blocks()
  local apps, used = {}, {}
  for _, b in ipairs(blocks) do
    if b.kind == "app" then apps[b.page .. " " .. b.name] = b end
  end

  it("are each a named app, a named spec or a marked fragment", function()
    local bad, seen = {}, {}
    for _, b in ipairs(blocks) do
      local key = b.kind and (b.page .. " " .. tostring(b.name))
      if not b.kind then
        bad[#bad + 1] = ("%s:%d: starts with neither `-- NAME.lua` + require nor `-- part of WHERE`")
          :format(b.page, b.line)
      elseif b.kind ~= "fragment" and seen[key] then
        bad[#bad + 1] = ("%s:%d: a second %s on the page"):format(b.page, b.line, b.name)
      end
      if key then seen[key] = true end
    end
    assert.same({}, bad)
  end)

  -- Fragments: each stands, as shown, in the complete example it names.
  for _, b in ipairs(blocks) do
    if b.kind == "fragment" then
      it(("%s:%d is part of %s"):format(b.page, b.line, b.name), function()
        local whole = apps[b.page .. " " .. b.name]
        local text = whole and whole.code or H.read_file(b.name)
        assert(text, b.name .. " is neither an app block of " .. b.page .. " nor a file")
        local part = b.code:gsub("^[^\n]*\n", "")
        assert(contains(text, part), ("%s:%d: not found as shown in %s"):format(b.page, b.line, b.name))
      end)
    end
  end

  -- Complete apps, the page's blocks and the files fragments name: every one
  -- runs with its stand-ins and does what the page says.
  local targets = {}
  for _, b in ipairs(blocks) do
    if b.kind == "app" then targets[#targets + 1] = { key = b.page .. " " .. b.name, code = b.code, b = b } end
  end
  local files = {}
  for _, b in ipairs(blocks) do
    if b.kind == "fragment" and not apps[b.page .. " " .. b.name] and not files[b.name] then
      files[b.name] = true
      targets[#targets + 1] = { key = b.name, path = b.name }
    end
  end
  for _, t in ipairs(targets) do
    it(t.key .. " runs and does what the page says", function()
      local row = EXAMPLES[t.key]
      used[t.key] = true
      assert(row, t.key .. " has no row in spec/docs_examples.lua saying what it does")
      run_app(t.code or assert(H.read_file(t.path), t.path), row)
    end)
    -- The requests of a ```sh block after the app, with the answers it shows.
    local requests = t.b and curl_lines(t.b.sh) or {}
    if #requests > 0 then
      it(t.key .. " answers the curl lines the page shows", function()
        local app = H.start(t.code, { env = ENV })
        local ok, err = pcall(function()
          for _, r in ipairs(requests) do
            local res = assert(app:request(r.method, r.path, {}, r.body))
            assert(same_answer(r.expected, res.body), ("%s: %s %s answered %d %q, the page shows %q")
              :format(t.key, r.method, r.path, res.status, res.body, r.expected))
          end
        end)
        app:stop()
        assert(ok, err)
      end)
    end
  end

  -- Specs: run with busted from the repository root, against this binary.
  for _, b in ipairs(blocks) do
    if b.kind == "spec" then
      it(("%s:%d (%s) passes"):format(b.page, b.line, b.name), function()
        local path = H.tmpname("_spec.lua")
        H.write_file(path, b.code)
        local out, ok = H.sh(("MOONHTTP_BIN=%s busted -o utfTerminal %s"):format(H.shell_quote(H.bin),
          H.shell_quote(path)))
        os.remove(path)
        assert(ok, out)
        assert.matches("%d+ successe?s? / 0 failures / 0 errors", out)
      end)
    end
  end

  it("each have a row, and every row an example", function()
    local stale = {}
    for key in pairs(EXAMPLES) do
      if not used[key] then stale[#stale + 1] = key end
    end
    table.sort(stale)
    assert.same({}, stale)
  end)

  it("are run as the page shows: a wrong answer on the page fails", function()
    assert.same({ { method = "POST", path = "/echo", body = "hi", expected = "hi" },
                  { method = "GET", path = "/x", expected = '{"a":1}' } },
      curl_lines("moonhttp app.lua &\ncurl -d 'hi' localhost:8080/echo   # hi\ncurl -s localhost:8080/x  # {\"a\":1}\n"))
    assert.is_true(same_answer('{"a":1,"b":[2]}', '{"b":[2],"a":1}\n'))
    assert.is_false(same_answer('{"a":1}', '{"a":2}'))
    assert.is_false(same_answer("ok", "not ok\n"))
    assert.same({ "app", "x.lua" }, { block_kind('-- x.lua\nlocal http = require "moonhttp"\n') })
    assert.same({ "fragment", "x.lua" }, { block_kind("-- part of x.lua\nhttp.handle()\n") })
    assert.is_nil(block_kind("http.handle()\n"))
    assert.is_true(contains("a\n  b(1)\nc\n", "b(1)\nc"))
    assert.is_false(contains("a\nb(1)\nx\nc\n", "b(1)\nc"))
  end)
end)

describe("docs/reference/", function()
  it("lists every Lua function of the modules", function()
    local text = API.reference_text()
    local missing = {}
    for _, name in ipairs(API.functions()) do
      if not API.documents(text, name) then missing[#missing + 1] = name end
    end
    assert.same({}, missing)
  end)

  it("lists every method of the objects the API hands an app", function()
    local text = API.method_pages_text()
    local missing = {}
    for _, list in ipairs { API.methods(), API.object_methods() } do
      for _, name in ipairs(list) do
        if not API.documents(text, name) then missing[#missing + 1] = name end
      end
    end
    assert.same({}, missing)
  end)
end)

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
