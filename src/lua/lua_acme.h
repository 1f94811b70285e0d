#ifndef MH_LUA_ACME_H
#define MH_LUA_ACME_H
/*
 * core.acme: the cryptography of an ACME client (RFC 8555), done with Mbed TLS.
 * The ACME client (lua/moonhttp/acme.lua) builds the protocol on these:
 *   key_new()                      -> PEM of a fresh ECDSA P-256 private key
 *   jwk(key_pem)                   -> RFC 7638 canonical JWK JSON, its base64url SHA-256
 *   sign_es256(key_pem, input)     -> JWS ES256 signature: raw r||s, base64url
 *   csr(key_pem, { name, ... })    -> DER certificate request, CN = names[1], SAN = all
 *   alpn_cert(name, key_auth)      -> cert PEM, key PEM of the RFC 8737 validation cert
 *   cert_info(pem_chain)           -> { not_before, not_after, names, serial, aki } of the leaf
 *   install(listener, cert, key)   -> true: PEM files become what new handshakes on the
 *                                     listener (1-based in `listen`, an ACME one) get, in
 *                                     this worker; open connections keep theirs
 * Bad data (a PEM that does not parse, no names, a name that is not a DNS
 * name) answers nil, message; only wrong argument types raise. Randomness
 * comes from PSA's generator, reinitialised after fork() by
 * mh_tls_crypto_init, so two workers never draw the same key.
 */
#include <lua.h>

/* Sets core.acme on the table at the top of the stack. */
void mh_lua_acme_open(lua_State *L);

#endif
