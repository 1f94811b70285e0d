#ifndef MH_LUA_REQUEST_H
#define MH_LUA_REQUEST_H
/* The `req` userdata ("moonhttp.Request"): fields and methods of DESIGN.md §2. */
#include <lua.h>

/* Its metatable's name, for luaL_checkudata outside the per-request methods. */
#define MH_REQUEST_MT "moonhttp.Request"

/* Registry key (light userdata) of the metatable, for fast lookup per request. */
extern const char mh_request_mt_key;

/* Creates the metatable in L's registry. */
void mh_lua_request_open(lua_State *L);

#endif
