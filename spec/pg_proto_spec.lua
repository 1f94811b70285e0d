-- The PostgreSQL wire protocol and type codecs (lua/moonhttp/pg/proto.lua,
-- types.lua), byte for byte and without a server; and SCRAM-SHA-256
-- against RFC 7677's test vector through the real binary (the proofs are
-- computed by moonhttp.pgauth, in C).
package.path = "lua/?.lua;" .. package.path
local H = require "helper"
local proto = require "moonhttp.pg.proto"
local types = require "moonhttp.pg.types"

local function hex(s) return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end)) end

describe("pg wire protocol", function()
  -- { what, built message, expected bytes (hex) }
  local frontend = {
    { "SSLRequest", proto.ssl_request, "0000000804d2162f" },
    { "CancelRequest", proto.cancel(1234, -5), "0000001004d2162e000004d2fffffffb" },
    { "Sync", proto.sync, "5300000004" },
    { "Terminate", proto.terminate, "5800000004" },
    { "Query", proto.query("select 1"), "510000000d" .. hex("select 1") .. "00" },
    { "PasswordMessage", proto.password("pw"), "700000000770770" .. "0" },
    { "SASLInitialResponse", proto.sasl_initial("M", "abc"), "700000000d4d0000000003616263" },
    { "Startup", proto.startup({ { "user", "u" } }), "0000001000030000" .. hex("user") .. "00" .. hex("u") .. "0000" },
    { "Parse with types", proto.parse("s1", "q", { 0, 17 }),
      "500000001373310071000002" .. "00000000" .. "00000011" },
    { "Parse without types", proto.parse("", "q", {}), "50000000090071000000" },
    { "Describe", proto.describe_statement("s1"), "440000000853733100" },
    { "Execute", proto.execute(""), "45000000090000000000" },
    { "Execute+Sync (pg.lua's batch tail)", proto.EXECUTE_SYNC, "45000000090000000000" .. "5300000004" },
    { "Close", proto.close_statement("s1"), "430000000853733100" },
    { "Bind text + NULL", proto.bind("", "s1", 2, { "ab", nil }, { 0, 0 }),
      "4200000018" .. "00" .. "733100" .. "0000" .. "0002" .. "000000026162" .. "ffffffff" .. "0000" },
    { "Bind with a binary parameter", proto.bind("", "", 1, { "\0" }, { 1 }),
      "4200000013" .. "00" .. "00" .. "00010001" .. "0001" .. "0000000100" .. "0000" },
  }
  for _, row in ipairs(frontend) do
    it("builds " .. row[1], function() assert.equal(row[3], hex(row[2])) end)
  end

  it("refuses NUL in SQL text and names", function()
    assert.has_error(function() proto.query("select 1\0; drop table x") end,
      "pg: SQL text must not contain NUL")
    assert.has_error(function() proto.parse("a\0", "q", {}) end)
  end)

  it("reads message heads and refuses absurd lengths", function()
    assert.same({ "Z", 1 }, { proto.head("Z\0\0\0\5") })
    assert.same({ nil, "protocol error" }, { proto.head("Z\0\0\0\3") })
    assert.same({ nil, "protocol error" }, { proto.head("D\127\255\255\255") })
  end)

  it("parses ErrorResponse fields into an error with a one-line tostring", function()
    local body = "SERROR\0VERROR\0C42P01\0Mrelation \"nope\" does not exist\0P15\0Dmore\0Hhint\0\0"
    local e = proto.parse_fields(body)
    assert.equal("42P01", e.code)
    assert.equal('relation "nope" does not exist', e.message)
    assert.equal(15, e.position)
    assert.equal("more", e.detail)
    assert.equal("hint", e.hint)
    assert.equal("ERROR", e.severity)
    assert.equal('ERROR: relation "nope" does not exist (SQLSTATE 42P01) DETAIL: more', tostring(e))
    e.detail = "two\nlines"
    assert.equal('ERROR: relation "nope" does not exist (SQLSTATE 42P01) DETAIL: two lines', tostring(e))
  end)

  it("parses RowDescription and decodes DataRow with NULLs", function()
    local rd = string.pack(">i2", 2)
      .. string.pack(">zI4i2I4i2i4i2", "id", 1, 1, 23, 4, -1, 0)
      .. string.pack(">zI4i2I4i2i4i2", "name", 1, 2, 25, -1, -1, 0)
    local cols = proto.parse_row_description(rd)
    assert.equal("id", cols[1].name)
    assert.equal(23, cols[1].oid)
    assert.equal(25, cols[2].oid)
    for _, c in ipairs(cols) do c.decode = types.decoder(c.oid) end
    local row = proto.decode_row(string.pack(">i2", 2) .. string.pack(">s4", "42") .. "\255\255\255\255",
      cols, types.null)
    assert.equal(42, row.id)
    assert.equal(types.null, row.name)
  end)

  it("counts affected rows from command tags", function()
    assert.equal(3, proto.affected("INSERT 0 3"))
    assert.equal(2, proto.affected("UPDATE 2"))
    assert.equal(0, proto.affected("DELETE 0"))
    assert.equal(5, proto.affected("SELECT 5"))
    assert.is_nil(proto.affected("CREATE TABLE"))
  end)

  it("parses notifications, backend keys and parameter status", function()
    assert.same({ pid = 7, channel = "ch", payload = "hi" }, proto.parse_notification(string.pack(">I4zz", 7, "ch", "hi")))
    assert.same({ 7, -1 }, { proto.parse_backend_key(string.pack(">I4i4", 7, -1)) })
    assert.same({ "TimeZone", "UTC" }, { proto.parse_parameter_status("TimeZone\0UTC\0") })
    assert.same({ "SCRAM-SHA-256", "SCRAM-SHA-256-PLUS" }, proto.parse_mechanisms("SCRAM-SHA-256\0SCRAM-SHA-256-PLUS\0\0"))
  end)

  it("quotes identifiers", function()
    assert.equal('"a""b"', proto.quote_ident('a"b'))
  end)
end)

