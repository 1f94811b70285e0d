---@meta moonhttp
-- lua-language-server annotations for `require "moonhttp"` (docs/reference/http.md).
-- Not a module: only an editor reads this (see docs/guide/editor.md), and
-- spec/annotations_spec.lua checks it names exactly the binary's functions.

---@class moonhttp
local http = {}

---The settings of `http.server{...}` (docs/reference/settings.md); command-line flags win.
---@param settings moonhttp.Settings
function http.server(settings) end

---A route: Go 1.22 `ServeMux` patterns such as `"GET /users/{id}"`.
---@param pattern string
---@param handler moonhttp.Handler
---@param opts? { max_body?: integer|string }
function http.handle(pattern, handler, opts) end

---Wraps every route and the 404/405 answers.
---@param middleware fun(req: moonhttp.Request, res: moonhttp.Response, next: fun())
function http.use(middleware) end

---A sub-tree of routes under `prefix`.
---@param prefix string
---@return moonhttp.Group
function http.group(prefix) end

---The custom 404 answer.
---@param handler moonhttp.Handler
function http.not_found(handler) end

---The custom 405 answer.
---@param handler moonhttp.Handler
function http.method_not_allowed(handler) end

---`handler(req, res, err)` answers a handler's uncaught error.
---@param handler fun(req: moonhttp.Request, res: moonhttp.Response, err: any)
function http.on_error(handler) end

---A C handler serving a folder: ranges, precompressed files.
---@param dir string
---@param opts? table
---@return moonhttp.Handler
function http.files(dir, opts) end

---The Prometheus text on a route.
---@return moonhttp.Handler
function http.metrics_handler() end

---A readiness route.
---@param opts? { check?: fun(): boolean, string? }
---@return moonhttp.Handler
function http.health_handler(opts) end

---Sleeps without blocking other requests: `true`, or `nil, "stopping"`.
---@param seconds number
---@return true|nil ok
---@return string? err
function http.sleep(seconds) end

---A light thread running `fn(...)`.
---@param fn function
---@param ... any
---@return moonhttp.Thread
function http.spawn(fn, ...) end

---Runs `fn(...)` as a task after `delay` seconds.
---@param delay number
---@param fn function
---@param ... any
---@return moonhttp.Timer
function http.timer(delay, fn, ...) end

---Runs `fn(...)` every `interval` seconds; `{ once = true }` in one worker, `{ once = "cluster" }` in one worker of the cluster.
---@param interval number
---@param fn function
---@param opts? { once?: boolean|"cluster" }
---@param ... any
---@return moonhttp.Timer
function http.every(interval, fn, opts, ...) end

---Work when the workers start and after each reload.
---@param fn function
---@param opts? { once?: boolean|"cluster" }
function http.on_start(fn, opts) end

---@class moonhttp.WorkerExit
---@field worker integer the dead worker's `http.worker_id()`
---@field pid integer its process id
---@field reason string `killed by signal 9`, `exit status 3`, `killed: stalled`

---While the script loads: when a worker dies, one surviving worker runs fn once (docs/guide/operations.md).
---@param fn fun(info: moonhttp.WorkerExit)
function http.on_worker_exit(fn) end

---A TCP socket (docs/reference/sockets.md).
---@return moonhttp.Socket
function http.tcp() end

---An outbound request: a response, or `nil, err` (docs/reference/client.md).
---@param url string
---@param opts? moonhttp.FetchOptions
---@return moonhttp.FetchResponse|nil resp
---@return string? err
function http.fetch(url, opts) end

---A client with its own pool and defaults.
---@param opts? moonhttp.ClientOptions
---@return moonhttp.Client
function http.client(opts) end

---The default client's counters.
---@return table
function http.client_stats() end

---A reverse proxy: forwards the request to `target` and streams the response back.
---@param req moonhttp.Request
---@param res moonhttp.Response
---@param target string|moonhttp.Upstream
---@param opts? moonhttp.ProxyOptions
---@return true|nil ok
---@return string? err
function http.proxy(req, res, target, opts) end

---Passes a WebSocket (or any 101 upgrade) through to `url`.
---@param req moonhttp.Request
---@param res moonhttp.Response
---@param url string
---@param opts? moonhttp.RelayOptions
---@return true|nil ok
---@return string? err
function http.relay_upgrade(req, res, url, opts) end

