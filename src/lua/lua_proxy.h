#ifndef MH_LUA_PROXY_H
#define MH_LUA_PROXY_H
/*
 * http.proxy's heads in C (lua_proxy.c): core.proxy_request builds the
 * upstream request head from a req, core.proxy_response copies the upstream
 * response head into a res. lua/moonhttp/proxy.lua calls them on its plain
 * path (no request or response hook).
 */
#include <lua.h>

/* Adds proxy_request and proxy_response to the core table at the top of L. */
void mh_lua_proxy_open(lua_State *L);

#endif
