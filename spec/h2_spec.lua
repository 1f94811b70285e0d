-- HTTP/2 (issue 16) through the real binary: curl over h2c with prior
-- knowledge and over TLS with ALPN, nghttp for many streams at once, and raw
-- frames (spec/h2_frames.py, Debian's python3-hyperframe + python3-hpack)
-- for the malformed requests and the floods.
local H = require "helper"
local certs = require "helpers.certs"

local q, sh = H.shell_quote, H.sh
local PY = "/usr/bin/python3"
local FRAMES = debug.getinfo(1, "S").source:sub(2):gsub("h2_spec%.lua$", "h2_frames.py")

local APP = [[
local http = require "moonhttp"
http.server{ max_body_bytes = 100000, max_header_bytes = 4096, 
  read_header_timeout = 1, send_timeout = 1, idle_timeout = 2, compress = { min_bytes = 100 }, %s }
local progress = 0
http.handle("GET /hello", function(req, res) res:write("hello") end)
http.handle("GET /ws", function(req, res)
  local ws = req:websocket{ protocols = { "chat" } }
  if not ws then return end -- the 400 or 426 is staged
  while true do
    local msg, kind = ws:receive()
    if not msg then break end
    ws:send(msg .. (kind == "text" and " (" .. ws.protocol .. ")" or ""), kind)
  end
end)
http.handle("GET /cookie", function(req, res) res:write(tostring(req:header("cookie"))) end)
http.handle("GET /host", function(req, res) res:write(req.proto .. " " .. tostring(req:header("host"))) end)
http.handle("POST /echo", function(req, res) res:write(req:body() or "") end)
http.handle("POST /ignore", function(req, res) res:write("ignored") end)
http.handle("POST /stream", function(req, res)
  local n = 0
  while true do
    local c = req:read()
    if not c then break end
    n = n + #c
  end
  res:write(n)
end)
http.handle("GET /slow", function(req, res) http.sleep(0.5); res:write("slow") end)
http.handle("GET /stream_out", function(req, res)
  for i = 1, 5 do res:write(string.rep(tostring(i), 1000)); res:flush() end
end)
http.handle("GET /big", function(req, res)
  progress = 0
  for i = 1, 100 do
    if not res:write(string.rep("x", 100000)) then break end
    progress = i
  end
end)
http.handle("GET /slow_producer", function(req, res)
  res:write("early "); res:flush(); http.sleep(1.5); res:write("late")
end)
http.handle("GET /progress", function(req, res) res:write(progress) end)
http.handle("GET /hdr", function(req, res)
  local v = req.query:match("v=(%%d+)")
  res:header("X-V", v .. "-" .. string.rep("v", 100)); res:write(v)
end)
http.handle("GET /err", function(req, res) error("boom") end)
http.handle("GET /err_after_head", function(req, res) res:write("a"); res:flush(); error("boom") end)
http.handle("GET /static/", http.files(%q))
]]

local function start(dir, extra, opts)
  return H.start(H.script(string.format(APP, extra or "", dir)), opts)
end

local function parse(out)
  local kv = {}
  for k, v in out:gmatch("([^\n=]+)=([^\n]*)") do kv[k] = v end
  return kv
end

-- A server for one test, stopped when the test ends, also when an assertion fails.
-- (One per test at a time: busted keeps the last finally.)
local function start_for_test(...)
  local s = start(...)
  finally(function() s:stop() end)
  return s
end

local function frames(srv, scenario)
  local out, ok = sh(string.format("timeout 20 %s %s %s %d", PY, q(FRAMES), scenario, srv.port))
  assert(ok, out)
  return parse(out), out
end

-- Runs a scenario that sends the server `sig` once its stream is under way (cue()).
local function frames_signalled(srv, scenario, sig)
  local out, ok = sh(string.format("H2_CUE=%s:%d timeout 20 %s %s %s %d", sig, srv.pid,
    PY, q(FRAMES), scenario, srv.port))
  assert(ok, out)
  return parse(out), out
end

-- A self-signed certificate (c.pem, c.key) in a new directory.
local function make_cert()
  local tls = certs.dir("-h2tls")
  certs.self_signed(tls, "c", "/CN=localhost")
  return tls
end

local function curl(args)
  return sh("curl -sS --max-time 10 " .. args)
end

describe("HTTP/2", function()
  local srv, four, dir
  setup(function()
    dir = H.tmpname("-h2www")
    assert(os.execute("mkdir -p " .. q(dir)))
    H.write_file(dir .. "/a.txt", "static hello\n")
    H.write_file(dir .. "/big.txt", string.rep("compressible text line\n", 2000))
    srv = start(dir)
    four = start(dir, "h2_max_concurrent_streams = 4")
  end)
  teardown(function()
    -- both stop even when the first reports a failure (a crashed server), then it is raised
    local ok, err = pcall(srv.stop, srv)
    local ok4, err4 = pcall(four.stop, four)
    os.execute("rm -rf " .. q(dir))
    assert(ok, err)
    assert(ok4, err4)
  end)

  -- { curl arguments after the URL's path, what -w prints: status, length, encoding }
  local same = {
    { "GET a route", "/hello" },
    { "GET a missing path (404)", "/nope" },
    { "a method the route does not allow (405)", "/hello -X DELETE" },
    { "a method llhttp does not know (405)", "/hello -X PURGEX" },
    { "HEAD of a Lua route", "/hello -I" },
    { "POST echo", "/echo -d hello" },
    { "POST streamed through req:read", "/stream --data-binary @BODY" },
    { "a body past max_body_bytes (413)", "/echo --data-binary @LARGE" },
    { "a handler error before the head (500)", "/err" },
    { "a streamed response (no Content-Length)", "/stream_out" },
    { "a static file", "/static/a.txt" },
    { "HEAD of a static file", "/static/a.txt -I" },
    { "a static file range", "/static/a.txt -r 2-5" },
    { "a static file gzipped", "/static/big.txt -H 'Accept-Encoding: gzip'" },
    { "a big response", "/big" },
  }

  it("gives curl the same answers over h2c and TLS h2 as over HTTP/1.1", function()
    local body = H.write_file(H.tmpname(".bin"), string.rep("0123456789", 9000))
    local large = H.write_file(H.tmpname(".bin"), string.rep("z", 150000))
    local tls = make_cert()
    local tsrv = start_for_test(dir, string.format("tls = { cert = %q, key = %q }", tls .. "/c.pem", tls .. "/c.key"))
    local fmt = "-o /dev/null -w '%{http_code} %{size_download} [%header{content-type}] " ..
        "[%header{content-length}] [%header{content-encoding}] %{http_version}\\n'"
    for _, row in ipairs(same) do
      local args = row[2]:gsub("@BODY", "@" .. body):gsub("@LARGE", "@" .. large)
      local path, rest = args:match("^(%S+)(.*)$")
      local function get(how, scheme, port)
        if rest:find("-I", 1, true) then
          local out = curl(string.format("%s -I %s://127.0.0.1:%d%s -k", how, scheme, port, path))
          out = out:gsub("\r", ""):lower():gsub("date: [^\n]*\n", "")
          return (out:gsub("^http/[%d.]+ (%d+)[^\n]*", "http %1"))
        end
        local out = curl(string.format("%s %s %s://127.0.0.1:%d%s%s -k", how, fmt, scheme, port, path, rest))
        return out
      end
      local h1 = get("--http1.1", "http", srv.port)
      local h2c = get("--http2-prior-knowledge", "http", srv.port)
      local h2 = get("--http2", "https", tsrv.port)
      if not rest:find("-I", 1, true) then
        assert.truthy(h1:find(" 1.1\n$"), row[1] .. ": " .. h1)
        assert.truthy(h2c:find(" 2\n$"), row[1] .. ": " .. h2c)
        assert.truthy(h2:find(" 2\n$"), row[1] .. ": " .. h2)
        h1, h2c, h2 = h1:gsub(" 1.1\n$", ""), h2c:gsub(" 2\n$", ""), h2:gsub(" 2\n$", "")
      end
      assert.equal(h1, h2c, row[1] .. " (h2c)")
      assert.equal(h1, h2, row[1] .. " (TLS h2)")
    end
    tsrv:stop()
    os.remove(body)
    os.remove(large)
    os.execute("rm -rf " .. q(tls))
  end)

  it("sets req.proto and takes Host from :authority", function()
    local out = curl(string.format("--http2-prior-knowledge http://127.0.0.1:%d/host", srv.port))
    assert.equal("HTTP/2.0 127.0.0.1:" .. srv.port, out)
    local kv = frames(srv, "get")
    assert.equal("200", kv["status.1"])
    assert.equal("HTTP/2.0 example.test", kv["body.1"])
  end)

  it("serves many streams of one connection at once (nghttp, 40 streams)", function()
    local urls = {}
    for i = 1, 2 do
      urls[#urls + 1] = string.format("http://127.0.0.1:%d/slow", srv.port)
      urls[#urls + 1] = string.format("http://127.0.0.1:%d/static/big.txt", srv.port)
    end
    local t = H.now()
    -- -m 10: each URI ten times, all on one connection
    local out, ok = sh("timeout 20 nghttp -ns -m 10 " .. table.concat(urls, " "))
    assert(ok, out)
    local _, n = out:gsub(" 200 ", "")
    assert.equal(40, n, out)
    -- 20 slow streams of 0.5 s side by side: far under the 10 s they take one after another
    assert.truthy(H.now() - t < 4, out)
  end)

  it("does not hold a fast stream behind a slow one", function()
    local kv = frames(srv, "concurrent")
    assert.equal("200", kv["status.3"])
    assert.equal("200", kv["status.1"])
    assert.equal("0", kv.slow_done_before_fast)
  end)

  it("resets only the stream whose handler failed after its head", function()
    local kv = frames(srv, "err_after_head")
    assert.equal("200", kv["status.1"])
    assert.equal("INTERNAL_ERROR", kv["rst.1"])
    assert.equal("200", kv["status.3"])
    assert.equal("hello", kv["body.3"])
  end)

  it("makes a handler wait on a zero window with bounded memory, then cuts it at send_timeout", function()
    local kv = frames(srv, "slow_reader")
    assert.equal("CANCEL", kv["rst.1"])
    local waited = tonumber(kv.waited)
    assert.truthy(waited >= 0.8 and waited < 3, kv.waited)
    -- 100 writes of 100 kB wanted; the wait stopped it within the high-water mark
    local progress = curl(string.format("http://127.0.0.1:%d/progress", srv.port))
    assert.truthy(tonumber(progress) <= 4, progress)
  end)

  it("applies idle_timeout to a connection without streams and read_header_timeout to a head", function()
    local kv = frames(srv, "idle")
    assert.equal("NO_ERROR", kv.goaway)
    assert.truthy(tonumber(kv.waited) >= 1.5 and tonumber(kv.waited) < 4, kv.waited)
    kv = frames(srv, "head_timeout")
    assert.equal("CANCEL", kv["rst.1"])
    assert.truthy(tonumber(kv.waited) >= 0.8 and tonumber(kv.waited) < 3, kv.waited)
  end)

  local pairs_sent = {}
  for i = 0, 29 do pairs_sent[#pairs_sent + 1] = "c" .. i .. "=" .. string.rep("v", 50) end
  local split_cookies = table.concat(pairs_sent, "; ")
  -- { scenario, expected key/value pairs } (see spec/h2_frames.py)
  local rows = {
    { "post", { ["status.1"] = "200", ["body.1"] = "hello" } },
    -- send_timeout (1 s) waits on the client, not on a handler that writes 1.5 s later
    { "slow_producer", { ["status.1"] = "200", ["body.1"] = "early late", ["rst.1"] = false } },
    { "te_trailers", { ["status.1"] = "200" } },
    -- RFC 9113 §8.3: pseudo-headers; §8.2.2: connection-specific fields; TE only "trailers"
    { "bad_no_path", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "bad_no_method", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "bad_empty_path", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "bad_two_paths", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "bad_unknown_pseudo", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "bad_pseudo_after_regular", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "bad_uppercase_name", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "bad_connection_header", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "bad_keep_alive_header", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "bad_transfer_encoding", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "bad_te_gzip", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "length_mismatch", { ["rst.1"] = "PROTOCOL_ERROR" } },
    { "too_large", { ["status.1"] = "413" } },
    { "header_list", { ["status.1"] = "431" } },
    -- floods: GOAWAY ENHANCE_YOUR_CALM
    -- Rapid Reset: 1000 resets (h2_flood_budget) of 4000, then GOAWAY (nghttp2's own
    -- limit would say INTERNAL_ERROR: ENHANCE_YOUR_CALM is ours)
    { "rapid_reset", { goaway = "ENHANCE_YOUR_CALM" } },
    { "continuation_flood", { goaway = "ENHANCE_YOUR_CALM", goaway_last = "1" } },
    { "settings_flood", { goaway = "ENHANCE_YOUR_CALM" } },
    { "ping_flood", { goaway = "ENHANCE_YOUR_CALM" } },
    { "priority_flood", { goaway = "ENHANCE_YOUR_CALM" } },
    { "empty_data_flood", { goaway = "ENHANCE_YOUR_CALM" } },
    -- limits and misuse
    -- RFC 9113 §5.1.2: a stream past max_concurrent_streams is refused, the others and the
    -- connection go on, after the server's SETTINGS were acknowledged and before
    { "max_streams", { ["status.7"] = "200", ["rst.9"] = "REFUSED_STREAM", ["status.9"] = false,
      ["status.11"] = "200", goaway = false }, four = true },
    { "max_streams_early", { ["status.7"] = "200", ["rst.9"] = "REFUSED_STREAM",
      ["status.11"] = "200", goaway = false }, four = true },
    -- refused streams opened in a loop are a flood (the budget: 1000 of 3000)
    { "refused_flood", { goaway = "ENHANCE_YOUR_CALM" }, four = true },
    { "even_stream", { goaway = "PROTOCOL_ERROR" } },
    { "data_on_idle", { goaway = "PROTOCOL_ERROR" } },
    { "split_cookies", { ["status.1"] = "200", ["body.1"] = split_cookies } },
    -- RFC 8441: WebSocket over a stream (SETTINGS_ENABLE_CONNECT_PROTOCOL is 8)
    { "ws_echo", { ["setting.8"] = "1", ["status.1"] = "200", ["header.1.sec-websocket-protocol"] = "chat",
      ["header.1.content-length"] = false, ["header.1.content-type"] = false, ["ws.1.pong"] = "p",
      ["ws.1.1"] = "text:h\xc3\xa9llo (chat)", ["ws.1.2"] = "binary:\0\1\2", ["ws.1.3"] = "text:frag (chat)",
      ["ws.1.4"] = "close:1000:", ["end.1"] = "1",
      ["status.3"] = "200", ["body.3"] = "hello", goaway = false } },
    { "ws_window", { ["status.1"] = "200", ["ws.1.1"] = "binary:60000 bytes", ["ws.1.2"] = "binary:60000 bytes",
      ["rst.1"] = false, goaway = false } },
    { "ws_split_header", { ["ws.1.1"] = "text:split (chat)", ["status.3"] = "200" } },
    { "ws_end_stream", { ["status.1"] = "400" } },
    { "ws_version", { ["status.1"] = "426", ["header.1.sec-websocket-version"] = "13", ["end.1"] = "1" } },
    { "ws_other_protocol", { ["status.1"] = "501" } },
    { "ws_get", { ["status.1"] = "400" } },
    { "connect_tunnel", { ["status.1"] = "501" } },
    -- RFC 9113 §5.1 "closed": a frame after the client's own END_STREAM is a connection
    -- error STREAM_CLOSED (h2spec http2/5.1/11, 5.1/12); the stream ended both ways
    { "data_on_closed", { ["status.1"] = "200", goaway = "STREAM_CLOSED", goaway_last = "1",
      ["status.3"] = false, ["rst.1"] = false } },
    -- issue 43: a body the handler leaves unread is not read past the stream's window
    -- (65,535 bytes, below discard_body_bytes): the answer, then RST_STREAM NO_ERROR (RFC 9113
    -- §8.1); DATA in flight is a stream error, no window comes back, the connection goes on
    { "unread_upload", { ["status.1"] = "200", ["body.1"] = "ignored", ["first_rst.1"] = "NO_ERROR",
      ["rst.1"] = "STREAM_CLOSED", ["status.3"] = "200", goaway = false, window_back = "0" } },
    { "headers_on_closed", { ["status.1"] = "200", goaway = "STREAM_CLOSED", goaway_last = "1",
      ["status.3"] = false, ["rst.1"] = false } },
    -- after the server reset a stream (a 405 that left the body unread) the client's frames
    -- may have been in flight: a stream error STREAM_CLOSED, and the others go on. One
    -- RST_STREAM answers a run of frames on the same stream
    { "data_after_reset", { ["status.1"] = "405", ["first_rst.1"] = "NO_ERROR", ["status.3"] = "200",
      goaway = false, ["rst.1"] = "STREAM_CLOSED" } },
    { "headers_after_reset", { ["status.1"] = "405", ["first_rst.1"] = "NO_ERROR",
      ["status.3"] = "200", goaway = false, ["rst.1"] = "STREAM_CLOSED" } },
    -- (§6.9: the DATA still counts against the connection window, and comes back in
    -- WINDOW_UPDATE)
    { "data_on_closed_window", { ["rst.1"] = "STREAM_CLOSED", ["rsts.1"] = "1", window_back = "1",
      ["status.3"] = "200", goaway = false } },
    -- the server remembers the latest 16 streams the client ended; an older one is answered
    -- as a reset one (§5.1 lets an endpoint limit how long it tells them apart)
    { "headers_on_long_closed", { ["status.37"] = "200", goaway = false,
      ["rst.1"] = "STREAM_CLOSED" } },
    -- §6.8: after the client's GOAWAY, PINGs are answered while streams finish; then the
    -- connection closes at once (not at idle_timeout)
    { "goaway_ping", { ["status.1"] = "200", ["body.1"] = "slow", ping_ack = "after-ga",
      closed = "1", prompt = "1" } },
    -- (nghttp2 takes no frame once a GOAWAY went either way and no stream is left: the
    -- PING behind this GOAWAY finds the connection closing)
    { "goaway_idle", { closed = "1", prompt = "1" } },
    -- §3.4: an invalid preface on a cleartext listener (the reserved PRI method, then not
    -- the preface) is a connection error PROTOCOL_ERROR: GOAWAY, then the close
    { "bad_preface", { goaway = "PROTOCOL_ERROR", closed = "1" } },
    -- bytes that do not start "PRI " are an HTTP/1 request line on a listener that serves
    -- both (conn.c, detect): h2spec's invalid preface is an unknown method, 400 and the close
    { "invalid_preface", { http1 = "HTTP/1.1 400 Bad Request", closed = "1" } },
    -- RFC 9113 §5.1.1: a new stream's ID is above every one opened before; a skipped ID
    -- (closed, never opened) is a connection error; trailers on an opened lower one are not
    { "decreasing_stream", { ["status.5"] = "200", ["status.3"] = false, goaway = "PROTOCOL_ERROR",
      goaway_last = "5" } },
    { "skipped_stream", { ["status.7"] = "200", ["status.5"] = false, goaway = "PROTOCOL_ERROR" } },
    { "trailers_lower", { ["status.1"] = "200", ["body.1"] = "hello", ["status.3"] = "200",
      goaway = false } },
    { "oversized_frame", { goaway = "FRAME_SIZE_ERROR" } },
    { "window_overflow", { goaway = "FLOW_CONTROL_ERROR" } },
    { "half_preface", { closed = "1" } },
  }
  for _, row in ipairs(rows) do
    it("raw frames: " .. row[1], function()
      local kv, out = frames(row.four and four or srv, row[1])
      for k, v in pairs(row[2]) do
        assert.equal(v or nil, kv[k], row[1] .. " " .. k .. "\n" .. out)
      end
      -- the server keeps serving
      assert.equal("hello", curl(string.format("--http2-prior-knowledge http://127.0.0.1:%d/hello", srv.port)))
    end)
  end

  it("closes a Rapid Reset at the budget, not at the end of the 4,000 streams", function()
    local kv = frames(srv, "rapid_reset")
    -- h2_flood_budget 1000 resets (refilled at 100/s while the loop runs): stream ~2001
    local last = tonumber(kv.goaway_last)
    assert.truthy(last >= 1801 and last <= 2601, kv.goaway_last)
  end)

  it("refuses streams past the limit one by one until the flood budget, then GOAWAY", function()
    local kv = frames(four, "refused_flood")
    assert.equal("ENHANCE_YOUR_CALM", kv.goaway)
    -- h2_flood_budget 1000 (refilled at 100/s while the loop runs). The client counts the
    -- RST_STREAMs it read before the GOAWAY: those still queued behind it are never sent, and
    -- a busy server queues more of them, so the lower bound only says "one by one, many times".
    local refused = tonumber(kv.refused)
    assert.truthy(refused >= 100 and refused <= 1600, kv.refused)
  end)

  it("bounds the response encoder's HPACK table by h2_header_table_size, whatever the client allows", function()
    local small = start_for_test(dir, "h2_header_table_size = 512")
    local kv, out = frames(small, "hpack_bound")
    assert.equal("200", kv.ok, out) -- every response decoded, headers and body right
    assert.equal("512", kv.table_max, out)
    assert.truthy(tonumber(kv.table_biggest) > 0 and tonumber(kv.table_biggest) <= 512, out)
    small:stop()
    -- the default (4096): nghttp2's own bound would be the same; the setting is what moves it
    kv, out = frames(srv, "hpack_bound")
    assert.equal("200", kv.ok, out)
    assert.equal("4096", kv.table_max, out)
  end)

  it("holds a client to the request decoder's table size (h2_header_table_size)", function()
    local small = start_for_test(dir, "h2_header_table_size = 512")
    local kv, out = frames(small, "hpack_over_table")
    assert.equal("COMPRESSION_ERROR", kv.goaway, out)
    assert.is_nil(kv["status.1"], out)
    small:stop()
    kv, out = frames(srv, "hpack_over_table") -- 4096 is within the default
    assert.equal("200", kv["status.1"], out)
  end)

  it("cuts a stream whose handler takes longer than write_timeout; the connection goes on", function()
    local w = start_for_test(dir, "write_timeout = 1")
    local kv, out = frames(w, "write_timeout")
    assert.equal("200", kv["status.1"], out) -- "early " was flushed
    assert.equal("CANCEL", kv["rst.1"], out)
    -- cut, not finished: the handler's last write would have come at 1.5 s
    assert.truthy(tonumber(kv.waited) >= 0.8 and tonumber(kv.waited) < 3, out)
    assert.equal("hello", kv["body.3"], out)
    w:stop()
  end)

  it("stops gracefully: GOAWAY with the last stream, the stream in flight completes", function()
    local g = start_for_test(dir)
    local kv, out = frames_signalled(g, "graceful", "TERM")
    assert.equal("NO_ERROR", kv.goaway, out)
    assert.equal("1", kv.goaway_last, out)
    assert.equal("200", kv["status.1"], out)
    assert.equal("slow", kv["body.1"], out)
    assert.is_nil(kv["status.3"], out) -- opened after the GOAWAY: not served
    assert.equal(0, g:wait(10))
  end)

  it("drains a WebSocket open on a stream at a stop: close 1001 when the window ends, the stream ends, GOAWAY", function()
    -- SIGTERM drains (operations.md): the WebSocket is served for
    -- shutdown_timeout - drain_spread, then closed within the spread, well
    -- inside the scenario's 4 s wait for the close.
    local g = start_for_test(dir, "shutdown_timeout = 2, drain_spread = 0.5")
    local kv, out = frames_signalled(g, "ws_graceful", "TERM")
    assert.equal("200", kv["status.1"], out)
    assert.equal("close:1001:server stopping", kv["ws.1.1"], out)
    assert.equal("1", kv["end.1"], out)
    assert.equal("NO_ERROR", kv.goaway, out)
    assert.equal(0, g:wait(10))
  end)

  it("keeps an h2 connection across a reload: the stream in flight ends, the next is served", function()
    local g = start_for_test(dir)
    local kv, out = frames_signalled(g, "reload", "HUP")
    assert.equal("slow", kv["body.1"], out)
    assert.equal("hello", kv["body.3"], out)
    assert.is_nil(kv.goaway, out)
    assert.truthy(g:logtext():find("reloaded (SIGHUP)", 1, true))
    g:stop()
  end)

  it("keeps an h2 connection across a --dev reload on save: the stream in flight ends, the next is served", function()
    local script = H.script(string.format(APP, "", dir))
    local g = H.start(script, { flags = { "--dev" } })
    finally(function() g:stop() end)
    local out, ok = sh(string.format("(timeout 20 %s %s reload %d & sleep 0.2; echo '-- saved' >> %s; wait)",
      PY, q(FRAMES), g.port, q(script)))
    assert(ok, out)
    local kv = parse(out)
    assert.equal("slow", kv["body.1"], out)
    assert.equal("hello", kv["body.3"], out)
    assert.is_nil(kv.goaway, out)
    assert.truthy(g:logtext():find("reloaded (file change)", 1, true), g:logtext())
    g:stop()
    os.remove(script)
  end)

  it("writes HTTP/2.0 into the access log", function()
    local log = H.tmpname(".access")
    local a = start_for_test(dir, "", { flags = { "--access-log", log } })
    assert.equal("hello", curl(string.format("--http2-prior-knowledge http://127.0.0.1:%d/hello", a.port)))
    a:stop()
    local text = H.read_file(log) or ""
    assert.truthy(text:find('"GET /hello HTTP/2.0" 200 5', 1, true), text)
    os.remove(log)
  end)

  it("counts requests by protocol in the metrics", function()
    local m = start_for_test(dir, "", { flags = { "--metrics", "127.0.0.1:0" } })
    local mport = tonumber(m:logtext():match("metrics on [^\n]* %(port (%d+)%)"))
    for _ = 1, 3 do curl(string.format("--http2-prior-knowledge http://127.0.0.1:%d/hello", m.port)) end
    curl(string.format("--http1.1 http://127.0.0.1:%d/hello", m.port))
    local text = curl(string.format("http://127.0.0.1:%d/metrics", mport))
    assert.truthy(text:find('moonhttp_requests_by_protocol_total{protocol="HTTP/2.0"} 3\n', 1, true), text)
    local h1 = tonumber(text:match('moonhttp_requests_by_protocol_total{protocol="HTTP/1.1"} (%d+)'))
    assert.truthy(h1 and h1 >= 1, text)
    m:stop()
  end)

  it("answers an h2c Upgrade over HTTP/1.1 (no 101: RFC 9113 deprecates it)", function()
    -- curl --http2 on http:// sends Upgrade: h2c with HTTP2-Settings
    local out = curl(string.format("-sv --http2 http://127.0.0.1:%d/hello 2>&1", srv.port))
    assert.truthy(out:find("Upgrade: h2c", 1, true), out)
    assert.truthy(out:find("< HTTP/1.1 200", 1, true), out)
    assert.falsy(out:find(" 101 ", 1, true), out)
    assert.truthy(out:find("hello$"), out)
  end)

  it("h2c = false: a connection preface is HTTP/1 (not upgraded)", function()
    local off = start_for_test(dir, "h2c = false")
    local out = curl(string.format("--http2-prior-knowledge -o /dev/null -w '%%{http_code}' http://127.0.0.1:%d/hello", off.port))
    assert.falsy(out:find("^200"), out)
    local c = off:connect()
    c:send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    c:fill()
    assert.truthy(c.buf:find("^HTTP/1.1 "), c.buf)
    assert.equal("hello", curl(string.format("http://127.0.0.1:%d/hello", off.port)))
    off:stop()
  end)

  it("http2 = false: TLS offers only http/1.1 in ALPN", function()
    local tls = make_cert()
    local tsrv = start_for_test(dir, string.format("http2 = false, tls = { cert = %q, key = %q }",
      tls .. "/c.pem", tls .. "/c.key"))
    local out = curl(string.format("-v --http2 -k https://127.0.0.1:%d/hello 2>&1", tsrv.port))
    assert.truthy(out:find("ALPN: server accepted http/1.1", 1, true), out)
    tsrv:stop()
    local on = start_for_test(dir, string.format("tls = { cert = %q, key = %q }", tls .. "/c.pem", tls .. "/c.key"))
    out = curl(string.format("-v --http2 -k https://127.0.0.1:%d/hello 2>&1", on.port))
    assert.truthy(out:find("ALPN: server accepted h2", 1, true), out)
    on:stop()
    os.execute("rm -rf " .. q(tls))
  end)
end)
