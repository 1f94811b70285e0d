-- http.relay_upgrade(req, res, url [, opts]): upgrade pass-through
-- (docs/reference/websocket-proxy.md). The exchange up to the upstream's answer head is
-- here, over an http.tcp() socket; after a 101 the bytes move in C
-- (core.relay over http/relay.c), with no Lua per chunk. http.proxy calls
-- M.run with the upstream request it built (forwarding headers, rewrites).
local core = require "moonhttp.core"
local crypto = require "moonhttp.crypto"

local M = {}

local KNOWN = { "connect_timeout", "read_timeout", "idle_timeout", "headers", "keep_host",
  "keep_path", "tls", "max_buffer", "via", "response" }

-- Hop-by-hop fields (hop.c's list) are not passed on; Upgrade and Connection are set
-- again below.
local HOP = core.hop_names

-- Not passed down: the front server's own (Date, Server), and what a switch answer over HTTP/2
-- cannot carry or no longer means (RFC 8441 has no key and no accept).
local OWN_DOWN = { date = true, server = true }
local H2_DOWN = { ["sec-websocket-accept"] = true, ["content-length"] = true }

local PIECE = 64 * 1024
local MAX_HEAD = 64 * 1024 -- an upstream's answer head, as the fetch client bounds it

-- A socket's error as http.fetch's kinds (docs/reference/fetch.md), so http.proxy maps both alike.
local KIND = { timeout = "timeout", ["connection refused"] = "refused",
  ["connection reset"] = "reset", closed = "closed", ["bad response"] = "malformed",
  ["host not found"] = "dns", ["out of memory"] = "nomem" }

local WHAT = "http.relay_upgrade"

local function failed(err)
  err = tostring(err)
  return nil, KIND[err] or (err:match("^tls") and "tls") or "connect", err
end

-- "ws://host:port/p?q" -> tls, host, port, authority, target
local function parse_url(url)
  local scheme, authority, target = url:match("^(%a+)://([^/?#]+)([^#]*)$")
  scheme = scheme and scheme:lower()
  if scheme ~= "http" and scheme ~= "https" and scheme ~= "ws" and scheme ~= "wss" then return nil end
  local host, port = authority:match("^%[([^%]]+)%]:?(%d*)$")
  if not host then host, port = authority:match("^([^:]+):?(%d*)$") end
  if not host then return nil end
  local tls = scheme == "https" or scheme == "wss"
  port = tonumber(port) or (tls and 443 or 80)
  if port < 1 or port > 65535 then return nil end
  if target == "" then target = "/" end
  if target:sub(1, 1) == "?" then target = "/" .. target end
  return tls, host, port, authority, target
end

local function check_value(name, value)
  if type(name) ~= "string" or not name:match("^[%w!#$%%&'*+.^_`|~-]+$")
      or type(value) ~= "string" or value:find("[\r\n%z]") then
    error("http.relay_upgrade: headers must map token names to values without CR, LF or NUL", 4)
  end
end

-- The upstream request's head: the client's end-to-end headers (or `up`'s, built by
-- http.proxy), Upgrade and Connection, Host, opts.headers. Returns the bytes and, for an
-- RFC 8441 client, the Sec-WebSocket-Key made up for the HTTP/1.1 upstream.
local function request_head(req, opts, up, authority, target, h2)
  local out, seen = {}, {}
  local function put(name, value)
    out[#out + 1] = name .. ": " .. value .. "\r\n"
  end
  local extra = {}
  for name, value in pairs(opts.headers or {}) do
    if value ~= false then check_value(name, value) end
    extra[name:lower()] = { name, value }
  end
  if up then
    for name, values in pairs(up.headers) do
      local l = name:lower()
      if not extra[l] and not HOP[l] and #values > 0 then
        for _, v in ipairs(values) do put(name, v) end
        seen[l] = true
      end
    end
  else
    local list = core.hop_kept(req:header_list())
    for i = 1, #list, 2 do
      local l = list[i]:lower()
      if not extra[l] and (l ~= "host" or opts.keep_host) then
        put(list[i], list[i + 1])
        seen[l] = true
      end
    end
  end
  if not seen.host and not extra.host then
    put("Host", (not up and opts.keep_host and req.host ~= "") and req.host or authority)
  end
  for _, nv in pairs(extra) do
    if nv[2] ~= false then put(nv[1], nv[2]) end
  end
  local key
  if h2 then
    -- RFC 8441 §5: the upstream speaks RFC 6455, which needs a key; the answer is checked below
    key = crypto.base64.encode(crypto.crypto.random(16))
    put("Sec-WebSocket-Key", key)
    put("Upgrade", "websocket")
  else
    put("Upgrade", req:header("upgrade"))
  end
  put("Connection", "Upgrade")
  if opts.via and not up then -- http.proxy's `up` has its Via already
    local v = req.proto:match("HTTP/(.*)")
    put("Via", (v == "2.0" and "2" or v) .. " " .. opts.via)
  end
  local method = up and up.method or req.method
  return method .. " " .. target .. " HTTP/1.1\r\n" .. table.concat(out) .. "\r\n", key
end

-- The answer's head: status, headers as { name, value, ... } (case kept), or nil, err.
local function read_head(sock)
  local line, err = sock:receive("l")
  if not line then return nil, err end
  local status = tonumber(line:match("^HTTP/1%.[01] (%d%d%d)"))
  if not status then return nil, "bad response" end
  local list, size = {}, #line
  while true do
    line, err = sock:receive("l")
    if not line then return nil, err end
    if line == "" then return status, list end
    size = size + #line
    if size > MAX_HEAD then return nil, "bad response" end
    local name, value = line:match("^([^:%s]+):%s*(.-)%s*$")
    if not name then return nil, "bad response" end
    list[#list + 1] = name
    list[#list + 1] = value
  end
end

local function find(list, name)
  for i = 1, #list, 2 do
    if list[i]:lower() == name then return list[i + 1] end
  end
end

-- Headers to pass down: hop-by-hop ones, those the upstream's Connection names (C's
-- rules: core.hop_kept), and the server's own left out; keep_upgrade keeps Upgrade (a
-- 101 over HTTP/1.1).
local function down_headers(list, keep_upgrade, h2)
  list = core.hop_kept(list, keep_upgrade and "upgrade" or nil)
  local out = {}
  for i = 1, #list, 2 do
    local l = list[i]:lower()
    if not OWN_DOWN[l] and not (h2 and H2_DOWN[l]) then
      out[#out + 1] = list[i]
      out[#out + 1] = list[i + 1]
    end
  end
  return out
end

-- The answer's head as http.proxy's response hook sees it ({ status =, headers = { Name =
-- { values } } }), with Via added (the upstream spoke HTTP/1.1), then flat again; the
-- list as it was when there is neither.
local function hooked(req, status, list, opts)
  if not opts.via and not opts.response then return status, list end
  local head, spelling = { status = status, headers = {} }, {}
  local function add(name, value)
    local key = spelling[name:lower()]
    if not key then
      key = name
      spelling[name:lower()], head.headers[key] = name, {}
    end
    local t = head.headers[key]
    t[#t + 1] = value
  end
  for i = 1, #list - 1, 2 do add(list[i], list[i + 1]) end
  if opts.via then add("Via", "1.1 " .. opts.via) end
  if opts.response then opts.response(head, req) end
  local out = {}
  for name, values in pairs(head.headers) do
    for _, v in ipairs(values) do
      out[#out + 1] = name
      out[#out + 1] = v
    end
  end
  return head.status, out
end

-- A non-101 answer as a normal response: its head, then its body by its framing.
local function relay_response(req, res, sock, status, list, opts)
  local shown, down = hooked(req, status, down_headers(list), opts)
  res:status(shown)
  local set = {}
  for i = 1, #down - 1, 2 do
    local name, value = down[i], down[i + 1]
    local l = name:lower()
    if set[l] then res:add_header(name, value) else res:header(name, value) end
    set[l] = true
  end
  if req.method == "HEAD" or status == 204 or status == 304 then return true end
  local te = find(list, "transfer-encoding")
  local len = tonumber(find(list, "content-length") or "")
  local function pass(n)
    while n > 0 do
      local piece, err, partial = sock:receive(n < PIECE and n or PIECE)
      piece = piece or partial
      if piece and #piece > 0 then
        if not res:write(piece) then return true end -- the client went away
        res:flush()
        n = n - #piece
      end
      if err then return nil, err end
    end
    return true
  end
  if te and te:lower():find("chunked", 1, true) then
    while true do
      local line, err = sock:receive("l")
      if not line then return nil, err end
      local size = tonumber(line:match("^%x+"), 16)
      if not size then return nil, "bad response" end
      if size == 0 then return true end -- trailers, if any, are not read: the socket closes
      local ok, perr = pass(size)
      if not ok then return nil, perr end
      sock:receive("l")
    end
  elseif len then
    return pass(len)
  end
  while true do -- close-delimited
    local piece, err, partial = sock:receive(PIECE)
    piece = piece or partial
    if piece and #piece > 0 then
      if not res:write(piece) then return true end
      res:flush()
    end
    if err == "closed" then return true end
    if err then return nil, err end
  end
end

-- The switch: answers the client and hands both sides to the C pump until the relay ends.
local function switch(req, sock, status, list, h2, key, opts)
  if h2 then
    if find(list, "sec-websocket-accept") ~= core.ws_accept(key) then return nil, "bad response" end
    status = 200 -- RFC 8441 §5
  end
  -- switch is called by run, for http.relay_upgrade's caller: 4 up
  local idle = core.opt_seconds(opts, "idle_timeout", 60, WHAT, 4)
  local max_buffer = core.opt_size(opts, "max_buffer", 65536, WHAT, 1, 4)
  local shown, down = hooked(req, status, down_headers(list, not h2, h2), opts)
  if shown ~= status then
    error("http.proxy: the response hook cannot change the status of a switch (" .. status
      .. "): the upstream has switched protocols", 0)
  end
  return core.relay(req, sock, status, down, idle, max_buffer)
end

-- What an upgrade takes from an http.client (http.proxy's `client`, a group's own): its TLS
-- settings and connect_timeout. Its pool does not apply: an upgraded connection never
-- goes back to one.
function M.client_opts(client)
  local o = client._opts or {}
  local tls
  if o.tls then
    tls = {}
    for _, k in ipairs({ "verify", "ca", "cert", "key", "min_version" }) do tls[k] = o.tls[k] end
  end
  return tls, o.connect_timeout
end

-- true, why; or nil, kind, detail (the upstream could not be reached or did not answer:
-- nothing was sent to the client).
function M.run(http, req, res, url, opts, up)
  if type(url) ~= "string" then error("http.relay_upgrade: url must be a string", 3) end
  if opts == nil then opts = {} end
  if type(opts) ~= "table" then error("http.relay_upgrade: options must be a table", 3) end
  core.check_opts(opts, "http.relay_upgrade", KNOWN, 3)
  local tls, host, port, authority, target = parse_url(url)
  if tls == nil then
    error("http.relay_upgrade: url must be http(s)://host[:port][/path] or ws(s)://...", 3)
  end
  local h2 = core.extended_connect(req)
  if not h2 and not req:header("upgrade") then return nil, "upgrade", "not an upgrade request" end
  if opts.keep_path or up then
    local q = req.query
    target = (up and up.path) or (req.raw_path .. ((q and q ~= "") and ("?" .. q) or ""))
  end
  local head, key = request_head(req, opts, up, authority, target, h2)
  local sock <close> = http.tcp()
  local ct = core.opt_seconds(opts, "connect_timeout", 10, WHAT, 3)
  local rt = core.opt_seconds(opts, "read_timeout", 60, WHAT, 3)
  sock:settimeouts(ct, rt, rt)
  local copts
  if tls then copts = { tls = opts.tls == nil and true or opts.tls } end
  local ok, err = sock:connect(host, port, copts)
  if not ok then return failed(err) end
  ok, err = sock:send(head)
  if not ok then return failed(err) end
  local status, list = read_head(sock)
  while status and status >= 100 and status < 200 and status ~= 101 do
    status, list = read_head(sock) -- 100 Continue, 103 Early Hints: the final answer follows
  end
  if not status then return failed(list) end
  if status == 101 then
    local why, up_bytes, down_bytes
    ok, why, up_bytes, down_bytes = switch(req, sock, status, list, h2, key, opts)
    if not ok and why == "stopping" then return true, why end -- switched, then a stop ended it
    if not ok then return failed(why) end
    return ok, why, up_bytes, down_bytes
  end
  ok, err = relay_response(req, res, sock, status, list, opts)
  if not ok then error("http.relay_upgrade: upstream " .. tostring(err), 0) end -- head is out: cut
  return true, "not upgraded"
end

return M
