-- The moonhttp module: route registration with groups and middleware on top
-- of the C core (moonhttp.core). Middleware is composed once, when the
-- script has finished loading, so a request costs one route lookup and one
-- call into the composed handler.
local core = require "moonhttp.core"
local cjson = require "cjson"
local crypto = require "moonhttp.crypto"
local web = require "moonhttp.web"
web.install()

local M = {
  sleep = core.sleep,
  now = core.now,
  server = core.server,
  not_found = core.not_found,
  method_not_allowed = core.method_not_allowed,
  json = { encode = cjson.encode, decode = web.json_decode, null = cjson.null },
  crypto = crypto.crypto,
  base64 = crypto.base64,
  hex = crypto.hex,
}

local routes = {}

local function where(level)
  local info = debug.getinfo(level, "Sl")
  if not info then return "?" end
  return info.short_src .. ":" .. (info.currentline or 0)
end

local function check_open(what)
  if core.started() then
    error(what .. ": routes are fixed once the server has started", 3)
  end
end

-- "GET /x" -> "GET", "/x"; "/x" -> nil, "/x"
local function split_method(pattern)
  local method, rest = pattern:match("^(%S+)[ \t]+(.*)$")
  if method then return method, rest end
  return nil, pattern
end

local Scope = {}
Scope.__index = Scope

local function new_scope(prefix, parent)
  return setmetatable({ prefix = prefix, parent = parent, middleware = {} }, Scope)
end

local function add_route(scope, pattern, handler, level)
  check_open("http.handle")
  if type(pattern) ~= "string" then
    error("http.handle: pattern must be a string", level)
  end
  if type(handler) ~= "function" then
    error("http.handle: handler must be a function", level)
  end
  local method, path = split_method(pattern)
  local prefix = ""
  local s = scope
  while s do prefix = s.prefix .. prefix; s = s.parent end
  if prefix ~= "" then
    if path:sub(1, 1) ~= "/" then
      error("http.group: patterns in a group must start with '/': " .. pattern, level)
    end
    path = prefix .. path
  end
  routes[#routes + 1] = {
    pattern = method and (method .. " " .. path) or path,
    handler = handler,
    where = where(level + 1),
    scope = scope,
  }
end

function Scope:handle(pattern, handler) add_route(self, pattern, handler, 3) end

function Scope:use(middleware)
  check_open("use")
  if type(middleware) ~= "function" then
    error("use: middleware must be a function(next) returning a handler", 2)
  end
  self.middleware[#self.middleware + 1] = middleware
  return self
end

function Scope:group(prefix)
  if type(prefix) ~= "string" or prefix:sub(1, 1) ~= "/" then
    error("group: prefix must be a path starting with '/'", 2)
  end
  return new_scope(prefix:gsub("/+$", ""), self)
end

local root = new_scope("", nil)

function M.handle(pattern, handler) add_route(root, pattern, handler, 3) end
function M.use(middleware) Scope.use(root, middleware); return M end
function M.group(prefix)
  if type(prefix) ~= "string" or prefix:sub(1, 1) ~= "/" then
    error("http.group: prefix must be a path starting with '/'", 2)
  end
  return new_scope(prefix:gsub("/+$", ""), root)
end

function M.log(level, ...) core.log(level, ...) end

-- True once the server was asked to stop (SIGTERM): during shutdown_delay it
-- still serves, so a health check answering 503 lets a balancer drain it.
function M.stopping() return core.stopping() end

-- A handler that serves the metrics (Prometheus text format) on a route.
function M.metrics_handler()
  core.enable_metrics()
  return function(req, res)
    res:header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
    res:write(core.metrics_text())
  end
end

-- Outbound HTTP. The C core fetches one URL; following redirects (opt-in,
-- at most 10) is clearer here.
local MAX_REDIRECTS = 10
local redirect_codes = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }

local function resolve_location(base, loc)
  if loc:match("^[hH][tT][tT][pP][sS]?://") then return loc end
  local origin = base:match("^([hH][tT][tT][pP][sS]?://[^/?#]*)")
  if loc:sub(1, 2) == "//" then return base:match("^(%a+:)") .. loc end
  if loc:sub(1, 1) == "/" then return origin .. loc end
  local path = base:sub(#origin + 1):match("^[^?#]*")
  return origin .. (path:match("^(.*/)") or "/") .. loc
end

local function fetch(c, url, opts)
  local max = opts and opts.redirects or 0
  if max == true then max = MAX_REDIRECTS end
  if type(max) ~= "number" or max < 0 then
    error("http.fetch: opts.redirects must be a non-negative number", 3)
  end
  if max > MAX_REDIRECTS then max = MAX_REDIRECTS end
  local resp, err = core.fetch(c, url, opts)
  local followed = 0
  while resp and max > 0 and redirect_codes[resp.status] do
    local loc = resp:header("location")
    if not loc then break end
    resp:close()
    if followed == max then return nil, "stopped after " .. max .. " redirects" end
    followed = followed + 1
    url = resolve_location(url, loc)
    local method = (opts.method or "GET"):upper()
    if (resp.status == 303 and method ~= "HEAD")
        or ((resp.status == 301 or resp.status == 302) and method == "POST") then
      local o = {}
      for k, v in pairs(opts) do o[k] = v end
      o.method, o.body = "GET", nil
      opts = o
    end
    resp, err = core.fetch(c, url, opts)
  end
  return resp, err
end

function M.fetch(url, opts) return fetch(nil, url, opts) end
function M.client_stats() return core.client_stats() end

local Client = {}
Client.__index = Client
function Client:fetch(url, opts) return fetch(self._c, url, opts) end
function Client:stats() return core.client_stats(self._c) end
function Client:close() core.client_close(self._c) end

function M.client(opts)
  if opts ~= nil and type(opts) ~= "table" then error("http.client: options must be a table", 2) end
  return setmetatable({ _c = core.client(opts) }, Client)
end

-- Wraps h in the middleware of its scope and all enclosing scopes; the
-- outermost scope's first middleware runs first.
local function compose(h, scope, pattern)
  local s = scope
  while s do
    for i = #s.middleware, 1, -1 do
      h = s.middleware[i](h)
      if type(h) ~= "function" then
        error("middleware did not return a handler function (for " .. pattern .. ")", 0)
      end
    end
    s = s.parent
  end
  return h
end

-- Called by the C core once the script has run.
function M._finalize()
  for _, r in ipairs(routes) do
    core.register(r.pattern, compose(r.handler, r.scope, r.pattern), r.where)
  end
  routes = {}
end

return M
