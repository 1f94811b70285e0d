---@meta _
-- The objects moonhttp hands to an app: req, res, ws (checked against the
-- binary's methods by spec/annotations_spec.lua) and the handles the module
-- functions return. The pages: docs/guide/handlers.md, web-apps.md,
-- websocket.md, docs/reference/.

---@alias moonhttp.Handler fun(req: moonhttp.Request, res: moonhttp.Response)

---The request a handler gets (docs/guide/handlers.md#req).
---@class moonhttp.Request
---@field method string
---@field proto string
---@field path string the decoded path
---@field raw_path string the path as the client sent it
---@field query string
---@field host string
---@field remote_addr string
---@field pattern string the route pattern that matched
---@field ctx table per-request table for middleware
local Request = {}

---The decoded value of a `{name}` wildcard, or nil.
---@param name string
---@return string?
function Request:pathvalue(name) end

---A query argument (first value).
---@param name string
---@return string?
function Request:arg(name) end

---The query: name → first value; `{ multi = true }`: name → list of values.
---@param opts? { multi?: boolean }
---@return table<string, string|string[]>|nil args
---@return string? err
function Request:args(opts) end

---First value of a header, case-insensitive, or nil.
---@param name string
---@return string?
function Request:header(name) end

---Lower-case name → list of values.
---@return table<string, string[]>
function Request:headers() end

---`{ name1, value1, name2, value2, ... }` in order.
---@return string[]
function Request:header_list() end

---The whole body (waits for it), or `nil, err`.
---@return string|nil body
---@return string? err
function Request:body() end

---Up to `n` bytes of the body as they arrive; `nil` at the end; `nil, err` on error.
---@param n integer
---@return string|nil chunk
---@return string? err
function Request:read(n) end

---This request's body must be in within `s` seconds from now (0 = no limit).
---@param s number
function Request:set_read_timeout(s) end

---This request's body limit instead of `max_body_bytes`.
---@param bytes integer|string
function Request:set_max_body(bytes) end

---Switches to a WebSocket: `ws`, or `nil, err` with a 400/426 staged.
---@param opts? moonhttp.WebSocketOptions
---@return moonhttp.WebSocket|nil ws
---@return string? err
function Request:websocket(opts) end

---This request's id.
---@return string
function Request:id() end

---The connection's TLS, or `nil` on plain TCP.
---@return { version: string, cipher: string, alpn?: string, sni?: string, client_cert?: table }?
function Request:tls() end

---Reads the body and decodes it as JSON: value, or `nil, err`.
---@return any value
---@return string? err
function Request:json() end

---The first cookie of that name.
---@param name string
---@return string?
function Request:cookie(name) end

---Name → value, from every `Cookie` header line.
---@return table<string, string>
function Request:cookies() end

---An `application/x-www-form-urlencoded` body: name → value, or `nil, err`.
---@return table<string, string>|nil form
---@return string? err
function Request:form() end

---A `multipart/form-data` body, part by part.
---@param opts? { max_parts?: integer, max_header_bytes?: integer }
---@return function|nil parts
---@return string? err
function Request:multipart(opts) end

---The response a handler writes (docs/guide/handlers.md#res).
---@class moonhttp.Response
local Response = {}

---Sets the status (default 200).
---@param code integer
function Response:status(code) end

---Sets a header (replacing).
---@param name string
---@param value string
function Response:header(name, value) end

---Adds a header.
---@param name string
---@param value string
function Response:add_header(name, value) end

---Appends strings to the body: `true`, or `nil, "connection closed"` / `nil, "stopping"`.
---@param ... string
---@return true|nil ok
---@return string? err
function Response:write(...) end

---Encodes with `http.json.encode`, sets `Content-Type: application/json` if unset, writes.
---@param value any
---@param status? integer
function Response:json(value, status) end

---`Location` and a 3xx status (302 by default).
---@param url string
---@param code? integer
function Response:redirect(url, code) end

---Sends what was written so far (the response becomes chunked).
---@return true|nil ok
---@return string? err
function Response:flush() end

---Trailer fields sent after the body.
---@param fields table<string, string|string[]>
function Response:trailers(fields) end

---A total deadline: this response must be done within `s` seconds.
---@param s number
function Response:set_write_timeout(s) end

---Sets a cookie.
---@param cookie { name: string, value: string, path?: string, domain?: string, max_age?: integer, expires?: number, secure?: boolean, http_only?: boolean, same_site?: string }
function Response:set_cookie(cookie) end

---Sends the head of a `text/event-stream` response.
---@return moonhttp.SSE
function Response:sse() end

---@class moonhttp.SSE
local SSE = {}

---One event, flushed at once: `true`, or `nil, "closed"`.
---@param event string|{ event?: string, data?: string, id?: string, retry?: integer }
---@return true|nil ok
---@return string? err
function SSE:send(event) end

---A `: text` line: a heartbeat for proxies.
---@param text? string
function SSE:comment(text) end

---`req:websocket` options (docs/guide/websocket.md).
---@class moonhttp.WebSocketOptions
---@field protocols? string[] the server's list, in preference order
---@field max_message? integer|string after reassembly (1m)
---@field max_frame? integer|string
---@field ping_interval? number
---@field idle_timeout? number
---@field close_timeout? number

---A WebSocket, server or client side (docs/guide/websocket.md).
---@class moonhttp.WebSocket
---@field protocol string? the chosen subprotocol
---@field state "open"|"closing"|"closed"
local WebSocket = {}

---The next message: `data, "text"|"binary"`, or `nil, "closed", code, reason`.
---@return string|nil data
---@return string kind_or_err
---@return integer? code
---@return string? reason
function WebSocket:receive() end

---One message: `true`, or `nil, "closed"`.
---@param data string
---@param kind? "text"|"binary"
---@return true|nil ok
---@return string? err
function WebSocket:send(data, kind) end

---A ping (≤ 125 bytes).
---@param data? string
function WebSocket:ping(data) end

---Starts the closing handshake.
---@param code? integer
---@param reason? string
function WebSocket:close(code, reason) end

---`fn(ws)` runs when a reload replaces the code serving this socket; `nil` removes it.
---@param fn? fun(ws: moonhttp.WebSocket)
function WebSocket:on_drain(fn) end

---True once a reload replaced the code serving this socket.
---@return boolean
function WebSocket:draining() end

---@class moonhttp.WebSocketClientOptions: moonhttp.WebSocketOptions
---@field headers? table<string, string>
---@field origin? string
---@field tls? table
---@field timeout? number

---@class moonhttp.Group
local Group = {}
---@param pattern string
---@param handler moonhttp.Handler
---@param opts? table
function Group:handle(pattern, handler, opts) end
---@param middleware function
function Group:use(middleware) end
---@param prefix string
---@return moonhttp.Group
function Group:group(prefix) end

---@class moonhttp.Thread
local Thread = {}
---@param timeout? number
---@return boolean ok
---@return any ...
function Thread:join(timeout) end
function Thread:kill() end

---@class moonhttp.Timer
local Timer = {}
---@return boolean pending
function Timer:cancel() end

---@class moonhttp.Channel
local Channel = {}
---@param msg string
function Channel:publish(msg) end
---@param opts? { queue?: integer }
---@return moonhttp.Subscription|nil sub
---@return string? err
function Channel:subscribe(opts) end
---@return string
function Channel:name() end

---A channel's subscription: what is published from now on, in order.
---@class moonhttp.Subscription
local Subscription = {}
---@param timeout? number
---@return string|nil msg
---@return string? err "missed", "gap", "timeout", "closed" or "stopping"
---@return integer? missed
function Subscription:receive(timeout) end
function Subscription:close() end

---A shared dict: `http.shared.<name>` (docs/guide/workers.md).
---@class moonhttp.SharedDict
local SharedDict = {}
---@param k string
---@return string|number|boolean|nil
function SharedDict:get(k) end
---@param k string
---@param v string|number|boolean|nil
---@param ttl? number|{ ttl?: number, owner?: "worker" }
---@return boolean|nil ok
---@return string|boolean|nil err_or_evicted
function SharedDict:set(k, v, ttl) end
---@param k string
---@param v string|number|boolean
---@param ttl? number
---@return boolean|nil ok
---@return string? err
function SharedDict:add(k, v, ttl) end
---@param k string
---@param v string|number|boolean
---@param ttl? number
---@return boolean|nil ok
---@return string? err
function SharedDict:replace(k, v, ttl) end
---@param k string
---@param n number
---@param init? number
---@param ttl? number
---@return number|nil value
---@return string? err
function SharedDict:incr(k, n, init, ttl) end
---@param k string
---@return boolean
function SharedDict:delete(k) end
---@param k string
---@return number|nil seconds
---@return string? err
function SharedDict:ttl(k) end
---@param k string
---@param ttl number
---@return boolean|nil ok
---@return string? err
function SharedDict:expire(k, ttl) end
---@param max? integer
---@return string[]
function SharedDict:keys(max) end
function SharedDict:flush_all() end
---@return integer bytes
function SharedDict:free_space() end

---@class moonhttp.Counter
local Counter = {}
---@param n? number
---@param values? table
---@return true|nil ok
---@return string? err
function Counter:inc(n, values) end

---@class moonhttp.Gauge
local Gauge = {}
---@param v number
---@param values? table
---@return true|nil ok
---@return string? err
function Gauge:set(v, values) end
---@param n? number
---@param values? table
---@return true|nil ok
---@return string? err
function Gauge:inc(n, values) end
---@param n? number
---@param values? table
---@return true|nil ok
---@return string? err
function Gauge:dec(n, values) end

---@class moonhttp.Histogram
local Histogram = {}
---@param v number
---@param values? table
---@return true|nil ok
---@return string? err
function Histogram:observe(v, values) end

---A TCP socket (docs/reference/sockets.md).
---@class moonhttp.Socket
local Socket = {}
---@param host string
---@param port integer
---@return true|nil ok
---@return string? err
function Socket:connect(host, port) end
---@param opts? table
---@return true|nil ok
---@return string? err
function Socket:tls_handshake(opts) end
---@param data string
---@return integer|nil sent
---@return string? err
function Socket:send(data) end
---@param pattern? integer|"l"|"a"
---@return string|nil data
---@return string? err
function Socket:receive(pattern) end
---@param max integer
---@return string|nil data
---@return string? err
function Socket:receiveany(max) end
---@param delim string
---@return string|nil data
---@return string? err
function Socket:receive_until(delim) end
---@param connect number
---@param send number
---@param read number
function Socket:settimeouts(connect, send, read) end
---@param seconds number
function Socket:setdeadline(seconds) end
---@param idle? number
---@param size? integer
function Socket:keepalive(idle, size) end
---@return boolean
function Socket:reused() end
---@return boolean
function Socket:tls_resumed() end
function Socket:close() end

---`http.fetch` options (docs/reference/client.md, fetch.md).
---@class moonhttp.FetchOptions
---@field method? string
---@field headers? table<string, string|string[]>
---@field body? string|function
---@field timeout? number
---@field connect_timeout? number
---@field send_timeout? number
---@field read_timeout? number
---@field tls? table

---@class moonhttp.ClientOptions: moonhttp.FetchOptions
---@field pool_size? integer

---@class moonhttp.ProxyOptions
---@field headers? table
---@field keep_host? boolean
---@field keep_path? boolean
---@field pool? table
---@field pool_size? integer

---@class moonhttp.UpstreamOptions
---@field servers (string|table)[]
---@field balance? string
---@field max_fails? integer
---@field fail_timeout? number
---@field health? table
---@field retries? integer
---@field keepalive? integer
---@field shared? string

---@class moonhttp.Upstream
local Upstream = {}
---@param path string
---@param opts? moonhttp.FetchOptions
---@return moonhttp.FetchResponse|nil resp
---@return string? err
function Upstream:fetch(path, opts) end
---The base URL of the server the group would send `req` to now.
---@param req? moonhttp.Request
---@return string|nil url
---@return string? err
function Upstream:url(req) end

---@class moonhttp.FetchResponse
---@field status integer
local FetchResponse = {}
---@return string|nil body
---@return string? err
function FetchResponse:body() end
---@param n? integer
---@return string|nil chunk
---@return string? err
function FetchResponse:read(n) end
---@param name string
---@return string?
function FetchResponse:header(name) end
---@return table<string, string[]>
function FetchResponse:headers() end
---@return string[]
function FetchResponse:header_list() end
---@return table?
function FetchResponse:trailers() end
function FetchResponse:close() end

---@class moonhttp.Client
local Client = {}
---@param url string
---@param opts? moonhttp.FetchOptions
---@return moonhttp.FetchResponse|nil resp
---@return string? err
function Client:fetch(url, opts) end
---@return table
function Client:stats() end
function Client:close() end

---`http.relay_upgrade` options (docs/reference/websocket-proxy.md).
---@class moonhttp.RelayOptions
---@field connect_timeout? number connecting and TLS (10 s)
---@field read_timeout? number sending the head and reading the upstream's answer (60 s)
---@field idle_timeout? number no byte in either direction for this long closes both (60 s)
---@field headers? table<string, string> added to the upstream request
---@field keep_host? boolean send the client's `Host`
---@field keep_path? boolean send the client's path
---@field tls? boolean|table as `sock:connect`'s `tls`
---@field max_buffer? integer|string client bytes read and not yet written upstream (64k)
---@field via? string adds `Via: <proto> <via>`
---@field response? fun(head: table, req: moonhttp.Request) rewrites the upstream's answer
