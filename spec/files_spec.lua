-- Static files through the real binary: http.files() mounted with
-- http.handle, every rule of the handler, and traversal attempts written as
-- data rows (raw request bytes in, status out).
local H = require "helper"
local O = require "ops_helper"

local function sh(cmd)
  assert(os.execute(cmd), "command failed: " .. cmd)
end

-- A site in a fresh directory: app.lua beside public/ (http.files paths are
-- relative to the script's directory) and a file outside the root.
local function make_site(app_source)
  local dir = H.tmpname("-site")
  sh("mkdir -p " .. dir .. "/public/sub " .. dir .. "/public/empty " .. dir .. "/public/.hidden")
  local p = dir .. "/public/"
  H.write_file(dir .. "/outside.txt", "outside the root\n")
  H.write_file(p .. "hello.txt", "hello, world\n")
  H.write_file(p .. "index.html", "<h1>home</h1>\n")
  H.write_file(p .. "sub/index.html", "<h1>sub</h1>\n")
  H.write_file(p .. ".secret", "secret\n")
  H.write_file(p .. ".hidden/x.txt", "hidden\n")
  H.write_file(p .. "secret.txt", "no one may read this\n")
  H.write_file(p .. "app.js", string.rep("console.log('moonhttp');\n", 80))
  sh("gzip -kn9 " .. p .. "app.js")
  H.write_file(p .. "app.js.br", "BROTLI-BYTES")
  H.write_file(p .. "only.txt", "identity only\n")
  local parts = {}
  for i = 1, 200 * 1024 / 16 do parts[i] = string.format("%015d\n", i) end
  H.write_file(p .. "big.bin", table.concat(parts))
  sh("ln -s hello.txt " .. p .. "link_in")
  sh("ln -s ../outside.txt " .. p .. "link_out")
  sh("ln -s /etc/passwd " .. p .. "link_abs")
  sh("ln -s ../.. " .. p .. "sub/up2")
  sh("mkfifo " .. p .. "fifo")
  sh("chmod 000 " .. p .. "secret.txt")
  H.write_file(dir .. "/app.lua", app_source)
  return dir
end

local APP = [[
local http = require "moonhttp"
http.handle("GET /static/", http.files("public", {
  index = "index.html", max_age = 3600, precompressed = true, dotfiles = false }))
http.handle("GET /dot/", http.files("public", { dotfiles = true }))
http.handle("GET /plain/", http.files("public"))
http.handle("GET /hello", function(req, res) res:write("hi") end)
]]

describe("static files", function()
  local dir, srv
  setup(function()
    dir = make_site(APP)
    srv = H.start(dir .. "/app.lua")
  end)
  teardown(function()
    if srv then srv:stop() end
    os.execute("rm -rf " .. dir)
  end)

  local function raw(bytes)
    local c = srv:connect()
    assert(c:send(bytes))
    local res = c:read_response({ head = bytes:match("^HEAD") ~= nil })
    c:close()
    return res
  end

  -- { name, request line target, status, body pattern (optional) }
  local rows = {
    { "a file", "/static/hello.txt", 200, "^hello, world\n$" },
    { "the mount point serves its index", "/static/", 200, "home" },
    { "a directory with a slash serves its index", "/static/sub/", 200, "sub" },
    { "a directory without a slash redirects", "/static/sub", 301 },
    { "a directory without an index: no listing", "/static/empty/", 404 },
    { "a query is ignored", "/static/hello.txt?v=1", 200, "hello" },
    { "missing", "/static/missing.txt", 404 },
    { "a file used as a directory", "/static/hello.txt/", 404 },
    { "a symlink inside the root", "/static/link_in", 200, "hello" },
    { "a FIFO is not served (and does not block)", "/static/fifo", 404 },
    { "percent-encoded name", "/static/hell%6f.txt", 200, "hello" },
    -- traversal and hiding
    { "raw .. is cleaned by the router first", "/static/../outside.txt", 307 },
    { "encoded %2e%2e", "/static/%2e%2e/outside.txt", 400 },
    { "encoded %2E%2E", "/static/%2E%2E/outside.txt", 400 },
    { "mixed .%2e", "/static/.%2e/outside.txt", 400 },
    { "encoded slash %2f", "/static/..%2foutside.txt", 400 },
    { "encoded slash in a name", "/static/sub%2findex.html", 400 },
    { "double-encoded %252e%252e stays a name", "/static/%252e%252e/outside.txt", 404 },
    { "NUL byte", "/static/hello.txt%00.html", 400 },
    { "malformed escape", "/static/hello%zz", 400 },
    { "symlink pointing out of the root", "/static/link_out", 404 },
    { "absolute symlink", "/static/link_abs", 404 },
    { "symlink to ../.. inside a subdirectory", "/static/sub/up2/outside.txt", 404 },
    { "dotfile", "/static/.secret", 404 },
    { "encoded dotfile", "/static/%2esecret", 404 },
    { "file in a dot directory", "/static/.hidden/x.txt", 404 },
    { "dotfiles = true serves it", "/dot/.secret", 200, "secret" },
    { "dotfiles = true still refuses %2e%2e", "/dot/%2e%2e/outside.txt", 400 },
    { "no index option: directory is 404", "/plain/sub/", 404 },
  }
  for _, row in ipairs(rows) do
    it(row[1] .. " (" .. row[2] .. " -> " .. row[3] .. ")", function()
      local res = raw("GET " .. row[2] .. " HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
      assert.are.equal(row[3], res.status)
      if row[4] then assert.truthy(res.body:find(row[4]), res.body) end
      assert.falsy(res.body:find("outside the root", 1, true))
      assert.falsy(res.body:find("root:", 1, true))
    end)
  end

  it("redirects a directory to its slash form, keeping the query", function()
    local res = srv:get("/static/sub?x=1")
    assert.are.equal(301, res.status)
    assert.are.equal("/static/sub/?x=1", res.headers["location"])
  end)

  it("sends type, length, validators and caching headers", function()
    local res = srv:get("/static/hello.txt")
    assert.are.equal("text/plain; charset=utf-8", res.headers["content-type"])
    assert.are.equal("13", res.headers["content-length"])
    assert.truthy(res.headers["etag"]:match('^"[%x%-]+"$'))
    assert.truthy(res.headers["last-modified"]:match("^%a%a%a, %d%d %a%a%a %d%d%d%d %d%d:%d%d:%d%d GMT$"))
    assert.are.equal("max-age=3600", res.headers["cache-control"])
    assert.are.equal("bytes", res.headers["accept-ranges"])
    assert.are.equal("text/html; charset=utf-8", srv:get("/static/").headers["content-type"])
    assert.are.equal("text/javascript; charset=utf-8",
      srv:get("/static/app.js", { ["Accept-Encoding"] = "identity" }).headers["content-type"])
    assert.is_nil(srv:get("/plain/hello.txt").headers["cache-control"])
  end)

  it("answers HEAD with the head only", function()
    local res = srv:request("HEAD", "/static/hello.txt")
    assert.are.equal(200, res.status)
    assert.are.equal("13", res.headers["content-length"])
    assert.are.equal("", res.body)
    -- nothing follows the head on the connection
    local c = srv:connect()
    assert(c:send("HEAD /static/big.bin HTTP/1.1\r\nHost: a\r\n\r\nGET /static/hello.txt HTTP/1.1\r\nHost: a\r\n\r\n"))
    local r1 = c:read_response({ head = true })
    assert.are.equal(tostring(200 * 1024), r1.headers["content-length"])
    local r2 = c:read_response()
    assert.are.equal("hello, world\n", r2.body)
    c:close()
  end)

  it("revalidates with If-None-Match and If-Modified-Since (304)", function()
    local first = srv:get("/static/hello.txt")
    local etag, lm = first.headers["etag"], first.headers["last-modified"]
    local r = srv:get("/static/hello.txt", { ["If-None-Match"] = etag })
    assert.are.equal(304, r.status)
    assert.are.equal(etag, r.headers["etag"])
    assert.are.equal("", r.body)
    assert.are.equal(304, srv:get("/static/hello.txt", { ["If-None-Match"] = '"x", W/' .. etag }).status)
    assert.are.equal(200, srv:get("/static/hello.txt", { ["If-None-Match"] = '"other"' }).status)
    assert.are.equal(304, srv:get("/static/hello.txt", { ["If-Modified-Since"] = lm }).status)
    assert.are.equal(200, srv:get("/static/hello.txt",
      { ["If-Modified-Since"] = "Thu, 01 Jan 1970 00:00:00 GMT" }).status)
    -- If-None-Match decides alone
    assert.are.equal(200, srv:get("/static/hello.txt",
      { ["If-None-Match"] = '"other"', ["If-Modified-Since"] = lm }).status)
  end)

  it("serves ranges (206), suffixes, 416, and If-Range", function()
    local r = srv:get("/static/hello.txt", { Range = "bytes=0-4" })
    assert.are.equal(206, r.status)
    assert.are.equal("hello", r.body)
    assert.are.equal("bytes 0-4/13", r.headers["content-range"])
    r = srv:get("/static/hello.txt", { Range = "bytes=-6" })
    assert.are.equal("world\n", r.body)
    r = srv:get("/static/hello.txt", { Range = "bytes=100-" })
    assert.are.equal(416, r.status)
    assert.are.equal("bytes */13", r.headers["content-range"])
    r = srv:get("/static/hello.txt", { Range = "bytes=5-1" }) -- malformed: whole file
    assert.are.equal(200, r.status)
    assert.are.equal("hello, world\n", r.body)
    local etag = r.headers["etag"]
    r = srv:get("/static/hello.txt", { Range = "bytes=7-11", ["If-Range"] = etag })
    assert.are.equal(206, r.status)
    assert.are.equal("world", r.body)
    r = srv:get("/static/hello.txt", { Range = "bytes=7-11", ["If-Range"] = '"stale"' })
    assert.are.equal(200, r.status)
    assert.are.equal("hello, world\n", r.body)
    assert.are.equal(200, srv:request("HEAD", "/static/hello.txt", { Range = "bytes=0-1" }).status)
  end)

  it("sends several ranges as one multipart/byteranges body", function()
    local r = srv:get("/static/hello.txt", { Range = "bytes=7-11,0-1,1-3" })
    assert.are.equal(206, r.status)
    local boundary = r.headers["content-type"]:match("^multipart/byteranges; boundary=(%S+)$")
    assert.truthy(boundary)
    assert.are.equal(tonumber(r.headers["content-length"]), #r.body)
    local want = "--" .. boundary .. "\r\nContent-Type: text/plain; charset=utf-8\r\n"
      .. "Content-Range: bytes 0-3/13\r\n\r\nhell\r\n--" .. boundary
      .. "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Range: bytes 7-11/13\r\n\r\nworld\r\n--"
      .. boundary .. "--\r\n"
    assert.are.equal(want, r.body)
  end)

  it("sends a large file whole and in ranges, several times on one connection", function()
    local want = H.read_file(dir .. "/public/big.bin")
    local c = srv:connect()
    for _ = 1, 3 do
      assert(c:send("GET /static/big.bin HTTP/1.1\r\nHost: a\r\n\r\n"
        .. "GET /static/big.bin HTTP/1.1\r\nHost: a\r\nRange: bytes=100000-100099\r\n\r\n"))
      local r = c:read_response()
      assert.are.equal(200, r.status)
      assert.are.equal(#want, #r.body)
      assert.is_true(r.body == want)
      r = c:read_response()
      assert.are.equal(206, r.status)
      assert.are.equal(want:sub(100001, 100100), r.body)
    end
    c:close()
  end)

  it("chooses a precompressed sibling by Accept-Encoding, with Vary", function()
    local gz = H.read_file(dir .. "/public/app.js.gz")
    local r = srv:get("/static/app.js", { ["Accept-Encoding"] = "gzip" })
    assert.are.equal("gzip", r.headers["content-encoding"])
    assert.are.equal("Accept-Encoding", r.headers["vary"])
    assert.are.equal("text/javascript; charset=utf-8", r.headers["content-type"])
    assert.is_true(r.body == gz)
    r = srv:get("/static/app.js", { ["Accept-Encoding"] = "gzip, br" })
    assert.are.equal("br", r.headers["content-encoding"])
    assert.are.equal("BROTLI-BYTES", r.body)
    r = srv:get("/static/app.js", { ["Accept-Encoding"] = "br;q=0.5, gzip" })
    assert.are.equal("gzip", r.headers["content-encoding"])
    r = srv:get("/static/app.js", { ["Accept-Encoding"] = "gzip;q=0, br;q=0" })
    assert.is_nil(r.headers["content-encoding"])
    assert.are.equal(H.read_file(dir .. "/public/app.js"), r.body)
    r = srv:get("/static/app.js")
    assert.is_nil(r.headers["content-encoding"])
    -- the sibling has its own validators: its ETag revalidates the gzip variant only
    local g = srv:get("/static/app.js", { ["Accept-Encoding"] = "gzip" })
    local i = srv:get("/static/app.js", { ["Accept-Encoding"] = "identity" })
    assert.are_not.equal(g.headers["etag"], i.headers["etag"])
    -- precompressed off: siblings are ordinary files
    r = srv:get("/plain/app.js", { ["Accept-Encoding"] = "gzip" })
    assert.is_nil(r.headers["content-encoding"])
    assert.are.equal(200, srv:get("/plain/app.js.gz").status)
  end)

  it("sees a changed file after the short cache TTL", function()
    local path = dir .. "/public/only.txt"
    assert.are.equal("identity only\n", srv:get("/static/only.txt").body)
    -- each change is seen within 1.3 s (the TTL and a margin), asked every 50 ms
    local function seen(want_status, want_body)
      local r
      O.wait_for(function()
        r = srv:get("/static/only.txt")
        return r.status == want_status and (not want_body or r.body == want_body)
      end, 1.3, 0.05)
      return r
    end
    H.write_file(path, "changed, and longer than before\n")
    assert.are.equal("changed, and longer than before\n", seen(200, "changed, and longer than before\n").body)
    os.remove(path)
    assert.are.equal(404, seen(404).status)
    H.write_file(path, "back\n")
    assert.are.equal("back\n", seen(200, "back\n").body)
  end)

  -- issue 30: the response is cut (Content-Length cannot be kept) and the
  -- operator is told which file and how far it got.
  it("logs a file that shrinks while it is being sent, with its path and the bytes sent", function()
    local name = dir .. "/public/shrinks.bin"
    sh("truncate -s 64M " .. name)
    local c = srv:connect()
    assert(c:send("GET /plain/shrinks.bin HTTP/1.1\r\nHost: a\r\n\r\n"))
    local status = assert(c:read_line())
    assert.equal("HTTP/1.1 200 OK", status)
    assert(c:read_bytes(4096)) -- the body has started; the socket buffers fill and the server waits
    sh("truncate -s 1M " .. name)
    local got = #(c:read_all() or "")
    c:close()
    assert.is_true(got < 64 * 1024 * 1024, "the whole promised body came")
    local log
    for _ = 1, 50 do
      log = srv:logtext()
      if log:find("shrank while being sent", 1, true) then break end
      require("socket").sleep(0.05)
    end
    assert.truthy(log:find("file " .. name:gsub("%p", "%%%0") .. " shrank while being sent: it ended at byte %d+, %d+ bytes short"), log)
  end)

  it("keeps Lua routes working beside the files", function()
    assert.are.equal("hi", srv:get("/hello").body)
    assert.are.equal(405, srv:request("POST", "/static/hello.txt", nil, "x").status)
  end)
end)

describe("static files: errors at load time", function()
  it("rejects a missing directory and bad options when the script loads", function()
    local dir = make_site("")
    local cases = {
      { 'http.handle("GET /s/", http.files("nope"))', "nope" },
      { 'http.handle("GET /s/", http.files("public", { index = 1 }))', "index" },
      { 'http.handle("GET /s/", http.files("public", { bogus = true }))', "bogus" },
      { 'http.handle("GET /s/", http.files("public", { max_age = -5 }))', "max_age" },
      { 'http.handle("GET /s/", http.files("public/hello.txt"))', "hello.txt" },
    }
    for _, c in ipairs(cases) do
      H.write_file(dir .. "/app.lua", 'local http = require "moonhttp"\n' .. c[1] .. "\n")
      local code, out = H.run({ "--check", dir .. "/app.lua" })
      assert.are_not.equal(0, code)
      assert.truthy(out:find(c[2], 1, true), out)
    end
    os.execute("rm -rf " .. dir)
  end)
end)

describe("static files: unreadable", function()
  it("answers 403 for a file the server may not read", function()
    local dir = make_site(APP)
    local env = ""
    local uid = io.popen("id -u"):read("l")
    if uid == "0" then
      -- root reads anything: run the server as nobody so the mode bits count
      sh("chmod -R a+rX " .. dir .. " && chmod 000 " .. dir .. "/public/secret.txt")
      env = "setpriv --reuid=65534 --regid=65534 --clear-groups"
    end
    local srv = H.start(dir .. "/app.lua", { env = env })
    local r = srv:get("/static/secret.txt")
    srv:stop()
    os.execute("rm -rf " .. dir)
    assert.are.equal(403, r.status)
  end)
end)
