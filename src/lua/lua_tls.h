#ifndef MH_LUA_TLS_H
#define MH_LUA_TLS_H
/*
 * TLS connection facts as Lua values: req:tls() →
 *   { version, cipher, alpn, sni, client_cert = { subject, issuer, serial,
 *     not_after, sans, pem } }
 * (client_cert only when the listener asked for one and the client sent it;
 * alpn and sni only when agreed/sent).
 */
#include <lua.h>

#include "transport.h"

/* Pushes the table for t, or nil when t is plain TCP. Returns 1. */
int mh_lua_push_tls(lua_State *L, const struct mh_transport *t);

#endif