---An upstream group: a target for `http.proxy` and `group:fetch`.
---@param opts moonhttp.UpstreamOptions
---@return moonhttp.Upstream
function http.upstream(opts) end

---A WebSocket client (docs/reference/websocket-client.md).
---@param url string
---@param opts? moonhttp.WebSocketClientOptions
---@return moonhttp.WebSocket|nil ws
---@return string? err
function http.websocket(url, opts) end

---A channel across workers.
---@param name string
---@return moonhttp.Channel
function http.channel(name) end

---The loop's cached Unix time.
---@return number
function http.now() end

---A fresh monotonic reading, for durations.
---@return number
function http.clock() end

---True once a stop began, and in code a reload replaced.
---@return boolean
function http.stopping() end

---True in code a reload replaced while its WebSockets and streams drain.
---@return boolean
function http.draining() end

---The worker's slot, 1..`workers`; `nil` while the script loads.
---@return integer?
function http.worker_id() end

---To the error log, the values' `tostring`s joined with nothing between.
---@param level "error"|"warn"|"info"|"debug"
---@param ... any
function http.log(level, ...) end

---The shared dicts declared with `http.server{ shared = {...} }`.
---@type table<string, moonhttp.SharedDict>
http.shared = {}

http.acme = {}

---Each listener with `tls = { acme = {...} }`: its certificate's state (docs/reference/acme.md).
---@return { listener: integer, names: string[], not_after?: integer, failures: integer, last_error?: string, next_attempt?: integer }[]
function http.acme.status() end

http.cluster = {}

---The live instances of this server's cluster, sorted by `id`, or `nil, err`.
---@return { id: string, host: string, pid: integer, started: number, expires: number }[]|nil
---@return string? err
function http.cluster.instances() end

http.metrics = {}

---A counter of the app, summed across workers.
---@param name string
---@param help string
---@param labels? string[]
---@param opts? table
---@return moonhttp.Counter
function http.metrics.counter(name, help, labels, opts) end

---A gauge of the app.
---@param name string
---@param help string
---@param labels? string[]
---@param opts? table
---@return moonhttp.Gauge
function http.metrics.gauge(name, help, labels, opts) end

---A histogram of the app.
---@param name string
---@param help string
---@param labels? string[]
---@param buckets number[]
---@return moonhttp.Histogram
function http.metrics.histogram(name, help, labels, buckets) end

http.json = {}

---@param v any
---@return string
function http.json.encode(v) end

---@param s string
---@return any value
---@return string? err
function http.json.decode(s) end

---Marks `t` (or a new table of `n` slots) as a JSON array, so `{}` encodes as `[]`.
---@param t? table|integer
---@return table
function http.json.array(t) end

http.html = {}

---HTML text escaping.
---@param v any
---@return string
function http.html.escape(v) end

http.base64 = {}

---@param s string
---@return string
function http.base64.encode(s) end

---@param s string
---@return string|nil
function http.base64.decode(s) end

---@param s string
---@return string
function http.base64.encode_url(s) end

---@param s string
---@return string|nil
function http.base64.decode_url(s) end

http.hex = {}

---@param s string
---@return string
function http.hex.encode(s) end

---@param s string
---@return string|nil
function http.hex.decode(s) end

http.crypto = {}

---@param s string
---@return string digest 32 raw bytes
function http.crypto.sha256(s) end

---@param key string
---@param s string
---@return string mac 32 raw bytes
function http.crypto.hmac_sha256(key, s) end

---@param n integer
---@return string bytes
function http.crypto.random(n) end

---Constant-time comparison.
---@param a string
---@param b string
---@return boolean
function http.crypto.equal(a, b) end

---Argon2id, on the thread pool.
---@param pw string
---@param opts? table
---@return string|nil hash
---@return string? err
function http.crypto.password_hash(pw, opts) end

---@param pw string
---@param hash string
---@return boolean
function http.crypto.password_verify(pw, hash) end

---@param hash string
---@param opts? table
---@return boolean
function http.crypto.needs_rehash(hash, opts) end

---@param claims table
---@param key string
---@param alg string
---@return string token
function http.crypto.jwt_sign(claims, key, alg) end

---@param token string
---@param key string
---@param opts table
---@return table|nil claims
---@return string? err
function http.crypto.jwt_verify(token, key, opts) end

return http
