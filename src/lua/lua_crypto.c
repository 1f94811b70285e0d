#include "lua_password.h"
#include "lua_crypto.h"
#include "lua_jwt.h"

#include "codec.h"
#include "lua_type.h"

#include <lauxlib.h>
#include <mbedtls/constant_time.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/md.h>
#include <mbedtls/sha256.h>
#include <string.h>
#include <unistd.h>

#define DRBG_MT    "moonhttp.DRBG"
#define RANDOM_MAX (1 << 20) /* bytes per call: a guard against typos like random(1e9) */

static const char *const err_base64 = "malformed base64";
static const char *const err_hex = "malformed hex";

static int l_sha256(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    unsigned char out[32];
    mbedtls_sha256((const unsigned char *)s, len, out, 0);
    lua_pushlstring(L, (const char *)out, sizeof out);
    return 1;
}

static int l_hmac_sha256(lua_State *L)
{
    size_t klen, len;
    const char *key = luaL_checklstring(L, 1, &klen);
    const char *s = luaL_checklstring(L, 2, &len);
    unsigned char out[32];
    if (mbedtls_md_hmac(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256), (const unsigned char *)key,
                        klen, (const unsigned char *)s, len, out) != 0)
        return luaL_error(L, "http.crypto.hmac_sha256: mbedTLS failed");
    lua_pushlstring(L, (const char *)out, sizeof out);
    return 1;
}

/* Compares in time that depends only on the lengths; different lengths are unequal. */
static int l_equal(lua_State *L)
{
    size_t alen, blen;
    const char *a = luaL_checklstring(L, 1, &alen);
    const char *b = luaL_checklstring(L, 2, &blen);
    lua_pushboolean(L, alen == blen && mbedtls_ct_memcmp(a, b, alen) == 0);
    return 1;
}

/*
 * The DRBG is a userdata (upvalue 1 of random) rather than a process global:
 * it dies with its Lua state. `pid` records which process seeded it; a Lua
 * state created before fork() is reseeded on its first draw in each child.
 */
struct drbg {
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context ctr;
    pid_t pid; /* 0: not seeded */
};

static int drbg_gc(lua_State *L)
{
    struct drbg *d = luaL_checkudata(L, 1, DRBG_MT);
    if (d->pid) {
        mbedtls_ctr_drbg_free(&d->ctr);
        mbedtls_entropy_free(&d->entropy);
        d->pid = 0;
    }
    return 0;
}

static const char *drbg_ready(struct drbg *d)
{
    pid_t pid = getpid();
    if (d->pid == pid)
        return NULL;
    if (d->pid) {
        mbedtls_ctr_drbg_free(&d->ctr);
        mbedtls_entropy_free(&d->entropy);
        d->pid = 0;
    }
    mbedtls_entropy_init(&d->entropy);
    mbedtls_ctr_drbg_init(&d->ctr);
    static const char personal[] = "moonhttp worker";
    char nonce[sizeof personal + sizeof pid];
    memcpy(nonce, personal, sizeof personal);
    memcpy(nonce + sizeof personal, &pid, sizeof pid);
    if (mbedtls_ctr_drbg_seed(&d->ctr, mbedtls_entropy_func, &d->entropy,
                              (const unsigned char *)nonce, sizeof nonce) != 0) {
        mbedtls_ctr_drbg_free(&d->ctr);
        mbedtls_entropy_free(&d->entropy);
        return "seeding the random generator failed";
    }
    d->pid = pid;
    return NULL;
}

