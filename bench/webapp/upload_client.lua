-- Sends one multipart upload of SIZE bytes (generated, nothing read from
-- disk) to 127.0.0.1:PORT/upload; prints the response body.
-- usage: lua5.4 upload_client.lua PORT SIZE
local socket = require "socket"
local port, size = tonumber(arg[1]), tonumber(arg[2])
local head = "--BENCHB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\n"
  .. "Content-Type: application/octet-stream\r\n\r\n"
local tail = "\r\n--BENCHB--\r\n"
local s = assert(socket.connect("127.0.0.1", port))
s:settimeout(600)
assert(s:send("POST /upload HTTP/1.1\r\nHost: b\r\nConnection: close\r\n"
  .. "Content-Type: multipart/form-data; boundary=BENCHB\r\nContent-Length: "
  .. (#head + size + #tail) .. "\r\n\r\n" .. head))
local block = string.rep("moonhttp-upload-", 65536 // 16) -- 64 KiB, no CRLF in it
local sent = 0
while sent < size do
  local n = math.min(#block, size - sent)
  assert(s:send(n == #block and block or block:sub(1, n)))
  sent = sent + n
end
assert(s:send(tail))
print(s:receive("*a"))
