-- The moonhttp module: route registration with groups and middleware on top
-- of the C core (moonhttp.core). Middleware is composed once, when the
-- script has finished loading, so a request costs one route lookup and one
-- call into the composed handler.
local core = require "moonhttp.core"
local cjson = require "cjson"
local crypto = require "moonhttp.crypto"
local web = require "moonhttp.web"
local upload = require "moonhttp.upload"
web.install()

local M = {
  sleep = core.sleep,
  now = core.now,
  tcp = core.tcp,
  spawn = core.spawn,
  timer = core.timer,
  files = core.files,
  shared = core.shared,
  channel = core.channel,
  websocket = require("moonhttp.websocket").connect,
  metrics = {
    counter = core.metric_counter,
    gauge = core.metric_gauge,
    histogram = core.metric_histogram,
  },
  clock = core.clock,
  -- encode is moonhttp's own (arrays marked with json.array encode as [] even
  -- when empty; '/' is not escaped); decode answers nil, err on malformed
  -- input (web.lua, over lua-cjson's decoder).
  json = {
    encode = core.json_encode,
    decode = web.json_decode,
    null = cjson.null,
    array = core.json_array,
    empty_array = core.json_empty_array,
  },
  crypto = crypto.crypto,
  base64 = crypto.base64,
  hex = crypto.hex,
  html = { escape = require("moonhttp.webcore").html_escape },
}

-- The cluster setting and { once = "cluster" } (lua/moonhttp/cluster.lua, docs/guide/cluster.md).
local cluster = require "moonhttp.cluster"

-- A listener's tls = { acme = {...} } (lua/moonhttp/acme.lua): only a server that has one loads it.
local function has_acme(t)
  if type(t) == "table" and type(t.tls) == "table" and t.tls.acme ~= nil then return true end
  local listen = type(t) == "table" and t.listen
  if type(listen) ~= "table" then return false end
  for _, e in ipairs(listen.addr ~= nil and { listen } or listen) do
    if type(e) == "table" and type(e.tls) == "table" and e.tls.acme ~= nil then return true end
  end
  return false
end

-- http.server{...}: the core reads the settings; the cluster setting's row (settings_table.c)
-- has it call cluster.configure. The acme options inside listen entries are read here first.
function M.server(t)
  if has_acme(t) then require("moonhttp.acme").configure(M, t, 3) end
  return core.server(t, 2) -- errors and the settings' line name the caller's line, not this one
end

