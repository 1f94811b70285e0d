#ifndef MH_LUA_RELAY_H
#define MH_LUA_RELAY_H
/*
 * core.relay: the byte pump behind http.relay_upgrade (docs/websocket-proxy.md).
 * core.relay(req, sock, status, headers, idle_timeout, max_buffer) switches the
 * handler's own request (status and the { name, value, ... } headers as its
 * 101 or RFC 8441 200), relays between it and the connected http.tcp() socket
 * until one side closes or the relay is idle, and returns true, why ("client
 * closed", "upstream closed", "idle"), bytes up, bytes down; or nil, err when
 * the request cannot switch. The socket stays the caller's (to close).
 */
#include <lua.h>

/* Adds relay to the core table at the top of L. */
void mh_lua_relay_core_open(lua_State *L);

#endif
