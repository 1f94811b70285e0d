#ifndef MH_LUA_WS_H
#define MH_LUA_WS_H
/*
 * The `ws` userdata ("moonhttp.WebSocket") over http/ws.c's session:
 * ws:receive() and ws:send() wait (receive for a message, send under
 * back-pressure), ws:ping(), ws:close(), ws.protocol, ws.state. The session
 * lives as long as the handler that switched the request: when it returns
 * (or fails: close 1011) the socket closes and `ws` answers nil, "closed".
 */
#include <lua.h>

struct mh_req;

/* Creates the metatable in L's registry. */
void mh_lua_ws_open(lua_State *L);

/* req:websocket([opts]) for the request r (req at 1, opts at 2). */
int mh_lua_ws_start(lua_State *L, struct mh_req *r);

/* Adds the client's helpers to the core table at the top of L: ws_accept, ws_mask. */
void mh_lua_ws_core_open(lua_State *L);

#endif
