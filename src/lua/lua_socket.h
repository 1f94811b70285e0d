#ifndef MH_LUA_SOCKET_H
#define MH_LUA_SOCKET_H
/*
 * The Lua face of outbound sockets (net/socket.h for the byte stream):
 * core.tcp() → a "moonhttp.Socket" with connect, tls_handshake, send,
 * receive, receive_until, settimeouts, setdeadline, keepalive, reused
 * and close.
 *
 * Every waiting method follows the one yield template (lua_sched.h) and
 * works in any task and in the user's coroutines inside it. Runtime
 * failures are `nil, err` with the fixed strings of socket.h ("timeout",
 * "closed", "connection refused", ...; TLS failures start with "tls: "),
 * receive adds the bytes it had as a third value. Misuse raises.
 *
 * A connected socket belongs to the task that connected it and is closed
 * when that task ends; close, <close> and __gc are one idempotent function.
 * Idle connections are pooled per generation by key (host:port, or
 * opts.pool), with their TLS sessions kept for resumption.
 */
#include <lua.h>

/* Registers tcp into the table on top of L (moonhttp.core). */
void mh_socket_open(lua_State *L);

#endif
