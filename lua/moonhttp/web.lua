-- What web apps need on every request, added to req and res as methods:
-- JSON bodies, cookies, urlencoded forms and query lists, streamed
-- multipart, server-sent events. Everything that reads client bytes answers
-- nil, err on bad input; only the app's own mistakes (a bad cookie name in
-- set_cookie, a newline in an SSE event name) raise.
local webcore = require "moonhttp.webcore"
local core = require "moonhttp.core"
local cjson_safe = require "cjson.safe"

local M = {}

-- JSON -----------------------------------------------------------------------

-- http.json.decode: malformed input is the client's mistake, so nil, err.
function M.json_decode(s)
  if type(s) ~= "string" then
    error("http.json.decode: expected a string, got " .. type(s), 2)
  end
  local v, err = cjson_safe.decode(s)
  if v == nil and err then return nil, "malformed JSON: " .. err end
  return v
end

local req, res = {}, {}

-- req:body() answers the same body every time: middleware may read a form
-- (moonhttp.csrf's `_csrf` field) before the handler does. Kept per request
-- (a new req userdata each time) and dropped with it.
local c_body
local bodies = setmetatable({}, { __mode = "k" })
function req:body()
  local body = bodies[self]
  if body then return body end
  local err
  body, err = c_body(self)
  if not body then return nil, err end
  bodies[self] = body
  return body -- one result, as the C method: res:write(req:body()) must not see a nil
end

function req:json()
  local body, err = self:body()
  if not body then return nil, err end
  return M.json_decode(body)
end

-- Cookies (RFC 6265bis) --------------------------------------------------------

-- Cookie headers as pairs, first occurrence first. Lenient as browsers are:
-- pieces without '=' or with an empty name are skipped; surrounding quotes
-- are dropped; bytes are not decoded. Never raises on what a client sent.
local function each_cookie(self, fn)
  local list = self:headers()["cookie"]
  if not list then return end
  for _, line in ipairs(list) do
    for piece in line:gmatch("[^;]+") do
      local name, value = piece:match("^[ \t]*([^=]-)[ \t]*=[ \t]*(.-)[ \t]*$")
      if name and name ~= "" then
        local unq = value:match('^"(.*)"$')
        if fn(name, unq or value) then return end
      end
    end
  end
end

function req:cookie(name)
  if type(name) ~= "string" then error("req:cookie: name must be a string", 2) end
  local found
  each_cookie(self, function(n, v)
    if n == name then found = v; return true end
  end)
  return found
end

function req:cookies()
  local t = {}
  each_cookie(self, function(n, v)
    if t[n] == nil then t[n] = v end
  end)
  return t
end

local function is_token(s)
  return s ~= "" and not s:find("[^!#$%%&'*+%-.^_`|~%w]")
end

-- cookie-octet: visible ASCII except DQUOTE, comma, semicolon and backslash.
local function is_cookie_value(s)
  local inner = s:match('^"(.*)"$') or s
  return not inner:find("[^\x21\x23-\x2B\x2D-\x3A\x3C-\x5B%]\x5E-\x7E]")
end

-- An attribute value: no control characters, no ';' (RFC 6265bis 5.6).
local function is_attr_value(s)
  return not s:find("[%c;]") and #s <= 1024
end

local same_site_values = { Strict = "Strict", Lax = "Lax", None = "None",
  strict = "Strict", lax = "Lax", none = "None" }

-- level 4: cookie_error <- format_cookie <- res:set_cookie <- the app
-- The names each options table may use (checked with core.check_opts: a typo raises).
local SSE_KEYS, ARGS_KEYS = { "event", "data", "id", "retry" }, { "multi" }
local MULTIPART_KEYS = { "max_parts", "max_header_bytes" }
local COOKIE_KEYS = { "name", "value", "path", "domain", "max_age", "expires", "secure",
  "http_only", "same_site" }
local function cookie_error(msg) error("res:set_cookie: " .. msg, 4) end

-- Builds the Set-Cookie value; every rule violation raises (the app's bug).
local function format_cookie(c)
  if type(c) ~= "table" then cookie_error("expects a table") end
  core.check_opts(c, "res:set_cookie", COOKIE_KEYS, 3)
  local name, value = c.name, c.value
  if type(name) ~= "string" or not is_token(name) then
    cookie_error("name must be a token: " .. tostring(name))
  end
  if value == nil then value = "" end
  if type(value) ~= "string" then cookie_error("value must be a string") end
  if not is_cookie_value(value) then
    cookie_error("value has characters a cookie cannot carry (encode it, e.g. http.base64.encode_url)")
  end
  if #name + #value > 4096 then cookie_error("name and value exceed 4096 bytes") end
  local out = { name .. "=" .. value }
  local path = c.path
  if path == nil then path = "/" end
  if path ~= false then
    if type(path) ~= "string" or not is_attr_value(path) or path:sub(1, 1) ~= "/" then
      cookie_error("path must start with '/' and have no ';' or control characters")
    end
    out[#out + 1] = "Path=" .. path
  end
  if c.domain ~= nil then
    if type(c.domain) ~= "string" or not c.domain:match("^%.?[%w%-%.]+$") or #c.domain > 1024 then
      cookie_error("domain must be a host name")
    end
    out[#out + 1] = "Domain=" .. c.domain
  end
  if c.max_age ~= nil then
    if math.type(c.max_age) ~= "integer" then cookie_error("max_age must be an integer (seconds)") end
    out[#out + 1] = "Max-Age=" .. c.max_age
  end
  if c.expires ~= nil then
    local e = c.expires
    if type(e) == "number" then
      e = os.date("!%a, %d %b %Y %H:%M:%S GMT", math.floor(e))
    elseif type(e) ~= "string" or not is_attr_value(e) then
      cookie_error("expires must be a time (seconds since the epoch) or an HTTP date")
    end
    out[#out + 1] = "Expires=" .. e
  end
  local secure = c.secure == true
  if c.secure ~= nil and type(c.secure) ~= "boolean" then cookie_error("secure must be a boolean") end
  local same_site = c.same_site
  if same_site == nil then same_site = "Lax" end
  if same_site ~= false then
    same_site = same_site_values[same_site]
    if not same_site then cookie_error("same_site must be \"Strict\", \"Lax\", \"None\" or false") end
    if same_site == "None" and not secure then cookie_error("same_site = \"None\" requires secure = true") end
  end
  if name:sub(1, 9):lower() == "__secure-" and not secure then
    cookie_error("a __Secure- cookie requires secure = true")
  end
  if name:sub(1, 7):lower() == "__host-" then
    if not secure or c.domain ~= nil or path ~= "/" then
      cookie_error("a __Host- cookie requires secure = true, path = \"/\" and no domain")
    end
  end
  if secure then out[#out + 1] = "Secure" end
  if c.http_only ~= false then out[#out + 1] = "HttpOnly" end
  if same_site then out[#out + 1] = "SameSite=" .. same_site end
  return table.concat(out, "; ")
end

function res:set_cookie(c)
  self:add_header("Set-Cookie", format_cookie(c))
  return self
end

-- Forms and query lists ---------------------------------------------------------

local function hexbyte(h) return string.char(tonumber(h, 16)) end

-- Strict application/x-www-form-urlencoded decoding: a '%' not followed by
-- two hex digits is malformed (nil).
local function form_unescape(s)
  if s:find("%%") and (s:find("%%%X") or s:find("%%%x%X") or s:find("%%.?$")) then return nil end
  return (s:gsub("+", " "):gsub("%%(%x%x)", hexbyte))
end

-- Parses "a=1&b=2&a=3" into name -> first value and name -> list of values;
-- nil on a bad escape.
local function parse_form(s)
  local first, lists = {}, {}
  for pair in s:gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    k, v = form_unescape(k), form_unescape(v)
    if not k or not v then return nil end
    local list = lists[k]
    if not list then
      list = {}
      lists[k] = list
      first[k] = v
    end
    list[#list + 1] = v
  end
  return first, lists
end

local function media_type(self)
  local ct = self:header("content-type")
  local mt = ct and ct:match("^[ \t]*([^; \t]+)")
  return mt and mt:lower(), ct
end

-- req:form() -> name -> first value, name -> list of values: the urlencoded
-- body (bounded by max_body_bytes); nil, err when it is not a
-- form, cannot be read or is malformed.
function req:form()
  local mt = media_type(self)
  if mt ~= "application/x-www-form-urlencoded" then return nil, "not a form" end
  local body, err = self:body()
  if not body then return nil, err end
  local first, lists = parse_form(body)
  if not first then return nil, "malformed form" end
  return first, lists
end

-- req:args() as before (name -> first value, lenient); req:args{ multi = true }
-- gives name -> list of values and nil, "malformed query" on a bad escape.
local c_args
function req:args(opts)
  core.check_opts(opts, "req:args", ARGS_KEYS)
  if not (opts and opts.multi) then return c_args(self) end
  local _, lists = parse_form(self.query or "")
  if not lists then return nil, "malformed query" end
  return lists
end

-- Multipart (RFC 7578), streamed ----------------------------------------------

local MP_MAX_HEADER, MP_MAX_PARTS, MP_READ = 16 * 1024, 1000, 64 * 1024

-- Parameters of a header value such as 'form-data; name="a"; filename="b"'
-- (names lowercased; quoted strings unescaped; the first of a name wins).
local function header_params(v)
  local params, i, n = {}, 1, #v
  i = (v:find(";", 1, true) or n + 1)
  while i <= n do
    local k, j = v:match("^;[ \t]*([^=; \t]+)[ \t]*=[ \t]*()", i)
    if not k then
      i = v:find(";", i + 1, true) or n + 1
    else
      local val
      if v:sub(j, j) == '"' then
        local parts, q = {}, j + 1
        while q <= n do
          local c = v:sub(q, q)
          if c == "\\" then parts[#parts + 1] = v:sub(q + 1, q + 1); q = q + 2
          elseif c == '"' then break
          else parts[#parts + 1] = c; q = q + 1 end
        end
        val = table.concat(parts)
        i = v:find(";", q + 1, true) or n + 1
      else
        local e = v:find(";", j, true) or n + 1
        val = v:sub(j, e - 1):match("^(.-)[ \t]*$")
        i = e
      end
      k = k:lower()
      if params[k] == nil then params[k] = val end
    end
  end
  return params
end
M.header_params = header_params

local Part = {}
Part.__index = Part

-- Fills self._buf from the parser until data is there or the part ended.
local function part_pull(self)
  local mp = self._mp
  while self._buf == "" and not self._ended do
    local ev, a = mp:_event()
    if ev == "data" then
      self._buf = a
    elseif ev == "end" then
      self._ended = true
    else
      self._ended = true
      return nil, mp.err or "malformed multipart body"
    end
  end
  return true
end

-- part:read([n]): up to n bytes of this part's body; nil at its end; nil, err.
function Part:read(n)
  n = n or MP_READ
  if self._mp._part ~= self then return nil end
  local ok, err = part_pull(self)
  if not ok then return nil, err end
  if self._buf == "" then return nil end
  local s = self._buf
  if #s > n then
    self._buf = s:sub(n + 1)
    return s:sub(1, n)
  end
  self._buf = ""
  return s
end

-- part:body([max]): the whole part, at most `max` bytes (default 1 MiB).
function Part:body(max)
  max = max or (1 << 20)
  local chunks, total = {}, 0
  while true do
    local s, err = self:read()
    if not s then
      if err then return nil, err end
      return table.concat(chunks)
    end
    total = total + #s
    if total > max then return nil, "part too large" end
    chunks[#chunks + 1] = s
  end
end

-- part:save(path): streams the part to a file; returns its size or nil, err.
function Part:save(path)
  local f, ferr = io.open(path, "wb")
  if not f then return nil, ferr end
  local total = 0
  while true do
    local s, err = self:read()
    if not s then
      f:close()
      if err then os.remove(path); return nil, err end
      return total
    end
    local ok, werr = f:write(s)
    if not ok then f:close(); os.remove(path); return nil, werr end
    total = total + #s
  end
end

function Part:headers() return self._headers end

local Multipart = {}
Multipart.__index = Multipart

-- The next parser event, reading more of the body when the parser needs it.
function Multipart:_event()
  local p = self._p
  while true do
    local ev, a, b = p:next()
    if ev == "error" then self.err = a; return ev, a end
    if ev then return ev, a, b end
    local chunk, err = self._req:read(MP_READ)
    if chunk then
      p:feed(chunk)
    elseif err then
      self.err = err
      return "error", err
    else
      p:feed(nil)
    end
  end
end

-- The iterator: the next part (skipping what is left of the current one),
-- or nil at the end; nil, err on a malformed body (also kept in mp.err).
function Multipart:__call()
  if self.err or self._done then return nil, self.err end
  local cur = self._part
  if cur then
    while true do
      local s, err = cur:read()
      if not s then
        if err then return nil, err end
        break
      end
    end
  end
  self._part = nil
  local ev = self:_event()
  if ev == "done" then self._done = true; return nil end
  if ev ~= "part" then
    if ev ~= "error" then self.err = "malformed multipart body" end
    return nil, self.err
  end
  local part = setmetatable({ _mp = self, _buf = "", _ended = false, _headers = {} }, Part)
  while true do
    local e, name, value = self:_event()
    if e == "header" then
      part._headers[name:lower()] = value
    elseif e == "body" then
      break
    else
      return nil, self.err or "malformed multipart body"
    end
  end
  local cd = part._headers["content-disposition"]
  if cd then
    local params = header_params(cd)
    part.name, part.filename = params.name, params.filename
  end
  part.content_type = part._headers["content-type"]
  self._part = part
  return part
end

-- req:multipart([{ max_parts =, max_header_bytes = }]) -> an iterator over
-- parts, or nil, err when the request is not multipart/form-data.
function req:multipart(opts)
  opts = opts or {}
  core.check_opts(opts, "req:multipart", MULTIPART_KEYS)
  local mt, ct = media_type(self)
  if mt ~= "multipart/form-data" then return nil, "not multipart/form-data" end
  local boundary = header_params(ct).boundary
  if not boundary then return nil, "no multipart boundary" end
  local p, err = webcore.multipart(boundary, opts.max_header_bytes or MP_MAX_HEADER,
    opts.max_parts or MP_MAX_PARTS)
  if not p then return nil, err end
  return setmetatable({ _p = p, _req = self }, Multipart)
end

-- Server-sent events -------------------------------------------------------------

local SSE = {}
SSE.__index = SSE

local function sse_field(name, v)
  if v == nil then return nil end
  v = tostring(v)
  if v:find("[\r\n%z]") then error("sse:send: " .. name .. " must not contain CR, LF or NUL", 3) end
  return v
end

-- Sends one event; nil, "closed" once the client has gone.
function SSE:send(ev)
  if type(ev) == "string" then ev = { data = ev } end
  if type(ev) ~= "table" then error("sse:send: expects a table or a string", 2) end
  core.check_opts(ev, "sse:send", SSE_KEYS)
  local out = {}
  local event, id = sse_field("event", ev.event), sse_field("id", ev.id)
  if event then out[#out + 1] = "event: " .. event .. "\n" end
  if id then out[#out + 1] = "id: " .. id .. "\n" end
  if ev.retry ~= nil then
    if math.type(ev.retry) ~= "integer" or ev.retry < 0 then
      error("sse:send: retry must be a non-negative integer (milliseconds)", 2)
    end
    out[#out + 1] = "retry: " .. ev.retry .. "\n"
  end
  if ev.data ~= nil then
    local data = tostring(ev.data):gsub("\r\n", "\n"):gsub("\r", "\n")
    for line in (data .. "\n"):gmatch("(.-)\n") do out[#out + 1] = "data: " .. line .. "\n" end
  end
  out[#out + 1] = "\n"
  return self:_emit(table.concat(out))
end

-- A comment line, e.g. a heartbeat that keeps proxies from timing out.
function SSE:comment(text)
  text = text and tostring(text):gsub("[\r\n]", " ") or ""
  return self:_emit(": " .. text .. "\n\n")
end

function SSE:_emit(s)
  local res = self._res
  local ok = res:write(s)
  if ok and res:flush() then return true end
  return nil, "closed"
end

function res:sse()
  self:header("Content-Type", "text/event-stream; charset=utf-8")
  self:header("Cache-Control", "no-cache")
  self:header("X-Accel-Buffering", "no")
  self:flush()
  return setmetatable({ _res = self }, SSE)
end

-- Installs the methods on req and res (called once by moonhttp's init).
function M.install()
  if c_args then return end
  webcore.extend("response", res)
  local replaced = webcore.extend("request", req)
  c_args, c_body = replaced.args, replaced.body
end

return M
