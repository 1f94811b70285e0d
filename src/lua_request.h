#ifndef MH_LUA_REQUEST_H
#define MH_LUA_REQUEST_H
/* The `req` userdata ("moonhttp.Request"): fields and methods of DESIGN.md §2. */
#include <lua.h>

/* Creates the metatable in L's registry. */
void mh_lua_request_open(lua_State *L);

#endif
