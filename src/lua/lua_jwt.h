#ifndef MH_LUA_JWT_H
#define MH_LUA_JWT_H
/*
 * JSON Web Tokens (RFC 7519, JWS compact form of RFC 7515) for http.crypto,
 * HS256 and ES256 only, following RFC 8725's advice:
 *
 *   jwt_sign(claims, key, alg) -> token
 *     alg "HS256": key is a secret of at least 32 bytes (not a PEM key);
 *     alg "ES256": key is a PEM P-256 private key. The header is
 *     {"alg":...,"typ":"JWT"}; claims are encoded with http.json.encode.
 *   jwt_verify(token, key, { alg =, aud =, iss =, leeway = }) -> claims
 *     opts.alg is required and must equal the header's alg (no "none", no
 *     algorithm picked by the token). ES256 takes a PEM public (or private)
 *     key. After the signature: exp and nbf against the clock with `leeway`
 *     seconds (default 0); aud must contain opts.aud, and a token that names
 *     an audience is refused when opts.aud is not given (RFC 7519 4.1.3);
 *     iss must equal opts.iss when given.
 *     Runtime failures are nil plus one of the fixed strings "malformed
 *     token", "algorithm not allowed", "bad signature", "token expired",
 *     "token not yet valid", "wrong audience", "wrong issuer".
 * Misuse raises: a missing or unknown alg, an unknown option, a short
 * secret, a key that does not fit the algorithm.
 */
#include <lua.h>

/* Adds jwt_sign and jwt_verify to the table on top of the stack. Needs `require`
 * (it keeps cjson.safe's decoder). */
void mh_lua_jwt_register(lua_State *L);

#endif
