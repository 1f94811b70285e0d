#ifndef MH_LUA_RESPONSE_H
#define MH_LUA_RESPONSE_H
/* The `res` userdata ("moonhttp.Response"): status, headers, write, json, redirect. */
#include <lua.h>

/* Registry key (light userdata) of the metatable, for fast lookup per request. */
extern const char mh_response_mt_key;

/* Creates the metatable in L's registry; expects package `cjson` to be loadable. */
void mh_lua_response_open(lua_State *L);

/* Adds reset_for_error(res) to the table on top of L (moonhttp.core). */
void mh_lua_response_open_core(lua_State *L);

#endif
