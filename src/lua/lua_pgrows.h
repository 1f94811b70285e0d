#ifndef MH_LUA_PGROWS_H
#define MH_LUA_PGROWS_H
/*
 * "moonhttp.pgrows" (used by lua/moonhttp/pg.lua): the common part of a
 * query's answer read in C. scan() takes, from the connection's input
 * buffer, the messages an extended query's answer is mostly made of
 * (ParseComplete, BindComplete, CloseComplete, DataRow, CommandComplete,
 * ReadyForQuery) and turns DataRows into row tables; it stops before any
 * other message or one not wholly received, which the Lua client reads as
 * before. Nothing here waits or reads a socket.
 */
#include <lua.h>

/* lua_CFunction for package.preload["moonhttp.pgrows"]: pushes the module table. */
int mh_lua_pgrows_open(lua_State *L);

#endif
