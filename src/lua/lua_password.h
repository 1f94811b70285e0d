#ifndef MH_LUA_PASSWORD_H
#define MH_LUA_PASSWORD_H
/*
 * Password hashing for http.crypto, run on the worker's thread pool
 * (base/workpool.h) so the loop never computes a hash:
 *   password_hash(pw [, opts]) -> an Argon2id PHC string (libargon2), its
 *     parameters in it; opts: memory_kib (19456), time_cost (2), parallelism
 *     (1), OWASP's recommendation; nil, err if hashing failed;
 *   password_verify(pw, hash) -> true | false, for Argon2id hashes and for
 *     Django's pbkdf2_sha256$... (Mbed TLS), so old hashes can be migrated;
 *     false, "malformed hash" for anything else;
 *   needs_rehash(hash [, opts]) -> true unless hash is Argon2id with opts.
 * The two that hash wait like any I/O: they may only be called from a task.
 */
#include <lua.h>

/* Adds the three functions to the table on top of the stack. */
void mh_lua_password_register(lua_State *L);

#endif
