#ifndef MH_LUA_TYPE_H
#define MH_LUA_TYPE_H
/*
 * The metatable of a userdata type of the bindings ("moonhttp.Socket"),
 * registered the same way by every binding: once per Lua state, under the
 * name luaL_checkudata checks, so a handle of another type (or a plain table)
 * passed where this one is expected raises instead of being read as the
 * wrong struct.
 */
#include <lauxlib.h>
#include <lua.h>

struct mh_lua_type {
    const char *name;        /* the metatable's registry name (and __name) */
    const luaL_Reg *methods; /* NULL: no __index; else a new table of these */
    /* Non-NULL: __index is this function with the methods table as its upvalue
     * (a type that also answers fields, as a response's .status). */
    lua_CFunction index;
    const luaL_Reg *meta; /* __gc, __close, __tostring, ... (NULL: none) */
};

/*
 * Creates t's metatable unless this state has it already; no function gets
 * an upvalue but index. Leaves the stack as it found it. The few bindings
 * whose methods take the metatable itself as an upvalue (req, res, shared
 * dicts, metrics) build theirs by hand.
 */
void mh_lua_register_type(lua_State *L, const struct mh_lua_type *t);

#endif