describe("pg types", function()
  -- { type OID, text from the server, expected Lua value }
  local decoded = {
    { 16, "t", true }, { 16, "f", false },
    { 21, "-32768", -32768 }, { 23, "2147483647", 2147483647 },
    { 20, "9223372036854775807", math.maxinteger }, { 20, "-9223372036854775808", math.mininteger },
    { 700, "1.5", 1.5 }, { 701, "-Infinity", -math.huge }, { 701, "1e+308", 1e308 },
    { 1700, "123456789012345678901234567890.5", "123456789012345678901234567890.5" },
    { 25, "text", "text" }, { 1043, "v", "v" }, { 19, "name", "name" },
    { 17, "\\x00ff41", "\0\255A" }, { 17, "\\x", "" },
    { 2950, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" },
    { 1082, "2024-02-29", "2024-02-29" }, { 1184, "2024-01-02 03:04:05+00", "2024-01-02 03:04:05+00" },
    { 114, '{"a":[1,2]}', { a = { 1, 2 } } }, { 3802, '"s"', "s" },
    { 1007, "{1,NULL,3}", { 1, types.null, 3 } },
    { 1009, '{"a,b","\\"q\\"",NULL,"NULL",back\\\\slash}', { "a,b", '"q"', types.null, "NULL", "back\\slash" } },
    { 1007, "{{1,2},{3,4}}", { { 1, 2 }, { 3, 4 } } },
    { 1007, "[0:1]={5,6}", { 5, 6 } },
    { 1000, "{t,f}", { true, false } },
    { 1001, '{"\\\\x00ff"}', { "\0\255" } },
    { 1009, "{}", {} },
    { 99999, "unknown type", "unknown type" },
  }
  for _, row in ipairs(decoded) do
    it("decodes oid " .. row[1] .. " " .. row[2], function()
      assert.same(row[3], types.decoder(row[1])(row[2]))
    end)
  end

  it("decodes NaN", function()
    local v = types.decoder(701)("NaN")
    assert.is_true(v ~= v)
  end)

  it("refuses malformed arrays", function()
    assert.has_error(function() types.parse_array('{"open') end)
    assert.has_error(function() types.parse_array("{1,2") end)
    assert.has_error(function() types.parse_array("{1}x") end)
  end)

  -- { Lua value, expected text, format, type OID }
  local encoded = {
    { 42, "42", 0, 0 }, { -1.5, "-1.5", 0, 0 }, { math.huge, "Infinity", 0, 0 },
    { true, "true", 0, 0 }, { "it's", "it's", 0, 0 }, { "\255\254", "\255\254", 0, 0 },
    { "a\0b", "a\0b", 0, 0 }, { types.bytea("\\x41"), "\\x41", 1, 17 },
    { types.json({ a = 1 }), '{"a":1}', 0, 0 },
    { { 1, 2, 3 }, '{"1","2","3"}', 0, 0 },
    { { "a,b", 'q"', types.null, "\\" }, '{"a,b","q\\"",NULL,"\\\\"}', 0, 0 },
    { { { 1 }, { 2 } }, '{{"1"},{"2"}}', 0, 0 },
    { {}, "{}", 0, 0 },
  }
  for i, row in ipairs(encoded) do
    it("encodes parameter case " .. i, function()
      assert.same({ row[2], row[3], row[4] }, { types.encode_param(row[1], 1) })
    end)
  end

  it("encodes nil and null as NULL", function()
    assert.same({ nil, 0, 0 }, { types.encode_param(nil, 1) })
    assert.same({ nil, 0, 0 }, { types.encode_param(types.null, 1) })
  end)

  it("raises on parameters it cannot send", function()
    assert.has_error(function() types.encode_param(print, 2) end, "pg: parameter $2: cannot send a function")
    assert.has_error(function() types.encode_param({ a = 1 }, 1) end,
      "pg: parameter $1: a table is sent as an array; use pg.json(v) for objects")
    assert.has_error(function() types.encode_param({ "a\0" }, 3) end,
      "pg: parameter $3: array elements cannot contain NUL (use pg.bytea)")
  end)
end)

describe("pg SCRAM-SHA-256", function()
  it("matches RFC 7677's test vector and checks the server signature", function()
    local path = H.script([[
local auth = require "moonhttp.pg.auth"
local crypto = require "moonhttp.pgauth"
local s = auth.scram(crypto, "pencil", { user = "user", nonce = "rOprNGfwEbeRWgbNEkqO" })
print("first", s:first())
print("final", s:final("r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"))
print("verify", s:verify("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="))
print("forged", s:verify("v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="))
local s2 = auth.scram(crypto, "pencil", { nonce = "abc" })
print("foreign nonce", s2:final("r=xyz123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"))
print("bad salt", s2:final("r=abcdef,s=!!!,i=4096"))
print("bad count", s2:final("r=abcdef,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=0"))
print("md5", crypto.md5_password("u", "p", "abcd"))
print("nonce", #crypto.nonce(), crypto.nonce() ~= crypto.nonce())
]])
    local code, out = H.run({ "run", path })
    os.remove(path)
    assert.equal(0, code, out)
    assert.matches("first\tn,,n=user,r=rOprNGfwEbeRWgbNEkqO\n", out, 1, true)
    assert.matches("final\tc=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
      .. "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=\n", out, 1, true)
    assert.matches("verify\ttrue\n", out, 1, true)
    assert.matches("forged\tnil\tSCRAM: server signature mismatch\n", out, 1, true)
    assert.matches("foreign nonce\tnil\tSCRAM: server nonce does not extend ours\n", out, 1, true)
    assert.matches("bad salt\tnil\tSCRAM: bad SCRAM salt\n", out, 1, true)
    assert.matches("bad count\tnil\tSCRAM: bad SCRAM iteration count\n", out, 1, true)
    -- md5(md5("p" .. "u") .. "abcd"), as PostgreSQL's md5 method defines it
    assert.matches("md5\tmd5fa55bd30a96b8d5bd8215eee7c50a918\n", out, 1, true)
    assert.matches("nonce\t24\ttrue\n", out, 1, true)
  end)
end)
