-- The hostile rows, as data: the bytes a client sends, the status it must
-- get, and whether the connection stays open after. hostile_spec.lua sends
-- them to moonhttp (spec/apps/basic.lua); h11_diff_spec.lua also to h11.
local big_target = "/" .. string.rep("a", 3000)
local big_header = "X-Big: " .. string.rep("b", 3000) .. "\r\n"
local many_headers = string.rep("X-Many: 1\r\n", 400)

-- { name, request bytes, expected status (nil = connection closed with no response),
--   keep = connection stays open after }
local cases = {
  { "plain GET", "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n", 200, keep = true },
  { "empty lines before the request are ignored", "\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n", 200, keep = true },
  { "absolute-form target", "GET http://a/hello HTTP/1.1\r\nHost: b\r\n\r\n", 200, keep = true },
  { "tab in a header value", "GET /hello HTTP/1.1\r\nHost: a\r\nX: a\tb\r\n\r\n", 200, keep = true },
  { "obs-text in a header value", "GET /hello HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n", 200, keep = true },
  { "chunk extensions", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\n\r\n", 200, keep = true },
  { "chunked trailers", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", 200, keep = true },
  { "HTTP/1.1 without Host", "GET /hello HTTP/1.1\r\n\r\n", 400 },
  { "two Host headers", "GET /hello HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400 },
  { "HTTP/2.0 on an HTTP/1 connection", "GET /hello HTTP/2.0\r\nHost: a\r\n\r\n", 505 },
  { "HTTP/1.2", "GET /hello HTTP/1.2\r\nHost: a\r\n\r\n", 505 },
  { "HTTP/0.9 version", "GET /hello HTTP/0.9\r\nHost: a\r\n\r\n", 505 },
  { "bad protocol name", "GET /hello FOO/1.1\r\nHost: a\r\n\r\n", 400 },
  -- Any token is a method (RFC 9110 §9.1), routed as Go's ServeMux does: "get" is not "GET".
  { "lowercase method on a GET route", "get /hello HTTP/1.1\r\nHost: a\r\n\r\n", 405, keep = true, allow = "GET, HEAD" },
  { "unknown method on a GET route", "FROB /hello HTTP/1.1\r\nHost: a\r\n\r\n", 405, keep = true, allow = "GET, HEAD" },
  { "unknown method reaches a route for any method", "FROB /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", 200, keep = true, body = "hello", method = "FROB" },
  { "lowercase method reaches a route for any method", "purge /echo HTTP/1.1\r\nHost: a\r\n\r\n", 200, keep = true, body = "", method = "purge" },
  { "unknown method with a chunked body", "MKFOO /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 200, keep = true, body = "abc", method = "MKFOO" },
  { "unknown method, then a pipelined GET", "FROB /echo HTTP/1.1\r\nHost: a\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n", { 200, 200 }, keep = true },
  { "a method of 31 bytes", string.rep("M", 31) .. " /echo HTTP/1.1\r\nHost: a\r\n\r\n", 200, keep = true, method = string.rep("M", 31) },
  { "a method over 31 bytes", string.rep("M", 32) .. " /echo HTTP/1.1\r\nHost: a\r\n\r\n", 501 },
  { "a method with a byte that is not a token", "G@T /echo HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
  { "a method without a space after it", "FROB/echo HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
  { "two spaces in the request line", "GET  /hello HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
  { "space in the target", "GET /he llo HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
  { "target without a slash", "GET hello HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
  { "missing version", "GET /hello\r\nHost: a\r\n\r\n", 400 },
  { "Content-Length with Transfer-Encoding (smuggling)", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400 },
  { "two different Content-Lengths", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400 },
  { "two equal Content-Lengths", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 400 },
  { "Content-Length list", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\nhello", 400 },
  { "negative Content-Length", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400 },
  { "Content-Length with a plus sign", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello", 400 },
  { "non-numeric Content-Length", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5x\r\n\r\nhello", 400 },
  { "overflowing Content-Length", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400 },
  { "Content-Length over max_body_bytes", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5000\r\n\r\n", 413 },
  { "chunked body over max_body_bytes", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n800\r\n" .. string.rep("x", 2048) .. "\r\n0\r\n\r\n", 413 },
  { "unknown transfer coding", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501 },
  { "chunked not last", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 501 },
  { "gzip then chunked", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501 },
  { "bad chunk size", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400 },
  { "overflowing chunk size", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\nhello\r\n0\r\n\r\n", 400 },
  { "chunk data longer than its size", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n", 400 },
  { "obs-fold", "GET /hello HTTP/1.1\r\nHost: a\r\nX-Folded: a\r\n b\r\n\r\n", 400 },
  { "bare LF line endings", "GET /hello HTTP/1.1\nHost: a\n\n", 400 },
  { "bare CR in a header value", "GET /hello HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", 400 },
  { "NUL in a header value", "GET /hello HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n", 400 },
  { "control character in a header value", "GET /hello HTTP/1.1\r\nHost: a\r\nX: a\1b\r\n\r\n", 400 },
  { "space before the colon", "GET /hello HTTP/1.1\r\nHost : a\r\n\r\n", 400 },
  { "invalid character in a header name", "GET /hello HTTP/1.1\r\nHost: a\r\nX(y): 1\r\n\r\n", 400 },
  { "header line without a colon", "GET /hello HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", 400 },
  { "empty header name", "GET /hello HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n", 400 },
  { "target over max_header_bytes", "GET " .. big_target .. " HTTP/1.1\r\nHost: a\r\n\r\n", 414 },
  { "header over max_header_bytes", "GET /hello HTTP/1.1\r\nHost: a\r\n" .. big_header .. "\r\n", 431 },
  { "too many headers", "GET /hello HTTP/1.1\r\nHost: a\r\n" .. many_headers .. "\r\n", 431 },
  { "Expect other than 100-continue", "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: 200-ok\r\n\r\nx", 417 },
  { "garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n", 400 },
  { "binary noise", "\0\1\2\3\4\5\6\7\r\n\r\n", 400 },
  { "good request then garbage", "GET /hello HTTP/1.1\r\nHost: a\r\n\r\nBLAH\r\n\r\n", { 200, 400 } },
  -- RFC 9110 / 9112 strictness (issue 12)
  { "tab before the colon", "GET /hello HTTP/1.1\r\nHost: a\r\nX-A\t: 1\r\n\r\n", 400 },
  { "space inside a field name", "GET /hello HTTP/1.1\r\nHost: a\r\nX A: 1\r\n\r\n", 400 },
  { "Host with a space", "GET /hello HTTP/1.1\r\nHost: a b\r\n\r\n", 400 },
  { "Host with a slash", "GET /hello HTTP/1.1\r\nHost: a/b\r\n\r\n", 400 },
  { "Host with user info", "GET /hello HTTP/1.1\r\nHost: u@a\r\n\r\n", 400 },
  { "Host with a bad port", "GET /hello HTTP/1.1\r\nHost: a:8x\r\n\r\n", 400 },
  { "Host with an unclosed IPv6 literal", "GET /hello HTTP/1.1\r\nHost: [::1\r\n\r\n", 400 },
  { "Host with a bad percent-escape", "GET /hello HTTP/1.1\r\nHost: a%zz\r\n\r\n", 400 },
  { "Host as an IPv6 literal with a port", "GET /hello HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", 200, keep = true },
  -- RFC 6874 zone identifiers ("%25" then unreserved / pct-encoded), as Go's Host check takes them
  { "Host as an IPv6 literal with a zone and a port", "GET /hello HTTP/1.1\r\nHost: [fe80::1%25eth0]:8080\r\n\r\n", 200, keep = true },
  { "Host as an IPv6 literal with a zone", "GET /hello HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n", 200, keep = true },
  { "absolute-form with a zone and a port", "GET http://[fe80::1%25en%2F1]:8080/hello HTTP/1.1\r\nHost: a\r\n\r\n", 200, keep = true },
  { "Host with a zone not written %25", "GET /hello HTTP/1.1\r\nHost: [fe80::1%eth0]:8080\r\n\r\n", 400 },
  { "Host with an empty zone", "GET /hello HTTP/1.1\r\nHost: [fe80::1%25]:8080\r\n\r\n", 400 },
  { "Host with a slash in the zone", "GET /hello HTTP/1.1\r\nHost: [fe80::1%25a/b]\r\n\r\n", 400 },
  { "Host as IPv4 with a port", "GET /hello HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n", 200, keep = true },
  { "empty Host", "GET /hello HTTP/1.1\r\nHost: \r\n\r\n", 200, keep = true },
  -- (the path is not clean: the redirect to "/x:/hello", not the root page of host "hello")
  { "a path holding :// is a path, not an absolute-form target", "GET /x://hello HTTP/1.1\r\nHost: a\r\n\r\n", 307, keep = true },
  { "absolute-form with a bad authority", "GET http://a b/hello HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
  { "bytes after the version", "GET /hello HTTP/1.1 x\r\nHost: a\r\n\r\n", 400 },
  { "a space after the version", "GET /hello HTTP/1.1 \r\nHost: a\r\n\r\n", 400 },
  { "letters glued to the version", "GET /hello HTTP/1.1x\r\nHost: a\r\n\r\n", 400 },
  { "method that is not a token", "G(T /hello HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
  { "bare LF ending a chunk-size line", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", 400 },
  { "bare LF after chunk data", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n", 400 },
  -- A lenient parser takes any two bytes after the data as its CRLF: this was the body "abc".
  { "two bytes after chunk data that are not CRLF", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXX0\r\n\r\n", 400 },
  { "CR and another byte after chunk data", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\rX0\r\n\r\n", 400 },
  { "bare LF ending the last chunk", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\n\r\n", 400 },
  { "bare LF ending a trailer", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\n\r\n", 400 },
  { "non-hex chunk size", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5g\r\nhello\r\n0\r\n\r\n", 400 },
  { "control byte in a chunk extension", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;\1\r\nhello\r\n0\r\n\r\n", 400 },
  { "space before a chunk extension", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5 ;a=b\r\nhello\r\n0\r\n\r\n", 400 },
  { "chunk extension over 1024 bytes", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=" .. string.rep("b", 1100) .. "\r\nhello\r\n0\r\n\r\n", 400 },
  { "chunk extension of 1000 bytes", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;a=" .. string.rep("b", 1000) .. "\r\nhello\r\n0\r\n\r\n", 200, keep = true },
  { "space in a trailer name", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX Y: 1\r\n\r\n", 400 },
  { "trailer without a colon", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nXY\r\n\r\n", 400 },
  { "malformed body, handler ignores the error", "POST /body-ignore-error HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n", 400, body = "400 Bad Request: malformed request body\n" },
  { "malformed body, handler raises on it", "POST /body-assert HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400, body = "400 Bad Request: malformed request body\n" },
  { "OPTIONS *", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", 200, keep = true },
  -- Go's ServeMux: the empty path cleans to "/", which differs, so it redirects there (RFC 9112 §3.2.2)
  { "absolute-form with an empty path redirects to /", "GET http://a HTTP/1.1\r\nHost: a\r\n\r\n", 307, keep = true, location = "/" },
  { "absolute-form with an empty path and a query", "GET http://a?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", 307, keep = true, location = "/?x=1" },
  { "absolute-form with the path /", "GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n", 200, keep = true, body = "root /" },
  { "origin-form with only a query", "GET ?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
  { "405 also looks at path + / (only GET /x/ registered)", "POST /x HTTP/1.1\r\nHost: a\r\n\r\n", 405, keep = true, allow = "GET, HEAD" },
  { "header injection from a handler is refused", "GET /inject HTTP/1.1\r\nHost: a\r\n\r\n", 200, keep = true },
  -- issue 30: line ends and obs-fold in the trailer section as in the head (RFC 9112 §2.2, §5.2, §7.1.2)
  { "bare LF ending the head", "GET /hello HTTP/1.1\r\nHost: a\r\n\n", 400 },
  { "bare LF ending a head without fields", "GET /hello HTTP/1.0\r\n\n", 400 },
  { "bare LF ending the trailer section, no trailers", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\n", 400 },
  { "bare LF ending the trailer section after a trailer", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\n\n", 400 },
  -- (before: answered 200, then the GET after the bare LF was answered too: two requests from one)
  { "bare LF ending the trailer section, then a GET", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n", 400 },
  { "obs-fold in a trailer (SP)", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\n z\r\n\r\n", 400 },
  { "obs-fold in a trailer (HTAB)", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\n\tz\r\n\r\n", 400 },
  { "a trailer section starting with whitespace", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n X: y\r\n\r\n", 400 },
  { "two trailers, CRLF each", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\nZ: w\r\n\r\n", 200, keep = true, body = "abc" },
  -- issue 43: fields a trailer may not carry (RFC 9110 §6.5.1, RFC 9112 §7.1.2). Transfer-Encoding
  -- there is refused for that request with the server's 400 (the handler's req:body() had
  -- "connection closed"); Connection is ignored (the next request was llhttp's 400 after an
  -- answer that did not say close)
  { "Transfer-Encoding in a trailer", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n", 400, body = "400 Bad Request: malformed request body\n" },
  { "Connection: close in a trailer, then a pipelined GET", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nConnection: close\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n", { 200, 200 }, keep = true },
  { "chunked, then a pipelined GET", "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX: y\r\n\r\nGET /hello HTTP/1.1\r\nHost: a\r\n\r\n", { 200, 200 }, keep = true },
  -- RFC 9112 §6.1: Transfer-Encoding on HTTP/1.0 means faulty framing: answered, then closed
  { "HTTP/1.0 chunked with keep-alive is closed after the answer", "POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200, body = "abc", conn = "close" },
  { "HTTP/1.0 with Content-Length and keep-alive stays open", "POST /echo HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nabc", 200, keep = true, body = "abc", conn = "keep-alive" },
}

-- RFC 9112 §7.1: every framing point of a chunked body, its CRLF replaced by
-- each mix of CR, LF and another byte (NUL: valid nowhere in framing), is a
-- 400 and a close. A GET follows each, so no row waits for more bytes, and
-- a parser that ends the message early answers it: it must not be answered.
local chunked_head = "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
local framing_points = {
  { "chunk-size line", "3", "abc\r\n0\r\n\r\n" },
  { "chunk extension", "3;a=b", "abc\r\n0\r\n\r\n" },
  { "chunk data end", "3\r\nabc", "0\r\n\r\n" },
  { "last chunk", "3\r\nabc\r\n0", "\r\n" },
  { "trailer line", "3\r\nabc\r\n0\r\nX-T: 1", "\r\n" },
  { "end after a trailer", "3\r\nabc\r\n0\r\nX-T: 1\r\n", "" },
  { "end without trailers", "3\r\nabc\r\n0\r\n", "" },
}
local not_crlf = { "\n", "\r", "\r\r", "\r\0", "\n\r", "\n\n", "\n\0", "\0\r", "\0\n", "\0\0", "\r\r\n", "\n\r\n" }
local function show(s) return (s:gsub("\r", "CR "):gsub("\n", "LF "):gsub("%z", "NUL "):gsub(" $", "")) end
for _, point in ipairs(framing_points) do
  for _, bytes in ipairs(not_crlf) do
    cases[#cases + 1] = { "chunked framing: " .. point[1] .. " ended by " .. show(bytes),
      chunked_head .. point[2] .. bytes .. point[3] .. "GET /hello HTTP/1.1\r\nHost: a\r\n\r\n", 400,
      framing = true }
  end
end

return cases
