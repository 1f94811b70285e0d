#ifndef MH_LUA_REDIS_RESP_H
#define MH_LUA_REDIS_RESP_H
/*
 * "moonhttp.resp" (used by lua/moonhttp/redis.lua): a Redis reply read in
 * C from the client's input buffer. The bytes are cut by wire/redis_resp.c; this
 * file only builds Lua values. Nothing here waits or reads a socket.
 */
#include <lua.h>

/* lua_CFunction for package.preload["moonhttp.resp"]: pushes the module table. */
int mh_lua_resp_open(lua_State *L);

#endif
