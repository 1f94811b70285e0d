-- Every status code Go's net/http StatusText knows goes out with its reason
-- phrase (416 was "416 Unknown"). The rows are Go's list, with RFC 9110's
-- newer names where it renamed a code; when Go's source is installed
-- (golang-go), the spec also checks that the rows cover all of Go's codes.
local H = require "helper"

local ROWS = {
  { 100, "Continue" }, { 101, "Switching Protocols" }, { 102, "Processing" }, { 103, "Early Hints" },
  { 200, "OK" }, { 201, "Created" }, { 202, "Accepted" }, { 203, "Non-Authoritative Information" },
  { 204, "No Content" }, { 205, "Reset Content" }, { 206, "Partial Content" }, { 207, "Multi-Status" },
  { 208, "Already Reported" }, { 226, "IM Used" },
  { 300, "Multiple Choices" }, { 301, "Moved Permanently" }, { 302, "Found" }, { 303, "See Other" },
  { 304, "Not Modified" }, { 305, "Use Proxy" }, { 307, "Temporary Redirect" }, { 308, "Permanent Redirect" },
  { 400, "Bad Request" }, { 401, "Unauthorized" }, { 402, "Payment Required" }, { 403, "Forbidden" },
  { 404, "Not Found" }, { 405, "Method Not Allowed" }, { 406, "Not Acceptable" },
  { 407, "Proxy Authentication Required" }, { 408, "Request Timeout" }, { 409, "Conflict" },
  { 410, "Gone" }, { 411, "Length Required" }, { 412, "Precondition Failed" },
  { 413, "Content Too Large", go = "Request Entity Too Large" },
  { 414, "URI Too Long", go = "Request URI Too Long" },
  { 415, "Unsupported Media Type" },
  { 416, "Range Not Satisfiable", go = "Requested Range Not Satisfiable" },
  { 417, "Expectation Failed" }, { 418, "I'm a teapot" }, { 421, "Misdirected Request" },
  { 422, "Unprocessable Content", go = "Unprocessable Entity" },
  { 423, "Locked" }, { 424, "Failed Dependency" }, { 425, "Too Early" }, { 426, "Upgrade Required" },
  { 428, "Precondition Required" }, { 429, "Too Many Requests" },
  { 431, "Request Header Fields Too Large" }, { 451, "Unavailable For Legal Reasons" },
  { 500, "Internal Server Error" }, { 501, "Not Implemented" }, { 502, "Bad Gateway" },
  { 503, "Service Unavailable" }, { 504, "Gateway Timeout" }, { 505, "HTTP Version Not Supported" },
  { 506, "Variant Also Negotiates" }, { 507, "Insufficient Storage" }, { 508, "Loop Detected" },
  { 510, "Not Extended" }, { 511, "Network Authentication Required" },
}

-- Go's StatusText as {code = text}, read from its source, or nil.
local function go_status_texts()
  local p = io.popen("go env GOROOT 2>/dev/null")
  local root = p and p:read("l")
  if p then p:close() end
  local src = root and H.read_file(root .. "/src/net/http/status.go")
  if not src then return nil end
  local codes, texts = {}, {}
  for name, code in src:gmatch("\n%s*(Status%w+)%s*=%s*(%d+)") do codes[name] = tonumber(code) end
  for name, text in src:gmatch('case (Status%w+):%s*return "([^"]*)"') do
    texts[codes[name]] = text
  end
  return texts
end

describe("status reason phrases", function()
  local srv
  setup(function()
    srv = H.start([[
local http = require "moonhttp"
http.handle("GET /status/{code}", function(req, res) res:status(tonumber(req:pathvalue("code"))) end)
]])
  end)
  teardown(function() srv:stop() end)

  it("covers every code Go's net/http knows", function()
    local go = go_status_texts()
    if not go then
      pending("Go's source is not installed (golang-go): checked against the rows only")
      return
    end
    local ours = {}
    for _, r in ipairs(ROWS) do ours[r[1]] = r.go or r[2] end
    local n = 0
    for code, text in pairs(go) do
      n = n + 1
      assert.equal(text, ours[code], "code " .. code)
    end
    assert.is_true(n >= 60, "parsed only " .. n .. " codes from Go's status.go")
  end)

  for _, r in ipairs(ROWS) do
    if r[1] >= 200 then -- 1xx are interim: the server sends them itself
      it(r[1] .. " " .. r[2], function()
        local res = assert(srv:get("/status/" .. r[1]))
        assert.equal(r[1], res.status)
        assert.equal(r[2], res.reason)
      end)
    end
  end

  it("calls a code without a phrase Unknown", function()
    local res = assert(srv:get("/status/599"))
    assert.same({ 599, "Unknown" }, { res.status, res.reason })
  end)
end)
