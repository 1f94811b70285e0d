#ifndef MH_LUA_SHARED_H
#define MH_LUA_SHARED_H
/*
 * http.shared.<name>: the Lua face of the shared dicts (base/shm_dict.h).
 * `http.shared.cache` gives one handle per name and state; its methods
 * (get, set, add, replace, incr, delete, ttl, expire, keys, flush_all,
 * free_space) follow OpenResty's ngx.shared.DICT: runtime failures are
 * nil, err with the dict's short error strings ("no memory", "exists",
 * "not found", "not a number"), misuse (bad argument types, an undeclared
 * dict, use before the server started) raises. TTLs are in seconds (0:
 * never). None of the methods yields: each holds the dict's lock for one
 * short operation, and nothing that can raise runs while it is held.
 */
#include <lua.h>

/* Sets core.shared (the lazy table of handles) on the table at the top of L. */
void mh_lua_shared_open(lua_State *L);

#endif
