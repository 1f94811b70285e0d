/*
 * libFuzzer target over what a PostgreSQL server sends the client: the
 * decoders of lua/moonhttp/pg/proto.lua and types.lua (message heads,
 * ErrorResponse, RowDescription, DataRow, ParameterDescription, the
 * authentication messages, the text forms of arrays, bytea and JSON) and
 * the SCRAM exchange's parsing of server messages. The first byte picks
 * the decoder, the rest is its input. A decoder may reject input by raising
 * a string (pg.lua turns that into "protocol error"); anything else (a
 * non-string error, a crash, a hang) is a finding.
 *
 * libFuzzer's coverage comes from instrumented C, and the Lua interpreter
 * is a system library: so a line hook feeds libFuzzer's extra counters
 * with Lua line-to-line edges, which is what guides it through the Lua
 * decoders.
 */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mh_lua_embedded {
    const char *name;
    const char *src;
    size_t len;
};
extern const struct mh_lua_embedded mh_lua_embedded[];

static const char HARNESS[] =
    "local proto = require 'moonhttp.pg.proto'\n"
    "local types = require 'moonhttp.pg.types'\n"
    "local auth = require 'moonhttp.pg.auth'\n"
    "local crypto = { nonce = function() return 'abc' end,\n"
    "  scram_salted = function() return ('k'):rep(32) end,\n"
    "  scram_proof = function() return 'proof', 'sig' end }\n"
    "local oids = { 16, 17, 20, 23, 700, 701, 114, 3802, 1000, 1001, 1007, 1009, 1022, 199, 25 }\n"
    "local function cols_for(seed)\n"
    "  local cols = {}\n"
    "  for i = 1, 4 do\n"
    "    local oid = oids[(seed + i) % #oids + 1]\n"
    "    cols[i] = { name = 'c' .. i, oid = oid, decode = types.decoder(oid) }\n"
    "  end\n"
    "  return cols\n"
    "end\n"
    "local decoders = {\n"
    "  function(b) return proto.head((b .. '\\0\\0\\0\\0\\0'):sub(1, 5)) end,\n"
    "  function(b) return tostring(proto.parse_fields(b)) end,\n"
    "  proto.parse_row_description,\n"
    "  function(b) return proto.decode_row(b, cols_for(#b), types.null) end,\n"
    "  proto.parse_parameter_description,\n"
    "  proto.parse_notification,\n"
    "  function(b) local code, rest = proto.parse_auth(b); return proto.parse_mechanisms(rest) "
    "end,\n"
    "  function(b) return types.decoder(oids[#b % #oids + 1])(b) end,\n"
    "  function(b) return types.parse_array(b) end,\n"
    "  function(b) local s = auth.scram(crypto, 'pw'); local f = s:final(b); return s:verify(b) "
    "end,\n"
    "}\n"
    "return function(data)\n"
    "  local pick = (data:byte(1) or 0) % #decoders + 1\n"
    "  local ok, err = pcall(decoders[pick], data:sub(2))\n"
    "  if not ok and type(err) ~= 'string' then error('decoder raised a ' .. type(err), 0) end\n"
    "end\n";

static lua_State *L;

__attribute__((section("__libfuzzer_extra_counters"))) static uint8_t lua_edges[1 << 14];
static uintptr_t prev_edge;

static void on_line(lua_State *l, lua_Debug *ar)
{
    lua_getinfo(l, "S", ar);
    uintptr_t here = ((uintptr_t)ar->source * 31u) ^ ((uintptr_t)ar->currentline * 2654435761u);
    lua_edges[(here ^ prev_edge) % sizeof lua_edges]++;
    prev_edge = here >> 1;
}

static int load_embedded(lua_State *l)
{
    const struct mh_lua_embedded *m = lua_touserdata(l, lua_upvalueindex(1));
    if (luaL_loadbuffer(l, m->src, m->len, m->name) != LUA_OK)
        return lua_error(l);
    lua_call(l, 0, 1);
    return 1;
}

static void setup(void)
{
    L = luaL_newstate();
    luaL_openlibs(L);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "preload");
    for (const struct mh_lua_embedded *m = mh_lua_embedded; m->name; m++) {
        lua_pushlightuserdata(L, (void *)m);
        lua_pushcclosure(L, load_embedded, 1);
        lua_setfield(L, -2, m->name);
    }
    lua_pop(L, 2);
    if (luaL_loadbuffer(L, HARNESS, sizeof HARNESS - 1, "=fuzz_pg") != LUA_OK ||
        lua_pcall(L, 0, 1, 0) != LUA_OK) {
        fprintf(stderr, "fuzz_pg setup: %s\n", lua_tostring(L, -1));
        abort();
    }
    lua_setfield(L, LUA_REGISTRYINDEX, "fuzz_pg");
    lua_sethook(L, on_line, LUA_MASKLINE, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!L)
        setup();
    prev_edge = 0;
    lua_getfield(L, LUA_REGISTRYINDEX, "fuzz_pg");
    lua_pushlstring(L, (const char *)data, size);
    if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
        fprintf(stderr, "fuzz_pg: %s\n", lua_tostring(L, -1));
        abort();
    }
    lua_gc(L, LUA_GCSTEP, 0);
    return 0;
}
