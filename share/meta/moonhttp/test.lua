---@meta moonhttp.test
-- lua-language-server annotations for `require "moonhttp.test"` (docs/reference/test.md).

local test = {}

---TLS client options for an app's https listeners.
---@class moonhttp.TestTLS
---@field ca? string CA file (PEM) the server's certificate is verified against
---@field verify? boolean default: true when ca is given
---@field cert? string client certificate (PEM)
---@field key? string its key (PEM)
---@field server_name? string SNI name and Host header name

---The options of test.start and of a request (docs/reference/test.md).
---@class moonhttp.TestOptions
---@field bin? string the binary (test.start)
---@field tls? moonhttp.TestTLS
---@field listener? integer which listener of the app's listen list (requests; default 1)
---@field headers? table<string, string> request headers
---@field timeout? number seconds (requests; default 10)
---@field protocols? string[] WebSocket subprotocols to offer (app:websocket)

---Starts the app with the binary: its own listen list on free ports, one worker.
---@param script string
---@param settings? moonhttp.Settings
---@param opts? moonhttp.TestOptions
---@return moonhttp.TestApp
function test.start(script, settings, opts) end

---@class moonhttp.TestListener
---@field tls boolean
---@field host string
---@field port integer
---@field url string

---@class moonhttp.TestApp
---@field listeners moonhttp.TestListener[] in the order of the app's listen list
---@field port integer the first listener's port
---@field metrics_port? integer
local App = {}
---@param path string
---@param opts? moonhttp.TestOptions
---@return integer status
---@return table<string, string|string[]> headers
---@return string body
function App:get(path, opts) end
---@param path string
---@param body? string
---@param opts? moonhttp.TestOptions
---@return integer status
---@return table<string, string|string[]> headers
---@return string body
function App:post(path, body, opts) end
---@param method string
---@param path string
---@param body? string
---@param opts? moonhttp.TestOptions
---@return integer status
---@return table<string, string|string[]> headers
---@return string body
function App:request(method, path, body, opts) end
---A WebSocket, or nil and the answer when the server did not switch.
---@param path string
---@param opts? moonhttp.TestOptions
---@return table|nil ws ws:send(data [, "binary"]), ws:receive(), ws:close([code, reason])
---@return table|integer headers_or_status
function App:websocket(path, opts) end
---The server's log so far.
---@return string
function App:logtext() end
---Stops the server (SIGTERM, then SIGKILL after 10 s).
function App:stop() end

return test
