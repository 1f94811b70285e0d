/*
 * moonhttp.pgauth: the few primitives of PostgreSQL authentication, on
 * mbedTLS. The SCRAM exchange itself (message parsing, nonce checks) is
 * Lua, in lua/moonhttp/pg/auth.lua; this file only turns secrets into
 * proofs. Bad input from the server (undecodable salt, absurd iteration
 * count) is `nil, err`, never a raise: a hostile server must not crash a
 * handler. Salted passwords are returned so the Lua side can cache them:
 * PBKDF2 with 4096 rounds runs on the event loop and should run once per
 * pool, not once per connection.
 */
#include "lua_pgauth.h"

#include <lauxlib.h>
#include <mbedtls/base64.h>
#include <mbedtls/md.h>
#include <mbedtls/pkcs5.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define SHA256_LEN     32
#define MAX_SALT       256
#define MAX_ITERATIONS 1000000 /* PostgreSQL's default is 4096; more would stall the loop */
#define NONCE_BYTES    18      /* 24 base64 characters, as libpq */

static const mbedtls_md_info_t *sha256_info(void)
{
    return mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
}

static void hmac(const unsigned char *key, size_t klen, const char *msg, size_t mlen,
                 unsigned char out[SHA256_LEN])
{
    mbedtls_md_hmac(sha256_info(), key, klen, (const unsigned char *)msg, mlen, out);
}

static void push_base64(lua_State *L, const unsigned char *data, size_t len)
{
    unsigned char out[128];
    size_t olen = 0;
    mbedtls_base64_encode(out, sizeof out, &olen, data, len);
    lua_pushlstring(L, (const char *)out, olen);
}

/* scram_salted(password, salt_base64, iterations) → SaltedPassword (32 raw bytes) | nil, err */
static int l_scram_salted(lua_State *L)
{
    size_t plen, slen;
    const char *password = luaL_checklstring(L, 1, &plen);
    const char *salt64 = luaL_checklstring(L, 2, &slen);
    lua_Integer iterations = luaL_checkinteger(L, 3);
    if (iterations < 1 || iterations > MAX_ITERATIONS) {
        luaL_pushfail(L);
        lua_pushliteral(L, "bad SCRAM iteration count");
        return 2;
    }
    unsigned char salt[MAX_SALT];
    size_t saltlen = 0;
    if (mbedtls_base64_decode(salt, sizeof salt, &saltlen, (const unsigned char *)salt64, slen) !=
            0 ||
        saltlen == 0) {
        luaL_pushfail(L);
        lua_pushliteral(L, "bad SCRAM salt");
        return 2;
    }
    unsigned char salted[SHA256_LEN];
    int rc = mbedtls_pkcs5_pbkdf2_hmac_ext(MBEDTLS_MD_SHA256, (const unsigned char *)password, plen,
                                           salt, saltlen, (unsigned int)iterations, SHA256_LEN,
                                           salted);
    if (rc != 0) {
        luaL_pushfail(L);
        lua_pushliteral(L, "SCRAM key derivation failed");
        return 2;
    }
    lua_pushlstring(L, (const char *)salted, sizeof salted);
    return 1;
}

/*
 * scram_proof(salted_password, auth_message) → ClientProof, ServerSignature (both base64).
 * ClientProof = ClientKey XOR HMAC(H(ClientKey), AuthMessage), with
 * ClientKey = HMAC(SaltedPassword, "Client Key"); ServerSignature =
 * HMAC(HMAC(SaltedPassword, "Server Key"), AuthMessage).
 */
static int l_scram_proof(lua_State *L)
{
    size_t slen, alen;
    const char *salted = luaL_checklstring(L, 1, &slen);
    const char *auth = luaL_checklstring(L, 2, &alen);
    luaL_argcheck(L, slen == SHA256_LEN, 1, "salted password must be 32 bytes");
    unsigned char client_key[SHA256_LEN], stored_key[SHA256_LEN], sig[SHA256_LEN];
    unsigned char server_key[SHA256_LEN], server_sig[SHA256_LEN];
    hmac((const unsigned char *)salted, slen, "Client Key", 10, client_key);
    mbedtls_md(sha256_info(), client_key, sizeof client_key, stored_key);
    hmac(stored_key, sizeof stored_key, auth, alen, sig);
    for (int i = 0; i < SHA256_LEN; i++)
        client_key[i] ^= sig[i];
    hmac((const unsigned char *)salted, slen, "Server Key", 10, server_key);
    hmac(server_key, sizeof server_key, auth, alen, server_sig);
    push_base64(L, client_key, sizeof client_key);
    push_base64(L, server_sig, sizeof server_sig);
    return 2;
}

static void md5_hex(const char *a, size_t alen, const char *b, size_t blen, char out[33])
{
    const mbedtls_md_info_t *md5 = mbedtls_md_info_from_type(MBEDTLS_MD_MD5);
    mbedtls_md_context_t ctx;
    unsigned char digest[16];
    mbedtls_md_init(&ctx);
    mbedtls_md_setup(&ctx, md5, 0);
    mbedtls_md_starts(&ctx);
    mbedtls_md_update(&ctx, (const unsigned char *)a, alen);
    mbedtls_md_update(&ctx, (const unsigned char *)b, blen);
    mbedtls_md_finish(&ctx, digest);
    mbedtls_md_free(&ctx);
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", digest[i]);
}

/* md5_password(user, password, salt) → "md5" .. hex(md5(hex(md5(password .. user)) .. salt)) */
static int l_md5_password(lua_State *L)
{
    size_t ulen, plen, slen;
    const char *user = luaL_checklstring(L, 1, &ulen);
    const char *password = luaL_checklstring(L, 2, &plen);
    const char *salt = luaL_checklstring(L, 3, &slen);
    char inner[33], outer[36] = "md5";
    md5_hex(password, plen, user, ulen, inner);
    md5_hex(inner, 32, salt, slen, outer + 3);
    lua_pushlstring(L, outer, 35);
    return 1;
}

/* nonce() → 24 printable characters from the kernel's random source (no ',' in base64). */
static int l_nonce(lua_State *L)
{
    unsigned char raw[NONCE_BYTES];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return luaL_error(L, "getrandom failed");
    push_base64(L, raw, sizeof raw);
    return 1;
}

int mh_lua_pgauth_open(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"scram_salted", l_scram_salted},
        {"scram_proof", l_scram_proof},
        {"md5_password", l_md5_password},
        {"nonce", l_nonce},
        {NULL, NULL},
    };
    luaL_newlib(L, fns);
    return 1;
}
