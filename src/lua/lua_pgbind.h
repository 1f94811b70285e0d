#ifndef MH_LUA_PGBIND_H
#define MH_LUA_PGBIND_H
/*
 * "moonhttp.pgbind" (used by lua/moonhttp/pg.lua): the batch a query on a
 * prepared statement sends (Bind, Execute, Sync) built in C from the
 * query's Lua values, as one string. The bytes come from wire/pg_wire.c;
 * this file turns Lua values into parameters. Nothing here waits or
 * touches a socket.
 */
#include <lua.h>

/* lua_CFunction for package.preload["moonhttp.pgbind"]: pushes the module table. */
int mh_lua_pgbind_open(lua_State *L);

#endif
