#include "lua_multipart.h"

#include "buf.h"
#include "lua_type.h"
#include "multipart.h"

#include <lauxlib.h>

#define PARSER_MT "moonhttp.MultipartParser"

struct parser {
    struct mh_multipart mp;
    struct mh_buf pending; /* bytes fed and not yet consumed by mp */
    bool eof;
};

static struct parser *check_parser(lua_State *L)
{
    return luaL_checkudata(L, 1, PARSER_MT);
}

static int parser_gc(lua_State *L)
{
    mh_buf_free(&check_parser(L)->pending);
    return 0;
}

static int parser_feed(lua_State *L)
{
    struct parser *p = check_parser(L);
    if (lua_isnoneornil(L, 2)) {
        p->eof = true;
        return 0;
    }
    size_t len;
    const char *s = luaL_checklstring(L, 2, &len);
    luaL_argcheck(L, !p->eof, 2, "fed after the end of the body");
    if (mh_buf_append(&p->pending, s, len) < 0)
        return luaL_error(L, "multipart: out of memory");
    return 0;
}

static int parser_next(lua_State *L)
{
    struct parser *p = check_parser(L);
    struct mh_multipart_ev ev;
    size_t used = mh_multipart_parse(&p->mp, p->pending.data ? p->pending.data : "", p->pending.len,
                                     p->eof, &ev);
    int n = 1;
    switch (ev.type) {
    case MH_MP_NEED_MORE:
        lua_pushnil(L);
        break;
    case MH_MP_PART:
        lua_pushliteral(L, "part");
        break;
    case MH_MP_HEADER:
        lua_pushliteral(L, "header");
        lua_pushlstring(L, ev.name, ev.name_len);
        lua_pushlstring(L, ev.data, ev.data_len);
        n = 3;
        break;
    case MH_MP_BODY:
        lua_pushliteral(L, "body");
        break;
    case MH_MP_DATA:
        lua_pushliteral(L, "data");
        lua_pushlstring(L, ev.data, ev.data_len);
        n = 2;
        break;
    case MH_MP_PART_END:
        lua_pushliteral(L, "end");
        break;
    case MH_MP_DONE:
        lua_pushliteral(L, "done");
        break;
    case MH_MP_ERROR:
        lua_pushliteral(L, "error");
        lua_pushstring(L, p->mp.err ? p->mp.err : mh_multipart_err_malformed);
        n = 2;
        break;
    }
    mh_buf_consume(&p->pending, used);
    return n;
}

static int l_multipart(lua_State *L)
{
    size_t len;
    const char *boundary = luaL_checklstring(L, 1, &len);
    lua_Integer max_header = luaL_checkinteger(L, 2);
    lua_Integer max_parts = luaL_checkinteger(L, 3);
    luaL_argcheck(L, max_header > 0, 2, "must be positive");
    luaL_argcheck(L, max_parts > 0 && max_parts <= 1000000, 3, "must be 1..1000000");
    struct parser *p = lua_newuserdatauv(L, sizeof *p, 0);
    p->pending = (struct mh_buf){0};
    p->eof = false;
    luaL_setmetatable(L, PARSER_MT);
    if (mh_multipart_init(&p->mp, boundary, len, (size_t)max_header, (unsigned)max_parts) < 0) {
        lua_pushnil(L);
        lua_pushliteral(L, "bad multipart boundary");
        return 2;
    }
    return 1;
}

void mh_lua_multipart_open(lua_State *L)
{
    static const luaL_Reg methods[] = {{"feed", parser_feed}, {"next", parser_next}, {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", parser_gc}, {"__close", parser_gc}, {NULL, NULL}};
    mh_lua_register_type(
        L, &(struct mh_lua_type){.name = PARSER_MT, .methods = methods, .meta = meta});
    lua_pushcfunction(L, l_multipart);
}
