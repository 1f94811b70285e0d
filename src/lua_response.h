#ifndef MH_LUA_RESPONSE_H
#define MH_LUA_RESPONSE_H
/* The `res` userdata ("moonhttp.Response"): status, headers, write, json, redirect. */
#include <lua.h>

/* Creates the metatable in L's registry; expects package `cjson` to be loadable. */
void mh_lua_response_open(lua_State *L);

#endif
