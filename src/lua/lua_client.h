#ifndef MH_LUA_CLIENT_H
#define MH_LUA_CLIENT_H
/*
 * The Lua face of the outbound HTTP client (see client.h for the engine):
 * core.fetch(client|nil, url, opts), core.proxy_fetch (http.proxy's
 * exchange with a head built by core.proxy_request), core.client(opts),
 * core.client_stats([client]), core.client_close(client), and the
 * "moonhttp.ClientResponse" userdata.
 */
#include <lua.h>

struct mh_task;
struct mh_client_req;

/* Registers the client functions into the table on top of L (moonhttp.core). */
void mh_client_open(lua_State *L);

/*
 * The exchange of the moonhttp.ClientResponse at idx (its head and status),
 * or NULL once the response is closed. Raises if idx is not one.
 */
const struct mh_client_req *mh_lua_client_exchange(lua_State *L, int idx);

/*
 * The exchange of the open moonhttp.ClientResponse at idx, for a C pump of
 * its body (lua_proxy_body.c), which takes its on_event while it runs and
 * gives it back. Raises for a closed response or one a task waits on.
 */
struct mh_client_req *mh_lua_client_pump(lua_State *L, int idx);

#endif
