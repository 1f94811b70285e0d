-- http.proxy(req, res, target [, opts]): a reverse proxy for one request
-- (docs/guide/proxy.md). The upstream exchange is http.fetch with the request body
-- streamed from `req`; the response is streamed back piece by piece. What is
-- HTTP policy (hop-by-hop headers, forwarding headers, Via, error mapping) is
-- here; the bytes move through the client and res:write.
local core = require "moonhttp.core"
local hop = require "moonhttp.hop"
local upstream = require "moonhttp.upstream"
local upload = require "moonhttp.upload"

local M = {}

local KNOWN = { "client", "timeout", "connect_timeout", "send_timeout", "read_timeout",
  "preserve_host", "x_forwarded", "forwarded", "trust_forwarded", "via", "request",
  "response", "on_error", "idle_timeout" }

local HOP = hop.NAMES

-- The front server's own on the way down (as nginx does): its Date and Server. Content-Length
-- passes (a HEAD answer keeps the GET's length; a download its progress); if the body then
-- falls short, relay() raises and the client's connection is cut.
local OWN_DOWN = { date = true, server = true }

-- Set by the proxy itself on the way up, whatever the client sent.
local OWN_UP = { host = true, ["content-length"] = true, expect = true }
local FORWARDING = { ["x-forwarded-for"] = true, ["x-forwarded-proto"] = true,
  ["x-forwarded-host"] = true, forwarded = true }

local PIECE = 64 * 1024

local dropped = hop.dropped

-- Adds value under name (l: its lowercase), keeping the first spelling of a name seen in any case.
local function add(headers, spelling, name, value, l)
  l = l or name:lower()
  local key = spelling[l]
  if not key then
    key = name
    spelling[l] = name
    headers[key] = {}
  end
  local t = headers[key]
  t[#t + 1] = value
end

local function client_ip(req)
  local a = req.remote_addr or ""
  return a:match("^%[(.*)%]:%d+$") or a:match("^(.*):%d+$") or a
end

local function via_proto(req)
  local v = req.proto:match("HTTP/(.*)")
  return v == "2.0" and "2" or v
end

-- URL targets already split, as { base, prefix, authority }: a route proxies to the same few
-- strings on every request. Bounded, for a handler that builds a URL per request.
local resolved, nresolved = {}, 0
local MAX_RESOLVED = 256

-- A URL target resolved to its base and path prefix; a group (http.upstream)
-- has no prefix and picks its server per attempt (exchange below).
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

-- The upstream request: method, path, headers (name → list), per RFC 9110 §7.6.
-- Also returns what the same walk over the fields saw of the request's framing
-- and upgrade (req:header would walk them again for each): the first
-- Content-Length, whether Transfer-Encoding and Upgrade came.
local function upstream_request(req, opts, prefix)
  local list = req:header_list()
  local drop = dropped(list)
  local headers, spelling = {}, {}
  local trust = opts.trust_forwarded
  local cl, te, upgrade
  for i = 1, #list, 2 do
    local name, value = list[i], list[i + 1]
    local l = name:lower()
    if not drop[l] and not OWN_UP[l] and (trust or not FORWARDING[l]) then
      add(headers, spelling, name, value, l)
    elseif l == "content-length" then
      cl = cl or value
    elseif l == "transfer-encoding" then
      te = true
    elseif l == "upgrade" then
      upgrade = true
    end
  end
  local ip = client_ip(req)
  local proto = req:tls() and "https" or "http"
  if opts.x_forwarded ~= false then
    local xff = spelling["x-forwarded-for"]
    if xff then
      local t = headers[xff]
      headers[xff] = { table.concat(t, ", ") .. ", " .. ip }
    else
      add(headers, spelling, "X-Forwarded-For", ip, "x-forwarded-for")
    end
    if not spelling["x-forwarded-proto"] then add(headers, spelling, "X-Forwarded-Proto", proto, "x-forwarded-proto") end
    local host = req.host
    if not spelling["x-forwarded-host"] and host ~= "" then
      add(headers, spelling, "X-Forwarded-Host", host, "x-forwarded-host")
    end
  end
  if opts.forwarded then
    local node = ip:find(":", 1, true) and ('"[' .. ip .. ']"') or ip
    local host = req.host ~= "" and (';host="' .. req.host:gsub('[\\"]', "") .. '"') or ""
    add(headers, spelling, "Forwarded", "for=" .. node .. ";proto=" .. proto .. host)
  end
  if opts.via then add(headers, spelling, "Via", via_proto(req) .. " " .. opts.via) end
  if opts.preserve_host and req.host ~= "" then add(headers, spelling, "Host", req.host) end
  -- no User-Agent from the client: none to the upstream either (an empty list stops fetch's own)
  if not spelling["user-agent"] then headers["User-Agent"] = {} end
  local q = req.query
  return {
    method = req.method,
    path = prefix .. req.raw_path .. ((q and q ~= "") and ("?" .. q) or ""),
    headers = headers,
  }, cl, te, upgrade
end

local ERROR_TEXT = { [502] = "bad gateway\n", [503] = "no healthy upstream\n", [504] = "gateway timeout\n" }

local function default_error(res, status)
  res:header("Content-Type", "text/plain; charset=utf-8")
  res:header("Cache-Control", "no-store")
  res:status(status)
  res:write(ERROR_TEXT[status])
end

local function fail(res, opts, kind, detail)
  -- "unavailable": every server of a group is marked down (upstream.lua)
  local status = kind == "timeout" and 504 or kind == "unavailable" and 503 or 502
  if opts.on_error then
    opts.on_error(res, status, kind, detail)
  else
    default_error(res, status)
  end
  return nil, kind, detail
end

-- Trailer is end-to-end in RFC 9110 (hop.NAMES keeps RFC 2616's list): its fields are passed
-- on after the body (pass_trailers), so their announcement goes down too, unless the
-- upstream's Connection names it or an HTTP/1.0 client can get no trailers. Asked only
-- when the upstream sent one (req.proto is a call into C).
local function keeps_trailer(req, drop)
  return (drop == HOP or not rawget(drop, "trailer")) and req.proto ~= "HTTP/1.0"
end

-- Sends the response head: status and headers, hop-by-hop ones and the framing dropped.
-- Without a response hook, core.proxy_response does it in C (src/lua/lua_proxy.c, the same
-- rules), and the loop below only runs for what it leaves to Lua (many Connection fields, a
-- status res:status refuses); they go to res as they come, in the upstream's order.
local function send_head(req, res, resp, opts)
  if not opts.response and core.proxy_response(res, resp, req, opts.via) then return end
  local list = resp:header_list()
  local drop = dropped(list)
  if not opts.response then
    res:status(resp.status)
    local spelling = {}
    for i = 1, #list, 2 do
      local name = list[i]
      local l = name:lower()
      if (not drop[l] or (l == "trailer" and keeps_trailer(req, drop))) and not OWN_DOWN[l] then
        local first = spelling[l]
        if first then
          res:add_header(first, list[i + 1])
        else
          spelling[l] = name
          res:header(name, list[i + 1])
        end
      end
    end
    if opts.via then
      local value = resp.proto:match("HTTP/(.*)") .. " " .. opts.via
      if spelling.via then res:add_header(spelling.via, value) else res:header("Via", value) end
    end
    return
  end
  local head = { status = resp.status, headers = {} }
  local spelling = {}
  for i = 1, #list, 2 do
    local l = list[i]:lower()
    if (not drop[l] or (l == "trailer" and keeps_trailer(req, drop))) and not OWN_DOWN[l] then
      add(head.headers, spelling, list[i], list[i + 1])
    end
  end
  if opts.via then add(head.headers, spelling, "Via", resp.proto:match("HTTP/(.*)") .. " " .. opts.via) end
  if opts.response then opts.response(head, req) end
  res:status(head.status)
  for name, values in pairs(head.headers) do
    for i, v in ipairs(values) do
      if i == 1 then res:header(name, v) else res:add_header(name, v) end
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

-- Streams the response body, then its trailers.
local function relay(res, resp)
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

local NO_OPTS = setmetatable({}, { __newindex = function() error("http.proxy: internal: options are read only") end })

-- The plain path: a URL target and no request hook. The upstream head is built in C from
-- the request's fields (core.proxy_request: upstream_request's rules) and sent as is, so no
-- Lua table is made for the request. Returns false when the request needs the Lua path
-- (an upgrade, more Connection fields than C keeps).
local function plain(req, res, base, prefix, authority, opts)
  local o = opts ~= NO_OPTS and opts or nil -- no options: C reads none
  local head, method, stream = core.proxy_request(req, authority, prefix, o)
  if not head then return false end
  local client = opts.client
  local resp, kind, detail = core.proxy_fetch(client and client._c, base, head, method, stream, o)
  if resp and stream then
    resp, kind, detail = upload.send(resp, function() return req:read(PIECE) end, stream ~= true and stream or nil, 2)
  end
  if not resp then return fail(res, opts, kind, detail) end
  send_head(req, res, resp, opts)
  local ok = relay(res, resp)
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
  if authority and not opts.request then
    local ok, kind, detail = plain(req, res, base, prefix, authority, opts)
    if ok ~= false then return ok, kind, detail end
  end
  local up, cl, te, upgrade = upstream_request(req, opts, prefix)
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
    resp, server, detail = group:exchange(up.path, fopts, not has_body, req)
    if not resp then kind = server end
  end
  if not resp then return fail(res, opts, kind, detail) end
  -- least_conn counts the request in flight until its body is relayed, however that ends
  local _ <close> = server and setmetatable({}, { __close = function() group:release(server) end })
  send_head(req, res, resp, opts)
  local ok = relay(res, resp)
  resp:close()
  return ok
end

return M
