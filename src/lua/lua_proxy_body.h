#ifndef MH_LUA_PROXY_BODY_H
#define MH_LUA_PROXY_BODY_H
/*
 * http.proxy's bodies in C (lua_proxy_body.c): core.proxy_upload sends the
 * request's body upstream, core.proxy_relay the upstream's body and
 * trailers down, each with back-pressure and no Lua per chunk.
 */
#include <lua.h>

struct mh_req;
struct mh_handler;

/* Adds proxy_upload and proxy_relay to the core table at the top of L. */
void mh_lua_proxy_body_open(lua_State *L);

/*
 * The handler behind a body pump running on r, or NULL when none runs: a
 * graceful stop looks past the pump to tell that handler's task.
 */
const struct mh_handler *mh_lua_proxy_body_inner(const struct mh_req *r);

#endif
