-- moonhttp.template and http.html.escape through the real binary: files
-- next to the script, escaping by default, raw output, control flow,
-- partials and layouts, errors that name the template's file and line, and
-- a cache that a reload (or, with --dev, an edit) renews.
local H = require "helper"
local O = require "ops_helper"

local q = H.shell_quote

local APP = [[
local http = require "moonhttp"
local template = require "moonhttp.template"

local function html(res, s)
  res:header("Content-Type", "text/html; charset=utf-8")
  res:write(s)
end

http.handle("GET /page", function(req, res)
  html(res, template.render("views/page.html", {
    title = req:arg("title") or "Links",
    links = { { url = "/a?x=1&y=2", name = "<script>alert(1)</script>" }, { url = "/b", name = "Ünïcode ✓" } },
  }))
end)
http.handle("GET /broken", function(req, res) html(res, template.render("views/broken.html", {})) end)
http.handle("GET /fails", function(req, res) html(res, template.render("views/fails.html", {})) end)
http.handle("GET /missing", function(req, res) html(res, template.render("views/nope.html", {})) end)
http.handle("GET /escape", function(req, res) res:write(http.html.escape(req:arg("s"))) end)
]]

local FILES = {
  ["views/layout.html"] = [[
<!doctype html>
<title>{{ title }}</title>
<body>
{{! content }}
</body>
]],
  ["views/page.html"] = [[
{% layout("views/layout.html") %}
<ul>
{% for i, link in ipairs(links) do %}
  {% include("views/row.html", { i = i, link = link }) %}
{% end %}
</ul>
{# not in the output #}
<p>{{ #links }} links</p>
]],
  ["views/row.html"] = [[
<li id="l{{ i }}"><a href="{{ link.url }}">{{ link.name }}</a></li>
]],
  ["views/broken.html"] = "<p>\n{% for i = 1, 3 %}\n{{ i }}\n",
  ["views/fails.html"] = "<p>one</p>\n<p>two</p>\n{{ user.name }}\n",
}

describe("moonhttp.template", function()
  local dir, srv

  local function write(name, text) H.write_file(dir .. "/" .. name, text) end

  before_each(function()
    dir = H.tmpname("-tpl")
    H.must("mkdir -p " .. q(dir .. "/views"))
    for name, text in pairs(FILES) do write(name, text) end
    write("app.lua", APP)
  end)

  after_each(function()
    if srv then srv:stop(); srv = nil end
    os.execute("rm -rf " .. q(dir))
  end)

  it("renders a page through a layout and a partial, escaping every value", function()
    srv = H.start(dir .. "/app.lua")
    local r = srv:get("/page?title=" .. "%3Ci%3EA%20%26%20B%3C%2Fi%3E")
    assert.equal(200, r.status)
    assert.equal("text/html; charset=utf-8", r.headers["content-type"])
    local want = table.concat({
      "<!doctype html>",
      "<title>&lt;i&gt;A &amp; B&lt;/i&gt;</title>",
      "<body>",
      "<ul>",
      '<li id="l1"><a href="/a?x=1&amp;y=2">&lt;script&gt;alert(1)&lt;/script&gt;</a></li>',
      '<li id="l2"><a href="/b">Ünïcode ✓</a></li>',
      "</ul>",
      "<p>2 links</p>",
      "",
      "</body>",
      "" }, "\n")
    assert.equal(want, r.body)
  end)

  it("names the template file and line of a syntax error and of a run-time error", function()
    srv = H.start(dir .. "/app.lua")
    local r = srv:get("/broken")
    assert.equal(500, r.status)
    assert.is_nil(r.body:find("views/broken.html", 1, true)) -- no details to the client
    r = srv:get("/fails")
    assert.equal(500, r.status)
    assert.truthy(O.wait_for(function() return srv:logtext():find("views/fails.html:3:", 1, true) end, 2),
      srv:logtext())
    assert.truthy(srv:logtext():find("views/broken.html:2:", 1, true), srv:logtext())
    assert.truthy(srv:logtext():find("attempt to index a nil value (global 'user')", 1, true), srv:logtext())
    r = srv:get("/missing")
    assert.equal(500, r.status)
    assert.truthy(O.wait_for(function()
      return srv:logtext():find("template: cannot open views/nope.html", 1, true)
    end, 2), srv:logtext())
    assert.equal(200, srv:get("/page").status) -- and it goes on serving
  end)

  it("compiles a file once per code generation: SIGHUP picks up an edit", function()
    srv = H.start(dir .. "/app.lua")
    assert.truthy(srv:get("/page").body:find("<p>2 links</p>", 1, true))
    write("views/page.html", (FILES["views/page.html"]:gsub("links</p>", "items</p>")))
    assert.truthy(srv:get("/page").body:find("<p>2 links</p>", 1, true)) -- cached
    srv:signal("HUP")
    assert.truthy(O.wait_for(function()
      local r = srv:get("/page")
      return r.body:find("<p>2 items</p>", 1, true)
    end, 5), srv:logtext())
  end)

  it("with --dev, sees an edited file at its next render", function()
    srv = H.start(dir .. "/app.lua", { flags = { "--dev" } })
    assert.truthy(srv:get("/page").body:find("<p>2 links</p>", 1, true))
    write("views/row.html", "<li>{{ link.name }}!</li>\n")
    assert.truthy(srv:get("/page").body:find("<li>&lt;script&gt;alert(1)&lt;/script&gt;!</li>", 1, true))
  end)

  -- Rows: input of http.html.escape -> output.
  local ESCAPES = {
    { "plain", "plain" },
    { "<>&\"'", "&lt;&gt;&amp;&quot;&#39;" },
    { "&amp;", "&amp;amp;" },
    { "é ✓", "é ✓" },
  }
  it("http.html.escape escapes the five HTML specials and nothing else", function()
    srv = H.start(dir .. "/app.lua")
    for _, row in ipairs(ESCAPES) do
      local enc = row[1]:gsub("[^%w]", function(c) return string.format("%%%02X", c:byte()) end)
      assert.equal(row[2], srv:get("/escape?s=" .. enc).body, row[1])
    end
  end)
end)

describe("moonhttp.template in a script", function()
  it("compiles strings, trims lines of lone tags, takes comments and }} inside strings", function()
    local kv = H.run_kv("local http = require 'moonhttp'\nlocal template = require 'moonhttp.template'\n", [[
local t = template.compile("{% if on then -- a comment %}\nyes {{ '}}' }} {{ n }}\n{% else %}\nno\n{% end %}\n", "t")
io.write("on ", (t{ on = true, n = 3 }:gsub("\n", "|")), "\n")
io.write("off ", (t{ on = false }:gsub("\n", "|")), "\n")
io.write("nil [", template.compile("{{ nothing }}")({}), "]\n")
io.write("raw ", template.compile("{{! v }}")({ v = "<b>" }), "\n")
local ok, err = pcall(template.compile, "a\n{{ x ", "open.html")
io.write("open ", err, "\n")
ok, err = pcall(template.compile("\n\n{% error('boom') %}", "boom.html"), {})
io.write("boom ", err, "\n")
]])
    assert.equal("yes }} 3|", kv.on)
    assert.equal("no|", kv.off)
    assert.equal("[]", kv["nil"])
    assert.equal("<b>", kv.raw)
    assert.equal("open.html:2: {{ without its }}", kv.open)
    assert.equal("boom.html:3: boom", kv.boom)
  end)
end)
