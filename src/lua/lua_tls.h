#ifndef MH_LUA_TLS_H
#define MH_LUA_TLS_H
/*
 * TLS between C and Lua: connection facts as Lua values, req:tls() →
 *   { version, cipher, alpn, sni, client_cert = { subject, issuer, serial,
 *     not_after, sans, pem } }
 * (client_cert only when the listener asked for one and the client sent it;
 * alpn and sni only when agreed/sent).
 */
#include <lua.h>
#include <stdbool.h>

#include "transport.h"

/* Pushes the table for t, or nil when t is plain TCP. Returns 1. */
int mh_lua_push_tls(lua_State *L, const struct mh_transport *t);

/*
 * The min_version of the outbound tls options table at idx (http.client,
 * sock:connect, sock:tls_handshake): false for none or "1.2", true for
 * "1.3"; anything else raises `what: tls.min_version: expected "1.2" or "1.3"`,
 * the listener's wording.
 */
bool mh_lua_tls13_only(lua_State *L, int idx, const char *what);

#endif
