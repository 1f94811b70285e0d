#ifndef MH_LUA_CLIENT_H
#define MH_LUA_CLIENT_H
/*
 * The Lua face of the outbound HTTP client (see client.h for the engine):
 * core.fetch(client|nil, url, opts), core.client(opts),
 * core.client_stats([client]), core.client_close(client), and the
 * "moonhttp.ClientResponse" userdata.
 */
#include <lua.h>

struct mh_task;

/* Registers the client functions into the table on top of L (moonhttp.core). */
void mh_client_open(lua_State *L);

#endif
