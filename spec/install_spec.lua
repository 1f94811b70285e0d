-- `make install` into a staging root (DESTDIR): the files land where Debian's
-- lua5.4 and systemd look, the installed binary serves an app with no
-- environment, and a busted spec outside the source tree tests an app with
-- nothing but the installed moonhttp.test (which finds the installed binary),
-- or with nothing but the installed binary (`moonhttp test`).
local H = require "helper"

local build_dir = H.bin:match("^(.*)/[^/]+$") or "."
local root = H.tmpname(".root")
-- The prefix the build was configured with (make build PREFIX=..., /usr/local by default).
local configured = (H.read_file(build_dir .. "/CMakeCache.txt") or ""):match("\nCMAKE_INSTALL_PREFIX:PATH=([^\n]*)")
  or "/usr/local"
local prefix = root .. configured
local clean_env = "env -i PATH=/usr/bin:/bin HOME=" .. root
local etc = configured == "/usr" and "/etc" or configured .. "/etc"

describe("make install", function()
  setup(function()
    H.must("DESTDIR=" .. H.shell_quote(root) .. " cmake --install " .. H.shell_quote(build_dir))
  end)
  teardown(function() os.execute("rm -rf " .. H.shell_quote(root)) end)

  it("puts each file where its reader looks", function()
    for _, f in ipairs {
      "/bin/moonhttp",
      "/share/lua/5.4/moonhttp/test.lua",  -- Debian's lua5.4: /usr/local/share/lua/5.4/?.lua
      "/share/lua/5.4/moonhttp/init.lua",
      "/share/lua/5.4/moonhttp/pg/proto.lua",
      "/share/man/man1/moonhttp.1",
      "/share/doc/moonhttp/examples/api.lua",
      "/share/doc/moonhttp/examples/views/home.html",
      "/share/doc/moonhttp/reference/settings.md", -- docs/ beside the examples
      "/share/moonhttp/meta/moonhttp/init.lua", -- the editor annotations (docs/guide/editor.md)
      "/share/moonhttp/meta/moonhttp/pg.lua",
      "/lib/systemd/system/moonhttp.service",
      "/lib/systemd/system/moonhttp.socket", -- socket activation, off until enabled
    } do
      assert.truthy(H.read_file(prefix .. f), "missing " .. prefix .. f)
    end
    local unit = H.read_file(prefix .. "/lib/systemd/system/moonhttp.service")
    local app = H.read_file(root .. etc .. "/moonhttp/app.lua")
    assert(app, "no starter app in " .. etc)
    -- its comments name the paths of this install, not another's
    assert.matches("moonhttp --check " .. etc .. "/moonhttp/app.lua", app, 1, true)
    assert.matches("More examples: " .. configured .. "/share/doc/moonhttp/examples/", app, 1, true)
    assert.matches("ExecStart=" .. configured .. "/bin/moonhttp " .. etc .. "/moonhttp/app.lua", unit, 1, true)
  end)

  it("installs pages that link only to installed files", function()
    local broken_links = require "helpers.links"
    local docdir = prefix .. "/share/doc/moonhttp"
    local pages, broken = 0, {}
    local p = assert(io.popen("find " .. H.shell_quote(docdir) .. " -name '*.md' | sort"))
    for page in p:lines() do
      pages = pages + 1
      for _, b in ipairs(broken_links(page)) do broken[#broken + 1] = b:sub(#docdir + 2) end
    end
    p:close()
    assert.is_true(pages > 20, docdir)
    assert.same({}, broken)
  end)

  it("has a man page with every flag of --help", function()
    local help = H.sh(prefix .. "/bin/moonhttp --help")
    local man = H.read_file(prefix .. "/share/man/man1/moonhttp.1"):gsub("\\%-", "-")
    local n = 0
    for flag in help:gmatch("\n  (%-%-[%w%-]+)") do
      n = n + 1
      assert.truthy(man:find("\n.B " .. flag, 1, true), flag .. " is not in the man page")
    end
    assert.is_true(n > 30, help)
    -- groff's warnings (what lintian's manpage check runs too)
    local text, ok = H.sh("groff -man -ww -z " .. H.shell_quote(prefix .. "/share/man/man1/moonhttp.1"))
    assert(ok and text == "", "man page warnings: " .. text)
  end)

  it("serves the installed starter app with no environment set", function()
    local saved = H.bin
    H.bin = prefix .. "/bin/moonhttp"
    local ok, srv = pcall(H.start, root .. etc .. "/moonhttp/app.lua", { env = clean_env })
    H.bin = saved
    assert(ok, srv)
    local res = assert(srv:get("/"))
    assert.equal(200, res.status)
    assert.matches('"hello":"moonhttp"', res.body, 1, true)
    assert.equal("ok\n", srv:get("/healthz").body)
    assert.equal(0, srv:stop())
  end)

  it("runs an app's busted spec with only the installed files", function()
    local dir = root .. "/myapp"
    H.must("mkdir -p " .. H.shell_quote(dir .. "/spec"))
    H.write_file(dir .. "/spec/api_spec.lua", [[
local test = require "moonhttp.test"
describe("the installed example", function()
  it("answers", function()
    local app = test.start("]] .. prefix .. [[/share/doc/moonhttp/examples/api.lua")
    local status, headers, body = app:get("/api/users")
    app:stop()
    assert.equal(200, status)
    assert.equal('{"name":"baseline","users":[]}', body)
  end)
end)
]])
    -- LUA_PATH only because the root is a staging one; installed for real,
    -- /usr/local/share/lua/5.4 is already on lua5.4's default path.
    local lua_path = prefix .. "/share/lua/5.4/?.lua;" .. prefix .. "/share/lua/5.4/?/init.lua;;"
    local out, ok = H.sh("cd " .. H.shell_quote(dir) .. " && " .. clean_env .. " LUA_PATH="
      .. H.shell_quote(lua_path) .. " busted -o TAP spec/api_spec.lua")
    assert(ok, out)
    assert.matches("ok 1 - the installed example answers", out, 1, true)
    -- `moonhttp test`: no LUA_PATH, nothing but the installed binary
    out, ok = H.sh("cd " .. H.shell_quote(dir) .. " && " .. clean_env .. " " .. H.shell_quote(prefix .. "/bin/moonhttp")
      .. " test -o TAP spec/api_spec.lua")
    assert(ok, out)
    assert.matches("ok 1 - the installed example answers", out, 1, true)
  end)
end)

describe("make uninstall", function()
  local root2 = H.tmpname(".root")
  teardown(function() os.execute("rm -rf " .. H.shell_quote(root2)) end)

  it("removes what make install put there, and keeps an edited starter app", function()
    H.must("DESTDIR=" .. H.shell_quote(root2) .. " cmake --install " .. H.shell_quote(build_dir))
    local app = root2 .. etc .. "/moonhttp/app.lua"
    assert(H.read_file(app), "not installed: " .. app)
    H.write_file(app, H.read_file(app) .. "-- edited\n")
    local out = H.sh("make -s uninstall DESTDIR=" .. H.shell_quote(root2) .. " BUILD_DIR=" .. H.shell_quote(build_dir))
    assert.matches("kept .*app%.lua", out)
    local left = H.sh("cd " .. H.shell_quote(root2) .. " && find . -type f | sort")
    assert.equal("." .. etc .. "/moonhttp/app.lua\n", left)
    local dirs = H.sh("cd " .. H.shell_quote(root2) .. " && find . -type d -name 'moonhttp*' | sort")
    assert.equal("." .. etc .. "/moonhttp\n", dirs) -- share/doc/moonhttp, share/lua/5.4/moonhttp, share/moonhttp gone
  end)
end)