-- A job's key, the same in every process that loads the script: where its function was
-- written and how many jobs were made there before (as lua_timer.c's for { once = true }).
local job_counts = {}
local function job_key(kind, fn)
  local info = debug.getinfo(fn, "S")
  -- the file name without its folder: instances may run the app from different folders
  local place = string.format("%s:%s:%d", kind, info.short_src:match("[^/]*$"), info.linedefined)
  local n = (job_counts[place] or 0) + 1
  job_counts[place] = n
  return place .. "#" .. n
end

local function once_cluster(opts)
  return type(opts) == "table" and opts.once == "cluster"
end

-- on_start jobs of { once = "cluster" }, decided at _finalize: the cluster setting may come
-- after them in the script. Without a cluster, they are { once = true } jobs.
local cluster_starts = {}

function M.on_start(fn, opts)
  if once_cluster(opts) then
    if type(fn) ~= "function" then error("http.on_start: expected a function", 2) end
    core.check_opts(opts, "http.on_start", { "once" }, 2)
    cluster_starts[#cluster_starts + 1] = fn
    return
  end
  return core.on_start(fn, opts)
end

-- http.on_worker_exit(fn): fn({ worker, pid, reason }) in one surviving worker (worker_exit.lua)
function M.on_worker_exit(fn) require("moonhttp.worker_exit").add(fn) end

-- http.every(interval, fn [, opts], ...)
function M.every(...)
  local interval, fn, opts = ...
  if once_cluster(opts) and cluster.configured() then
    if type(fn) ~= "function" then error("http.every: expected a function", 2) end
    core.check_opts(opts, "http.every", { "once" }, 2)
    return cluster.every(job_key("every", fn), interval, fn, select(4, ...))
  elseif once_cluster(opts) then
    return core.every(interval, fn, { once = true }, select(4, ...))
  end
  return core.every(...)
end

M.acme = {
  -- http.acme.status() → one entry per listener with tls.acme (docs/reference/acme.md)
  status = function()
    local acme = package.loaded["moonhttp.acme"]
    return acme and acme.status(M) or {}
  end,
}

M.cluster = {
  -- http.cluster.instances() → the live instances of the cluster, or nil, err
  instances = function() return cluster.instances() end,
}

local routes = {}
-- http.not_found / http.method_not_allowed / http.on_error handlers, registered at _finalize.
local special = {}

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

local route_options = { "max_body", "compress" }

local function add_route(scope, pattern, handler, opts, level)
  check_open("http.handle")
  if type(pattern) ~= "string" then
    error("http.handle: pattern must be a string", level)
  end
  if type(handler) ~= "function" and not core.is_handler(handler) then
    error("http.handle: handler must be a function or a C handler", level)
  end
  local max_body
  if opts ~= nil then
    if type(opts) ~= "table" then error("http.handle: options must be a table", level) end
    core.check_opts(opts, "http.handle", route_options, level)
    -- the max_body_bytes setting's parser and range (src/lua/lua_opts.c), so "1.5m" reads alike
    max_body = core.opt_size(opts, "max_body", nil, "http.handle", 0, level)
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
    max_body = max_body,
    compress = opts and opts.compress, -- checked by core.register, at `where`
  }
end

function Scope:handle(pattern, handler, opts) add_route(self, pattern, handler, opts, 3) end

local function add_middleware(scope, middleware)
  check_open("use")
  if type(middleware) ~= "function" then
    error("use: middleware must be a function(next) returning a handler", 3)
  end
  scope.middleware[#scope.middleware + 1] = { fn = middleware, where = where(4) }
end

function Scope:use(middleware)
  add_middleware(self, middleware)
  return self
end

function Scope:group(prefix)
  if type(prefix) ~= "string" or prefix:sub(1, 1) ~= "/" then
    error("group: prefix must be a path starting with '/'", 2)
  end
  return new_scope(prefix:gsub("/+$", ""), self)
end

local root = new_scope("", nil)

function M.handle(pattern, handler, opts) add_route(root, pattern, handler, opts, 3) end
function M.use(middleware) add_middleware(root, middleware); return M end

local function set_special(name, fn)
  check_open("http." .. name)
  if type(fn) ~= "function" then error("http." .. name .. ": expected a function", 3) end
  special[name] = fn
end

-- Custom 404 and 405 handlers; like the defaults, they run inside http.use middleware.
function M.not_found(fn) set_special("not_found", fn) end
function M.method_not_allowed(fn) set_special("method_not_allowed", fn) end
-- on_error(function(req, res, err) ... end): answers a handler's uncaught error (the response
-- was reset to a 500); when it fails too, the plain 500 goes out.
function M.on_error(fn) set_special("on_error", fn) end
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
-- True in code a reload replaced while its WebSockets and streams drain (drain_timeout):
-- tell clients to reconnect; the new code serves them.
function M.draining() return core.draining() end

-- This worker's slot, 1..workers: a worker restarted or replaced by a reload
-- gets its predecessor's number. nil while the script loads (in the master).
function M.worker_id() return core.worker_id() end

-- A readiness route for a load balancer or an orchestrator's probe:
--   http.handle("GET /ready", http.health_handler { check = function(req) ... end })
-- 503 "stopping" once a stop began (during shutdown_delay the worker still
-- serves, so the balancer drains it first), 503 with the check's error when
-- check(req) returns nil, err (or raises), else 200 "ok". Never cached.
local health_options = { "check" }
function M.health_handler(opts)
  if opts ~= nil and type(opts) ~= "table" then error("http.health_handler: options must be a table", 2) end
  opts = opts or {}
  core.check_opts(opts, "http.health_handler", health_options, 2)
  local check = opts.check
  if check ~= nil and type(check) ~= "function" then
    error("http.health_handler: check must be a function", 2)
  end
  return function(req, res)
    res:header("Content-Type", "text/plain")
    res:header("Cache-Control", "no-store")
    if core.stopping() then
      res:status(503)
      return res:write("stopping\n")
    end
    if check then
      local ok, good, err = pcall(check, req)
      if not ok then core.log("warn", "http.health_handler: check raised: " .. tostring(good)) end
      if not ok or not good then
        res:status(503)
        return res:write(tostring(ok and (err or "not ready") or "check failed"), "\n")
      end
    end
    res:write("ok\n")
  end
end

-- A C handler that serves the metrics (Prometheus text format) on a route.
function M.metrics_handler()
  return core.metrics_handler()
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

-- A streamed request body: `body` is a function returning pieces (nil at the
-- end; nil, err fails the fetch) or a `req`, whose body is passed on as it
-- arrives, with its Content-Length when it declared one, else chunked. One
-- piece is in flight at a time (fetch_send waits until it is written), so
-- memory stays at one piece however large the body. Not replayed: neither
-- retried nor sent again on a redirect. A server that answers before the body
-- is all sent (413, 401) ends the sending: its answer is the response
-- (fetch_send's false), as nginx and Go's ReverseProxy relay it.
local READ_PIECE = 64 * 1024
local Request_mt

local function body_source(body)
  if type(body) == "function" then return body, nil end
  Request_mt = Request_mt or debug.getregistry()["moonhttp.Request"]
  if type(body) == "userdata" and getmetatable(body) == Request_mt then
    local te = body:header("transfer-encoding")
    local length = not te and tonumber(body:header("content-length") or "") or nil
    return function() return body:read(READ_PIECE) end, length
  end
end

local function fetch_streamed(c, url, opts, src, length)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.body, o.redirects = nil, nil
  local resp, err, detail = core.fetch(c, url, o, length or true)
  if not resp then return nil, err, detail end
  -- not a tail call: upload.send's error level counts this frame
  local sent, kind, why = upload.send(resp, src, length, 3)
  return sent, kind, why
end

local function fetch(c, url, opts)
  local body = opts and opts.body
  if body ~= nil and type(body) ~= "string" then
    local src, length = body_source(body)
    if not src then error("http.fetch: opts.body must be a string, a function or a req", 3) end
    return fetch_streamed(c, url, opts, src, length)
  end
  local max = opts and opts.redirects or 0
  if max == true then max = MAX_REDIRECTS end
  if type(max) ~= "number" or max < 0 then
    error("http.fetch: opts.redirects must be a non-negative number", 3)
  end
  if max > MAX_REDIRECTS then max = MAX_REDIRECTS end
  local resp, err, detail = core.fetch(c, url, opts)
  local followed = 0
  while resp and max > 0 and redirect_codes[resp.status] do
    local loc = resp:header("location")
    if not loc then break end
    resp:close()
    if followed == max then return nil, "redirects", "stopped after " .. max .. " redirects" end
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
    resp, err, detail = core.fetch(c, url, opts)
  end
  return resp, err, detail
end

function M.fetch(url, opts) return fetch(nil, url, opts) end
-- http.proxy (lua/moonhttp/proxy.lua, docs/guide/proxy.md); not a tail call, so errors point at the caller
function M.proxy(req, res, target, opts)
  local ok, kind, detail = require("moonhttp.proxy").proxy(M, req, res, target, opts)
  return ok, kind, detail
end
-- http.relay_upgrade (lua/moonhttp/relay.lua, docs/reference/websocket-proxy.md)
function M.relay_upgrade(req, res, url, opts)
  local ok, why, up, down = require("moonhttp.relay").run(M, req, res, url, opts)
  return ok, why, up, down
end
function M.client_stats() return core.client_stats() end
-- http.upstream{...}: a group of servers for http.proxy and group:fetch (lua/moonhttp/upstream.lua)
function M.upstream(opts)
  local g = require("moonhttp.upstream").new(M, opts, 3)
  return g
end

local Client = {}
Client.__index = Client
function Client:fetch(url, opts) return fetch(self._c, url, opts) end
function Client:stats() return core.client_stats(self._c) end
function Client:close() core.client_close(self._c) end

function M.client(opts)
  if opts ~= nil and type(opts) ~= "table" then error("http.client: options must be a table", 2) end
  -- _opts: what an upgrade through http.proxy takes from it (relay.lua, client_opts)
  return setmetatable({ _c = core.client(opts), _opts = opts }, Client)
end

-- Wraps h in the middleware of its scope and all enclosing scopes; the
-- outermost scope's first middleware runs first.
local function compose(h, scope, pattern)
  local s = scope
  while s do
    for i = #s.middleware, 1, -1 do
      local m = s.middleware[i]
      h = m.fn(h)
      if type(h) ~= "function" and not core.is_handler(h) then
        error(m.where .. ": middleware registered here returned " .. type(h)
          .. " instead of a handler function (composing " .. pattern .. ")", 0)
      end
    end
    s = s.parent
  end
  return h
end

-- The body limit comes first, so middleware that reads the body sees it too.
local function with_max_body(h, max_body)
  if not max_body then return h end
  return function(req, res, ...)
    req:set_max_body(max_body)
    return h(req, res, ...)
  end
end

-- With http.on_error set, every handler runs inside a pcall in its own task. An error
-- before the response started is logged with its traceback by the core's own line, the
-- response is reset to an empty 500, and the app's handler answers it; an error after
-- the response started, or one of the error handler itself, goes on to the core
-- (which cuts the response, or sends the plain 500).
local function traced(e)
  return { value = e, trace = debug.traceback(core.error_text(e), 2) }
end

local function with_on_error(h, on_error)
  if not on_error then return h end
  return function(req, res, ...)
    local ok, err = xpcall(h, traced, req, res, ...)
    if ok then return end
    -- Started: the core cuts the response; its log gets the original traceback.
    if not core.reset_for_error(res) then error(err.trace, 0) end
    core.handler_error(req, err.trace) -- the core's own line: route, request, client
    return on_error(req, res, err.value)
  end
end

-- The core's own answers (src/http/dispatch.c), for when middleware or on_error wraps them.
local function default_not_found(req, res)
  res:status(404)
  res:write(core.default_text[404])
end

local function default_method_not_allowed(req, res)
  res:status(405)
  res:write(core.default_text[405])
end

-- The 405 handler's third argument (the Allow list) must get past middleware that calls
-- next(req, res) only: it waits here, keyed by the request, until the inner handler runs.
local allow_of = setmetatable({}, { __mode = "k" })

local function compose_method_not_allowed(h)
  local inner = compose(function(req, res)
    local allow = allow_of[req]
    allow_of[req] = nil
    return h(req, res, allow)
  end, root, "405 answers")
  return function(req, res, allow)
    allow_of[req] = allow
    return inner(req, res)
  end
end

-- Called by the C core once the script has run.
function M._finalize()
  for _, fn in ipairs(cluster_starts) do
    if cluster.configured() then
      local key = job_key("start", fn)
      core.on_start(function() cluster.run_start(key, fn) end)
    else
      core.on_start(fn, { once = true })
    end
  end
  cluster_starts = {}
  local on_error = special.on_error
  for _, r in ipairs(routes) do
    local h = with_max_body(compose(r.handler, r.scope, r.pattern), r.max_body)
    core.register(r.pattern, with_on_error(h, on_error), r.where, r.compress)
  end
  routes = {}
  -- Without middleware or on_error the core answers 404 and 405 itself, with no Lua call.
  local wrap = #root.middleware > 0 or on_error
  if special.not_found or wrap then
    local h = compose(special.not_found or default_not_found, root, "404 answers")
    core.not_found(with_on_error(h, on_error))
  end
  if special.method_not_allowed or wrap then
    local h = compose_method_not_allowed(special.method_not_allowed or default_method_not_allowed)
    core.method_not_allowed(with_on_error(h, on_error))
  end
end

return core.strict_module(M, "http")
