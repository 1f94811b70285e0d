#ifndef MH_LUA_PGAUTH_H
#define MH_LUA_PGAUTH_H
/*
 * The cryptography PostgreSQL authentication needs, as the Lua module
 * "moonhttp.pgauth" (used by lua/moonhttp/pg/auth.lua): SCRAM-SHA-256
 * (RFC 5802 / RFC 7677) key derivation and proofs, the md5 password hash,
 * and client nonces. Nothing here waits; none of it is generic crypto for
 * handlers (that is http.crypto).
 */
#include <lua.h>

/* lua_CFunction for package.preload["moonhttp.pgauth"]: pushes the module table. */
int mh_lua_pgauth_open(lua_State *L);

#endif
