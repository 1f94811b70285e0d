---@meta moonhttp.test
-- lua-language-server annotations for `require "moonhttp.test"` (docs/reference/test.md).

local test = {}

---Starts the app with the binary on a free port.
---@param script string
---@param settings? moonhttp.Settings
---@param opts? { bin?: string }
---@return moonhttp.TestApp
function test.start(script, settings, opts) end

---@class moonhttp.TestApp
local App = {}
---@param path string
---@param headers? table<string, string>
---@return { status: integer, headers: table, body: string }
function App:get(path, headers) end
---@param path string
---@param body string
---@param headers? table<string, string>
---@return { status: integer, headers: table, body: string }
function App:post(path, body, headers) end
---@param method string
---@param path string
---@param opts? table
---@return { status: integer, headers: table, body: string }
function App:request(method, path, opts) end
---@param path string
---@param opts? table
---@return moonhttp.WebSocket|nil ws
---@return string? err
function App:websocket(path, opts) end
---The server's log so far.
---@return string
function App:logtext() end
function App:stop() end

return test
