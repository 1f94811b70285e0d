-- The settings schema (src/settings/): docs/reference/settings.md, --help and both
-- readers (flags and http.server{}) come from one declaration, so they agree:
-- every documented default is what --help shows and what both readers accept,
-- and a value outside a setting's choices is refused with the closest one,
-- at the script's line when it came from the script.
local H = require "helper"

-- { name, default } of each row of docs/reference/settings.md's table (default nil: none).
local function documented()
  local f = assert(io.open("docs/reference/settings.md"))
  local rows = {}
  for line in f:lines() do
    local name, def = line:match("^| `([%w_]+)` | (.-) |")
    if name then rows[#rows + 1] = { name = name, def = def:match("^`(.*)`$") } end
  end
  f:close()
  return rows
end

local function flag(name) return "--" .. name:gsub("_", "-") end

describe("settings", function()
  local rows = documented()

  it("docs/reference/settings.md documents every setting --help lists, with the same default", function()
    assert.is_true(#rows >= 40, "rows: " .. #rows)
    local code, help = H.run({ "--help" })
    assert.equal(0, code, help)
    local listed = 0
    for line in help:gmatch("[^\n]+") do
      if line:match("^  %-%-[%w-]+ ") and line:match("%(default [^)]*%)$") then listed = listed + 1 end
    end
    assert.equal(#rows, listed, help)
    for _, r in ipairs(rows) do
      local want = "  " .. flag(r.name) .. " "
      local at = help:find("\n" .. want, 1, true)
      assert.truthy(at, r.name .. " missing from --help")
      local line = help:sub(at + 1):match("^[^\n]*")
      assert.equal("(default " .. (r.def or "none") .. ")", line:match("%(default [^)]*%)$"), line)
    end
  end)

  it("takes every documented default back, as a flag and in http.server{}", function()
    local args, fields = { "--check" }, {}
    for _, r in ipairs(rows) do
      if r.def then
        args[#args + 1] = flag(r.name) .. "=" .. r.def
        local v = r.def == "on" and "true" or r.def == "off" and r.name ~= "access_log"
          and r.name ~= "pid_file" and r.name ~= "metrics" and r.name ~= "request_id_header"
          and "false" or string.format("%q", r.def)
        fields[#fields + 1] = r.name .. " = " .. v
      end
    end
    local app = H.script('local http = require "moonhttp"\nhttp.handle("GET /", function() end)\n')
    args[#args + 1] = app
    local code, out = H.run(args)
    assert.equal(0, code, out)
    local script = H.script('local http = require "moonhttp"\nhttp.server{ ' .. table.concat(fields, ", ")
      .. ' }\nhttp.handle("GET /", function() end)\n')
    code, out = H.run({ "--check", script })
    assert.equal(0, code, out)
  end)

  it("refuses a value outside the choices with the closest one, at the script's line", function()
    local path = H.script('local http = require "moonhttp"\n\nhttp.server{ access_log_format = "combind" }\n')
    local code, out = H.run({ "--check", path })
    assert.equal(1, code, out)
    assert.truthy(out:find(path .. ':3: access_log_format: "combind" is not common, combined or json'
      .. ' (did you mean "combined"?)', 1, true), out)
    code, out = H.run({ "--check", "--log-level", "dbug", H.script('local http = require "moonhttp"') })
    assert.equal(1, code, out)
    assert.truthy(out:find('log_level: "dbug" is not error, warn, info or debug (did you mean "debug"?)', 1, true), out)
    code, out = H.run({ "--check", "--clean-path", "tidy", H.script('local http = require "moonhttp"') })
    assert.equal(1, code, out)
    assert.truthy(out:find('clean_path: "tidy" is not redirect or rewrite\n', 1, true), out)
  end)

  it("refuses a number that is not one (0/0) as out of range", function()
    local path = H.script('local http = require "moonhttp"\nhttp.server{ read_header_timeout = 0/0 }\n')
    local code, out = H.run({ "--check", path })
    assert.equal(1, code, out)
    assert.truthy(out:find(path .. ":2: read_header_timeout: ", 1, true), out)
    assert.truthy(out:find("nan is out of range (0..86400 seconds)", 1, true), out)
  end)
end)
