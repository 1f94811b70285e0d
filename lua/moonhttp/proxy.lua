-- http.proxy(req, res, target [, opts]): a reverse proxy for one request
-- (docs/guide/proxy.md). The policy is here: targets and groups, hooks, error
-- mapping. Which fields go up and down (hop-by-hop ones, forwarding headers,
-- Via, framing) is decided in C, src/lua/lua_proxy.c, for both paths: the
-- plain one sends its head as built there, the hook path gets the same fields
-- as tables. The bodies move in C too (src/lua/lua_proxy_body.c), both ways,
-- except for moonhttp.cache's stand-in req and res.
local core = require "moonhttp.core"
local upstream = require "moonhttp.upstream"
local upload = require "moonhttp.upload"

local M = {}

local KNOWN = { "client", "timeout", "connect_timeout", "send_timeout", "read_timeout",
  "preserve_host", "x_forwarded", "forwarded", "trust_forwarded", "via", "request",
  "response", "on_error", "idle_timeout" }

local HOP = core.hop_names -- hop.c's list, lowercase name -> true

local PIECE = 64 * 1024

-- A header list { name, value, ... } whose names are already in their first spelling
-- (core.proxy_request / core.proxy_response) as the hooks' table: name -> { values }.
local function by_name(list)
  local headers = {}
  for i = 1, #list, 2 do
    local t = headers[list[i]]
    if not t then
      t = {}
      headers[list[i]] = t
    end
    t[#t + 1] = list[i + 1]
  end
  return headers
end

-- A URL target resolved to its base, path prefix and authority; a group (http.upstream)
-- has no prefix and picks its server per attempt (exchange below). A route proxies to the
-- same few strings on every request: kept, bounded, for a handler that builds a URL per
-- request.
local resolved, nresolved = {}, 0
local MAX_RESOLVED = 256

local function resolve_target(target)
  local r = resolved[target]
  if r then return r[1], r[2], r[3] end
  if upstream.is_group(target) then return target, "" end
  if type(target) ~= "string" then error("http.proxy: target must be a URL or an http.upstream group", 4) end
  local base, prefix = target:match("^([hH][tT][tT][pP][sS]?://[^/?#]+)([^?#]*)$")
  if not base then error("http.proxy: target must be http://host[:port][/prefix]", 4) end
  prefix = prefix:gsub("/$", "")
  local authority = base:match("^[^:]+://(.*)$")
  if nresolved < MAX_RESOLVED then
    resolved[target] = { base, prefix, authority }
    nresolved = nresolved + 1
  end
  return base, prefix, authority
end

-- The upstream request for the hook path: method, path, headers (name -> list), built by
-- core.proxy_request's rules (src/lua/lua_proxy.c, RFC 9110 §7.6); also the first
-- Content-Length and whether Transfer-Encoding and Upgrade came. nil, "invalid", why for
-- a field that cannot go up.
local function upstream_request(req, opts, prefix)
  local list, path, cl, te, upgrade = core.proxy_request(req, nil, prefix, opts, true)
  if not list then return nil, path, cl end
  local headers = by_name(list)
  -- no User-Agent from the client: none to the upstream either (an empty list stops fetch's own)
  local ua
  for i = 1, #list, 2 do
    if #list[i] == 10 and list[i]:lower() == "user-agent" then ua = true break end
  end
  if not ua then headers["User-Agent"] = {} end
  return { method = req.method, path = path, headers = headers }, cl, te, upgrade
end

local ERROR_TEXT = { [400] = "bad request\n", [502] = "bad gateway\n", [503] = "no healthy upstream\n",
  [504] = "gateway timeout\n" }

local function default_error(res, status)
  res:header("Content-Type", "text/plain; charset=utf-8")
  res:header("Cache-Control", "no-store")
  res:status(status)
  res:write(ERROR_TEXT[status])
end

local function fail(res, opts, kind, detail)
  -- "unavailable": every server of a group is marked down (upstream.lua); "invalid": a
  -- request field with CR, LF or NUL (core.proxy_request)
  local status = kind == "timeout" and 504 or kind == "unavailable" and 503 or kind == "invalid" and 400 or 502
  if opts.on_error then
    opts.on_error(res, status, kind, detail)
  else
    default_error(res, status)
  end
  return nil, kind, detail
end

-- Sends the response head: status and fields as core.proxy_response chooses them
-- (src/lua/lua_proxy.c: hop-by-hop ones and the upstream's Date and Server dropped, Via).
-- Straight into res without a response hook; as a header list for the hook (its head
-- table) or a stand-in res, in the upstream's order.
local function send_head(req, res, resp, opts)
  if not opts.response and core.proxy_response(res, resp, req, opts.via) then return end
  local status, list = core.proxy_response(res, resp, req, opts.via, true)
  if opts.response then
    local head = { status = status, headers = by_name(list) }
    opts.response(head, req)
    res:status(head.status)
    for name, values in pairs(head.headers) do
      for i, v in ipairs(values) do
        if i == 1 then res:header(name, v) else res:add_header(name, v) end
      end
    end
    return
  end
  res:status(status)
  local seen = {}
  for i = 1, #list, 2 do
    local name = list[i]
    if seen[name] then
      res:add_header(name, list[i + 1])
    else
      seen[name] = true
      res:header(name, list[i + 1])
    end
  end
end

-- The upstream's trailer fields, passed on (an HTTP/1.0 client, or a body framed by the
-- upstream's Content-Length, has no place for them: they are dropped).
local function pass_trailers(res, resp)
  local list = core.fetch_trailers(resp) -- nil when none: no table per response
  if not list then return end
  for i = 1, #list, 2 do
    local name = list[i]
    -- one at a time: a field that cannot be a trailer (Content-Length...) is dropped alone
    if not HOP[name:lower()] then pcall(res.trailers, res, { [name] = list[i + 1] }) end
  end
end

-- Streams the response body, then its trailers, for a stand-in res (moonhttp.cache's).
local function relay_lua(res, resp)
  while true do
    local piece, kind, detail = resp:read(PIECE)
    if not piece then
      if kind then
        -- the head is out: cut the client's connection rather than end the body as if complete
        error(string.format("http.proxy: upstream %s: %s", kind, detail), 0)
      end
      pass_trailers(res, resp)
      return true
    end
    if not res:write(piece) then return true end -- the client went away
    if not resp.complete then res:flush() end -- more is coming: send what is here now (SSE)
  end
end

-- Streams the response body, then its trailers: in C (core.proxy_relay, src/lua/
-- lua_proxy_body.c), with back-pressure; a stand-in res through relay_lua.
local function relay(req, res, resp)
  local ok, kind, detail = core.proxy_relay(res, resp, req)
  if ok == nil then
    if kind == "stand-in" then return relay_lua(res, resp) end
    -- the head is out: cut the client's connection rather than end the body as if complete
    if kind ~= "stopping" then error(string.format("http.proxy: upstream %s: %s", kind, detail), 0) end
  end
  return true
end

local NO_OPTS = setmetatable({}, { __newindex = function() error("http.proxy: internal: options are read only") end })

-- One exchange of the plain path: head (core.proxy_request's) sent to base over client (a
-- core client, or nil: the default one; with host, base's authority is the Host), the
-- body streamed from req. Returns resp, or nil, kind, detail.
local function plain_send(base, req, client, head, method, stream, o, host)
  local resp, kind, detail = core.proxy_fetch(client, base, head, method, stream, o, host)
  if not resp or not stream then return resp, kind, detail end
  -- the body goes up in C (core.proxy_upload), one piece in flight
  local ok
  ok, kind, detail = core.proxy_upload(resp, req, stream)
  if ok == nil then
    if kind ~= "stand-in" then
      resp:close()
      return nil, kind, detail
    end
    return upload.send(resp, function() return req:read(PIECE) end, stream ~= true and stream or nil, 2)
  end
  return core.fetch_head(resp)
end

-- A group's attempt at server s: the head built once for every attempt.
local function group_send(s, ...)
  return plain_send(s.base, ...)
end

-- The plain path: no request hook, a URL target or a group (its server picked per
-- attempt, then this path). The upstream head is built in C from the request's fields
-- (core.proxy_request), once, and sent as is, so no Lua table is made for the request.
-- Returns false when the request needs the hook path (an upgrade, a stand-in req).
local function plain(req, res, target, base, prefix, authority, opts)
  local o = opts ~= NO_OPTS and opts or nil -- no options: C reads none
  local group = not authority
  if group and opts.client then
    error("http.proxy: a group has its own client (http.upstream's client option)", 4)
  end
  -- a group's Host is its server's, written per attempt by core.proxy_fetch (host)
  local head, method, stream, host = core.proxy_request(req, authority or false, prefix, o)
  if not head then
    if method == "upgrade" or method == "stand-in" then return false end
    return fail(res, opts, method, stream)
  end
  local resp, kind, detail, server
  if not group then
    local client = opts.client
    resp, kind, detail = plain_send(base, req, client and client._c, head, method, stream, o)
  else
    resp, server, detail = target:_exchange(method, "", nil, stream == nil, req, nil, group_send,
      req, target.client._c, head, method, stream, o, host)
    if not resp then kind = server end
  end
  if not resp then return fail(res, opts, kind, detail) end
  -- least_conn counts the request in flight until its body is relayed, however that ends
  local _ <close> = server
  send_head(req, res, resp, opts)
  local ok = relay(req, res, resp)
  resp:close()
  return ok
end


function M.proxy(http, req, res, target, opts)
  if opts == nil then
    opts = NO_OPTS
  elseif type(opts) ~= "table" then
    error("http.proxy: options must be a table", 3)
  else
    core.check_opts(opts, "http.proxy", KNOWN, 3)
  end
  local base, prefix, authority = resolve_target(target)
  if not opts.request then
    local ok, kind, detail = plain(req, res, target, base, prefix, authority, opts)
    if ok ~= false then return ok, kind, detail end
  end
  local up, cl, te, upgrade = upstream_request(req, opts, prefix)
  if not up then return fail(res, opts, cl, te) end
  if opts.request then opts.request(up, req) end
  if upgrade or core.extended_connect(req) then
    -- a WebSocket (or any 101 upgrade): two byte pipes after the upstream's 101 (relay.lua);
    -- a group gives one server (no retry: the handshake is not replayed)
    local relay = require("moonhttp.relay")
    local ubase, client = base, opts.client
    if upstream.is_group(target) then
      if client then error("http.proxy: a group has its own client (http.upstream's client option)", 3) end
      local why
      ubase, why = target:url(req)
      if not ubase then return fail(res, opts, why, "no server available") end
      client = target.client
    end
    local tls, connect_timeout
    if client then tls, connect_timeout = relay.client_opts(client) end
    local ok, why, detail = relay.run(http, req, res, ubase .. up.path, {
      connect_timeout = opts.connect_timeout or connect_timeout, read_timeout = opts.read_timeout,
      idle_timeout = opts.idle_timeout, tls = tls, via = opts.via, response = opts.response }, up)
    if not ok then return fail(res, opts, why, detail) end
    return ok, why
  end
  local has_body = (cl and cl ~= "0") or te
  local fopts = {
    method = up.method, headers = up.headers,
    -- an empty body is a string, so a retry may send it again (with its Content-Length: 0)
    body = has_body and req or (cl and "" or nil),
    timeout = opts.timeout or 0,
    connect_timeout = opts.connect_timeout,
    send_timeout = opts.send_timeout,
    read_timeout = opts.read_timeout or 60,
  }
  local resp, kind, detail, server
  local group = upstream.is_group(target) and target
  if not group then
    local client = opts.client
    if client then
      resp, kind, detail = client:fetch(base .. up.path, fopts)
    else
      resp, kind, detail = http.fetch(base .. up.path, fopts)
    end
  else
    if opts.client then error("http.proxy: a group has its own client (http.upstream's client option)", 3) end
    -- a streamed body cannot be sent twice: only a request without one is retried
    resp, server, detail = group:_exchange(up.method, up.path, fopts, not has_body, req)
    if not resp then kind = server end
  end
  if not resp then return fail(res, opts, kind, detail) end
  -- least_conn counts the request in flight until its body is relayed, however that ends
  local _ <close> = server
  send_head(req, res, resp, opts)
  local ok = relay(req, res, resp)
  resp:close()
  return ok
end

return M
