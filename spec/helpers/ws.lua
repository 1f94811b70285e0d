-- WebSocket frames (RFC 6455 §5.2) written and read by hand, for specs that
-- talk to the server's WebSocket over a raw connection (H.connect): to send
-- what a client library would not (unmasked or fragmented control frames,
-- bad UTF-8, reserved bits) and to see each frame the server writes.
local W = {}

local KEY = { 0x37, 0xfa, 0x21, 0x3d } -- any mask key does; a fixed one keeps failures reproducible

--- A client frame of opcode op: masked unless o.mask == false; o.fin = false
--- for a fragment; o.rsv: reserved bits (0x70) to set; o.zero_key: masked
--- with the key 0 (valid, and a large payload is not masked byte by byte).
function W.frame(op, payload, o)
  o = o or {}
  local b1 = (o.fin == false and 0 or 0x80) | (o.rsv or 0) | op
  local m = o.mask == false and 0 or 0x80
  local len, hdr = #payload, nil
  if len < 126 then
    hdr = string.char(b1, m | len)
  elseif len < 65536 then
    hdr = string.char(b1, m | 126) .. string.pack(">I2", len)
  else
    hdr = string.char(b1, m | 127) .. string.pack(">I8", len)
  end
  if m == 0 then return hdr .. payload end
  if o.zero_key then return hdr .. "\0\0\0\0" .. payload end
  local out = {}
  for i = 1, len do out[i] = string.char(payload:byte(i) ~ KEY[(i - 1) % 4 + 1]) end
  return hdr .. string.char(table.unpack(KEY)) .. table.concat(out)
end

--- The next frame from connection c (c:read_bytes), as { fin, op, masked,
--- payload }; nil when the connection ends before a frame head.
function W.read_frame(c)
  local h = c:read_bytes(2)
  if not h then return nil end
  local b1, b2 = h:byte(1, 2)
  local len = b2 & 0x7f
  if len == 126 then
    len = string.unpack(">I2", c:read_bytes(2))
  elseif len == 127 then
    len = string.unpack(">I8", c:read_bytes(8))
  end
  local payload = len > 0 and c:read_bytes(len) or ""
  return { fin = b1 & 0x80 ~= 0, op = b1 & 0x0f, masked = b2 & 0x80 ~= 0, payload = payload }
end

--- The status code of close frame f, or nil (not a close, or a close without a code).
function W.close_code(f)
  if f and f.op == 8 and #f.payload >= 2 then return (string.unpack(">I2", f.payload)) end
end

return W