static int l_random(lua_State *L)
{
    struct drbg *d = lua_touserdata(L, lua_upvalueindex(1));
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 0 && n <= RANDOM_MAX, 1, "must be 0..1048576");
    const char *err = drbg_ready(d);
    if (err)
        return luaL_error(L, "http.crypto.random: %s", err);
    luaL_Buffer b;
    unsigned char *out = (unsigned char *)luaL_buffinitsize(L, &b, (size_t)n);
    for (lua_Integer off = 0; off < n; off += MBEDTLS_CTR_DRBG_MAX_REQUEST) {
        size_t chunk = (size_t)(n - off) < MBEDTLS_CTR_DRBG_MAX_REQUEST
                           ? (size_t)(n - off)
                           : MBEDTLS_CTR_DRBG_MAX_REQUEST;
        if (mbedtls_ctr_drbg_random(&d->ctr, out + off, chunk) != 0)
            return luaL_error(L, "http.crypto.random: the random generator failed");
    }
    luaL_pushresultsize(&b, (size_t)n);
    return 1;
}

static int b64_encode(lua_State *L, bool url)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    luaL_Buffer b;
    size_t n = mh_base64_encoded_len(len, url);
    char *out = luaL_buffinitsize(L, &b, n);
    mh_base64_encode((const unsigned char *)s, len, out, url);
    luaL_pushresultsize(&b, n);
    return 1;
}

static int b64_decode(lua_State *L, bool url)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    luaL_Buffer b;
    unsigned char *out = (unsigned char *)luaL_buffinitsize(L, &b, len / 4 * 3 + 3);
    long n = mh_base64_decode(s, len, out, url);
    if (n < 0) {
        luaL_pushresultsize(&b, 0);
        lua_pushnil(L);
        lua_pushstring(L, err_base64);
        return 2;
    }
    luaL_pushresultsize(&b, (size_t)n);
    return 1;
}

static int l_b64_encode(lua_State *L)
{
    return b64_encode(L, false);
}
static int l_b64_decode(lua_State *L)
{
    return b64_decode(L, false);
}
static int l_b64url_encode(lua_State *L)
{
    return b64_encode(L, true);
}
static int l_b64url_decode(lua_State *L)
{
    return b64_decode(L, true);
}

static int l_hex_encode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    luaL_Buffer b;
    char *out = luaL_buffinitsize(L, &b, len * 2);
    mh_hex_encode((const unsigned char *)s, len, out);
    luaL_pushresultsize(&b, len * 2);
    return 1;
}

static int l_hex_decode(lua_State *L)
{
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    luaL_Buffer b;
    unsigned char *out = (unsigned char *)luaL_buffinitsize(L, &b, len / 2 + 1);
    long n = mh_hex_decode(s, len, out);
    if (n < 0) {
        luaL_pushresultsize(&b, 0);
        lua_pushnil(L);
        lua_pushstring(L, err_hex);
        return 2;
    }
    luaL_pushresultsize(&b, (size_t)n);
    return 1;
}

int mh_lua_crypto_open(lua_State *L)
{
    static const luaL_Reg crypto[] = {
        {"sha256", l_sha256}, {"hmac_sha256", l_hmac_sha256}, {"equal", l_equal}, {NULL, NULL}};
    static const luaL_Reg base64[] = {{"encode", l_b64_encode},
                                      {"decode", l_b64_decode},
                                      {"encode_url", l_b64url_encode},
                                      {"decode_url", l_b64url_decode},
                                      {NULL, NULL}};
    static const luaL_Reg hex[] = {
        {"encode", l_hex_encode}, {"decode", l_hex_decode}, {NULL, NULL}};
    lua_createtable(L, 0, 3);
    luaL_newlib(L, crypto);
    mh_lua_password_register(L);
    mh_lua_jwt_register(L);
    struct drbg *d = lua_newuserdatauv(L, sizeof *d, 0);
    d->pid = 0;
    static const luaL_Reg drbg_meta[] = {{"__gc", drbg_gc}, {NULL, NULL}};
    mh_lua_register_type(L, &(struct mh_lua_type){.name = DRBG_MT, .meta = drbg_meta});
    luaL_setmetatable(L, DRBG_MT);
    lua_pushcclosure(L, l_random, 1);
    lua_setfield(L, -2, "random");
    lua_setfield(L, -2, "crypto");
    luaL_newlib(L, base64);
    lua_setfield(L, -2, "base64");
    luaL_newlib(L, hex);
    lua_setfield(L, -2, "hex");
    return 1;
}
