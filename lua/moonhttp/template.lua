-- HTML templates compiled to Lua functions.
--
--   {{ expr }}     the value, escaped for HTML text and quoted attributes
--   {{! expr }}    the value as it is (HTML you trust)
--   {% code %}     Lua statements: if/for/while/local ..., spanning tags
--   {# note #}     a comment, not in the output
--   {% include("row.html" [, env]) %}   another template, here (env: this one's)
--   {% layout("base.html") %}           render into base.html as `content`
--
-- A tag alone on its line ({% %} or {# #}) takes its line with it, so
-- control flow does not leave blank lines. Names in a template are looked
-- up in the env table given to render, then in the globals.
--
-- A template compiles to one Lua chunk whose lines are the template's lines
-- (literal text goes in as %q strings, which keep their newlines), so a
-- syntax or run-time error names the template file and its own line.
-- Compiled templates are cached per Lua state, that is per code generation:
-- a reload compiles them again, and with --dev an edited file is seen at its
-- next render.
local core = require "moonhttp.core"
local webcore = require "moonhttp.webcore"

local escape = webcore.html_escape
local concat = table.concat

local M = { escape = escape }

-- Relative template paths start at the main script's directory, as http.files does.
local script = rawget(_G, "arg") and arg[0] or ""
local base_dir = script:match("^(.*)/[^/]*$") or "."

local function raw(v)
  if v == nil then return "" end
  if type(v) == "string" then return v end
  return tostring(v)
end

-- The level of a long bracket opening at i ("[[", "[==["), or nil.
local function long_open(src, i)
  local eqs = src:match("^%[(=*)%[", i)
  return eqs and #eqs
end

local function long_close(src, i, level)
  local _, e = src:find("]" .. ("="):rep(level) .. "]", i, true)
  return e
end

-- Reads the Lua code of a tag from i up to `close`, skipping strings (a
-- `close` inside a string is code). Comments are dropped, keeping their
-- newlines; a line comment ends at the newline or at the tag's end. Returns
-- the code and the index after `close`, or nil if the tag never closes.
local function scan(src, i, close)
  local parts, start, j, len = {}, i, i, #src
  while j <= len do
    local c = src:byte(j)
    if src:find(close, j, true) == j then
      parts[#parts + 1] = src:sub(start, j - 1)
      return concat(parts), j + #close
    elseif c == 34 or c == 39 then -- a short string: " or '
      local k = j + 1
      while k <= len do
        local d = src:byte(k)
        if d == 92 then k = k + 2 -- a backslash escape
        elseif d == c or d == 10 then break -- (an unfinished string: load reports it)
        else k = k + 1 end
      end
      j = k + 1
    elseif c == 91 and long_open(src, j) then -- a long string
      j = (long_close(src, j, long_open(src, j)) or len) + 1
    elseif c == 45 and src:byte(j + 1) == 45 then -- a comment
      parts[#parts + 1] = src:sub(start, j - 1)
      local level = src:byte(j + 2) == 91 and long_open(src, j + 2)
      local stop
      if level then
        stop = (long_close(src, j + 2, level) or len) + 1
      else
        stop = math.min(src:find("\n", j, true) or len + 1, src:find(close, j, true) or len + 1)
      end
      parts[#parts + 1] = " " .. src:sub(j, stop - 1):gsub("[^\n]+", "")
      start, j = stop, stop
    else
      j = j + 1
    end
  end
  return nil
end

local function line_of(src, i)
  local n = 1
  for _ in src:sub(1, i - 1):gmatch("\n") do n = n + 1 end
  return n
end

-- True when the tag from i to j-1 stands alone on its line: only blanks
-- before it since the last newline, and a newline (or the end) after it.
-- Returns the index where the line's blanks start and the index after the
-- newline that goes with the tag.
local function alone(src, i, j)
  local from = i
  while from > 1 and (src:byte(from - 1) == 32 or src:byte(from - 1) == 9) do from = from - 1 end
  if from > 1 and src:byte(from - 1) ~= 10 then return nil end
  local to = j
  while src:byte(to) == 32 or src:byte(to) == 9 do to = to + 1 end
  if src:byte(to) == 13 then to = to + 1 end
  if to <= #src and src:byte(to) ~= 10 then return nil end
  return from, to + 1
end

-- Translates template source to the Lua source of a chunk that returns
-- function(_ENV, buffer, n) -> n, layout.
local function translate(src, name)
  local out = { "local __esc, __raw, __include = ... return function(_ENV, __b, __n) local __lay " }
  local function emit(s) out[#out + 1] = s end
  local function text(s)
    if s ~= "" then emit(string.format("__n=__n+1 __b[__n]=%q ", s)) end
  end
  local i, len = 1, #src
  while i <= len do
    local open = src:find("{[{%%#]", i)
    if not open then
      text(src:sub(i))
      break
    end
    local kind = src:sub(open + 1, open + 1)
    local close = kind == "{" and "}}" or kind == "%" and "%}" or "#}"
    local code, after
    if kind == "#" then
      local e = src:find("#}", open + 2, true)
      if e then code, after = src:sub(open + 2, e - 1), e + 2 end
    else
      code, after = scan(src, open + 2, close)
    end
    if not code then
      error(string.format("%s:%d: %s without its %s", name, line_of(src, open),
        src:sub(open, open + 1), close), 0)
    end
    local from, to
    if kind ~= "{" then from, to = alone(src, open, after) end
    text(src:sub(i, (from or open) - 1))
    if kind == "{" then
      local bang = code:match("^!()")
      if bang then
        emit("__n=__n+1 __b[__n]=__raw(" .. code:sub(bang) .. ") ")
      else
        emit("__n=__n+1 __b[__n]=__esc(" .. code .. ") ")
      end
    elseif kind == "%" then
      local inc = code:match("^%s*include%s*(%b())%s*$")
      local lay = code:match("^%s*layout%s*(%b())%s*$")
      if inc then
        emit("__n=__include(__b, __n, _ENV, " .. inc:sub(2, -2) .. ") ")
      elseif lay then
        emit("__lay=" .. lay .. " ")
      else
        emit(";" .. code .. " ;") -- (scan dropped comments: nothing runs past the tag)
      end
    else
      emit((code:gsub("[^\n]+", "")))
    end
    if to then
      -- the tag's own line break is not output, but the chunk keeps the line
      local gone = src:sub(after, to - 1)
      emit((gone:gsub("[^\n]+", "")))
      i = to
    else
      i = after
    end
  end
  emit(" return __n, __lay end")
  return concat(out)
end

-- Env lookups: the render's table first, then the globals. One shared
-- metatable; a render allocates one small table for its scope.
local ENV = {}
local scope_mt = {
  __index = function(scope, k)
    local v = rawget(scope, ENV)[k]
    if v == nil then return _G[k] end
    return v
  end,
}
local function scope(env) return setmetatable({ [ENV] = env or {} }, scope_mt) end

local cache, sources = {}, {}
local include

local function compile_fn(src, name)
  local chunk, err = load(translate(src, name), "@" .. name, "t")
  if not chunk then error(err, 0) end
  return chunk(escape, raw, include)
end

local function path_of(file)
  if file:sub(1, 1) == "/" then return file end
  return base_dir .. "/" .. file
end

-- The compiled function of a template file (cached; with --dev re-read each time).
local function load_file(file)
  if type(file) ~= "string" then error("template: file name must be a string", 3) end
  local fn = cache[file]
  if fn and not core.dev() then return fn end
  local path = path_of(file)
  local f, err = io.open(path, "rb")
  if not f then error("template: cannot open " .. file .. ": " .. tostring(err), 3) end
  local src = f:read("a")
  f:close()
  if fn and sources[file] == src then return fn end
  fn = compile_fn(src, file)
  cache[file], sources[file] = fn, src
  return fn
end

-- Runs fn with env into buffer b from n, following layouts; returns the new n.
local function run(fn, env, b, n)
  local s = scope(env)
  local n2, lay = fn(s, b, n)
  while lay do
    local body = concat(b, "", n + 1, n2)
    for k = n2, n + 1, -1 do b[k] = nil end
    local outer = load_file(lay)
    s = setmetatable({ content = body }, { __index = s })
    n2, lay = outer(s, b, n)
  end
  return n2
end

include = function(b, n, env, file, own_env)
  if own_env ~= nil and type(own_env) ~= "table" then
    error("include: env must be a table", 2)
  end
  return run(load_file(file), own_env or env, b, n)
end

--- template.compile(src [, name]) -> render(env) -> string.
function M.compile(src, name)
  if type(src) ~= "string" then error("template.compile: source must be a string", 2) end
  local fn = compile_fn(src, name or "template")
  return function(env)
    local b = {}
    return concat(b, "", 1, run(fn, env, b, 0))
  end
end

--- template.render(file, env) -> string: file relative to the main script's directory.
function M.render(file, env)
  local b = {}
  return concat(b, "", 1, run(load_file(file), env, b, 0))
end

return core.strict_module(M, "template")
