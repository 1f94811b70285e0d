#ifndef MH_LUA_CRYPTO_H
#define MH_LUA_CRYPTO_H
/*
 * The "moonhttp.crypto" module (package.preload): a table with
 *   crypto = { sha256, hmac_sha256, random, equal }   (mbedTLS)
 *   base64 = { encode, decode, encode_url, decode_url }
 *   hex    = { encode, decode }
 * Digests return raw bytes. Decoders return nil, "malformed base64" /
 * "malformed hex" on bad input (client data is not misuse); wrong argument
 * types raise. random(n) draws from a CTR-DRBG owned by this Lua state and
 * (re)seeded from the OS entropy source in the process that first draws, so
 * workers forked from one master never share a stream.
 */
#include <lua.h>

int mh_lua_crypto_open(lua_State *L);

#endif
