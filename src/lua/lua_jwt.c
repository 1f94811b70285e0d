#include "lua_jwt.h"

#include "codec.h"
#include "lua_json.h"
#include "lua_opts.h"
#include "lua_type.h"

#include <lauxlib.h>
#include <mbedtls/constant_time.h>
#include <mbedtls/ecdsa.h>
#include <mbedtls/md.h>
#include <mbedtls/pk.h>
#include <mbedtls/psa_util.h>
#include <mbedtls/sha256.h>
#include <stdbool.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define KEY_MT     "moonhttp.JWTKey"
#define MAX_TOKEN  16384 /* bounds the work an unauthenticated header can ask for */
#define MIN_SECRET 32    /* RFC 7518 3.2: a key at least as long as the hash output */
#define HS256_SIG  32
#define ES256_SIG  64 /* JOSE's raw r || s, not DER (RFC 7518 3.4) */

static const char *const err_malformed = "malformed token";
static const char *const err_alg = "algorithm not allowed";
static const char *const err_signature = "bad signature";
static const char *const err_expired = "token expired";
static const char *const err_not_yet = "token not yet valid";
static const char *const err_audience = "wrong audience";
static const char *const err_issuer = "wrong issuer";

enum alg { HS256, ES256 };
static const char *const ALG_NAMES[] = {"HS256", "ES256", NULL};
static const char *const HEADERS[] = {"{\"alg\":\"HS256\",\"typ\":\"JWT\"}",
                                      "{\"alg\":\"ES256\",\"typ\":\"JWT\"}"};

/*
 * A parsed ES256 key lives in a userdata so that a Lua error between
 * parsing and freeing (out of memory in a decode) cannot leak it; key_free
 * is the __gc and is also called as soon as the key is no longer needed.
 */
struct key {
    mbedtls_pk_context pk;
    bool live;
};

static int key_free(lua_State *L)
{
    struct key *k = luaL_checkudata(L, 1, KEY_MT);
    if (k->live) {
        mbedtls_pk_free(&k->pk);
        k->live = false;
    }
    return 0;
}

static int os_random(void *ctx, unsigned char *out, size_t n)
{
    (void)ctx;
    return getrandom(out, n, 0) == (ssize_t)n ? 0 : MBEDTLS_ERR_ECP_RANDOM_FAILED;
}

static enum alg check_alg(lua_State *L, int idx, const char *fn)
{
    if (lua_type(L, idx) != LUA_TSTRING)
        luaL_error(L, "http.crypto.%s: alg must be \"HS256\" or \"ES256\"", fn);
    const char *name = lua_tostring(L, idx);
    for (int i = 0; ALG_NAMES[i]; i++)
        if (strcmp(name, ALG_NAMES[i]) == 0)
            return (enum alg)i;
    luaL_error(L, "http.crypto.%s: alg \"%s\" is not supported (\"HS256\" or \"ES256\")", fn, name);
    return HS256;
}

/* A PEM key passed as an HMAC secret is the classic algorithm-confusion mistake: refuse it. */
static void check_secret(lua_State *L, const char *key, size_t len, const char *fn)
{
    if (len < MIN_SECRET)
        luaL_error(L, "http.crypto.%s: an HS256 secret needs at least %d bytes", fn, MIN_SECRET);
    if (len >= 10 && memcmp(key, "-----BEGIN", 10) == 0)
        luaL_error(L, "http.crypto.%s: HS256 takes a secret, not a PEM key", fn);
}

/*
 * Parses a P-256 key into a new userdata pushed on the stack; raises when the
 * key is not one. Signing needs the private key; verifying takes either.
 */
static struct key *push_ec_key(lua_State *L, const char *pem, size_t len, bool private_key,
                               const char *fn)
{
    struct key *k = lua_newuserdatauv(L, sizeof *k, 0);
    mbedtls_pk_init(&k->pk);
    k->live = true;
    luaL_setmetatable(L, KEY_MT);
    /* Mbed TLS wants the terminating NUL counted for PEM; Lua strings have one. */
    size_t n = memchr(pem, '\0', len) == NULL && strstr(pem, "-----BEGIN") ? len + 1 : len;
    const unsigned char *p = (const unsigned char *)pem;
    int rc = private_key ? mbedtls_pk_parse_key(&k->pk, p, n, NULL, 0, os_random, NULL)
                         : mbedtls_pk_parse_public_key(&k->pk, p, n);
    if (rc != 0 && !private_key) {
        mbedtls_pk_free(&k->pk);
        mbedtls_pk_init(&k->pk);
        rc = mbedtls_pk_parse_key(&k->pk, p, n, NULL, 0, os_random, NULL);
    }
    if (rc != 0 || !mbedtls_pk_can_do(&k->pk, MBEDTLS_PK_ECDSA) ||
        mbedtls_ecp_keypair_get_group_id(mbedtls_pk_ec(k->pk)) != MBEDTLS_ECP_DP_SECP256R1)
        luaL_error(L, "http.crypto.%s: ES256 needs a PEM P-256 %s key", fn,
                   private_key ? "private" : "public or private");
    return k;
}

static void add_b64url(luaL_Buffer *b, const void *in, size_t len)
{
    size_t n = mh_base64_encoded_len(len, true);
    char *out = luaL_prepbuffsize(b, n);
    mh_base64_encode(in, len, out, true);
    luaL_addsize(b, n);
}

static int l_jwt_sign(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    size_t klen;
    const char *key = luaL_checklstring(L, 2, &klen);
    enum alg alg = check_alg(L, 3, "jwt_sign");
    lua_settop(L, 3);
    struct key *k = NULL;
    if (alg == HS256)
        check_secret(L, key, klen, "jwt_sign");
    else
        k = push_ec_key(L, key, klen, true, "jwt_sign");
    lua_pushcfunction(L, mh_json_encode_l);
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    size_t clen;
    const char *claims = lua_tolstring(L, -1, &clen);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    add_b64url(&b, HEADERS[alg], strlen(HEADERS[alg]));
    luaL_addchar(&b, '.');
    add_b64url(&b, claims, clen);
    luaL_pushresult(&b);
    size_t ilen;
    const unsigned char *input = (const unsigned char *)lua_tolstring(L, -1, &ilen);

    unsigned char sig[ES256_SIG];
    size_t siglen;
    int rc;
    if (alg == HS256) {
        siglen = HS256_SIG;
        rc = mbedtls_md_hmac(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256),
                             (const unsigned char *)key, klen, input, ilen, sig);
    } else {
        siglen = ES256_SIG;
        unsigned char hash[32];
        /* Mbed TLS signs in DER; a JWS ES256 signature is R || S, 32 bytes each (RFC 7518 §3.4). */
        unsigned char der[MBEDTLS_ECDSA_MAX_LEN];
        size_t derlen, rawlen;
        rc = mbedtls_sha256(input, ilen, hash, 0);
        if (rc == 0)
            rc = mbedtls_pk_sign(&k->pk, MBEDTLS_MD_SHA256, hash, sizeof hash, der, sizeof der,
                                 &derlen, os_random, NULL);
        if (rc == 0)
            rc = mbedtls_ecdsa_der_to_raw(256, der, derlen, sig, ES256_SIG, &rawlen);
        mbedtls_pk_free(&k->pk);
        k->live = false;
    }
    if (rc != 0)
        return luaL_error(L, "http.crypto.jwt_sign: Mbed TLS failed (-0x%04x)", (unsigned)-rc);
    luaL_buffinit(L, &b);
    luaL_addlstring(&b, (const char *)input, ilen); /* input stays on the stack below */
    luaL_addchar(&b, '.');
    add_b64url(&b, sig, siglen);
    luaL_pushresult(&b);
    return 1;
}

struct verify_opts {
    enum alg alg;
    const char *aud, *iss;
    double leeway;
};

static void read_opts(lua_State *L, int idx, struct verify_opts *o)
{
    static const char *const known[] = {"alg", "aud", "iss", "leeway", NULL};
    luaL_checktype(L, idx, LUA_TTABLE);
    mh_lua_check_opts(L, idx, "http.crypto.jwt_verify", known, 1);
    lua_getfield(L, idx, "alg");
    if (lua_isnil(L, -1))
        luaL_error(L, "http.crypto.jwt_verify: opts.alg is required (\"HS256\" or \"ES256\")");
    o->alg = check_alg(L, -1, "jwt_verify");
    lua_getfield(L, idx, "aud");
    lua_getfield(L, idx, "iss");
    lua_getfield(L, idx, "leeway");
    if (!lua_isnil(L, -3) && lua_type(L, -3) != LUA_TSTRING)
        luaL_error(L, "http.crypto.jwt_verify: opts.aud must be a string");
    if (!lua_isnil(L, -2) && lua_type(L, -2) != LUA_TSTRING)
        luaL_error(L, "http.crypto.jwt_verify: opts.iss must be a string");
    if (!lua_isnil(L, -1) && (lua_type(L, -1) != LUA_TNUMBER || lua_tonumber(L, -1) < 0))
        luaL_error(L, "http.crypto.jwt_verify: opts.leeway must be a number of seconds >= 0");
    /* The strings stay reachable from opts, which the caller keeps on the stack. */
    o->aud = lua_tostring(L, -3);
    o->iss = lua_tostring(L, -2);
    o->leeway = lua_isnil(L, -1) ? 0 : lua_tonumber(L, -1);
    lua_pop(L, 4);
}

/*
 * Decodes one base64url segment (no padding, RFC 7515 2) and then its JSON,
 * which must be an object; pushes the table and returns true, or pushes
 * nothing and returns false.
 */
static bool push_json_segment(lua_State *L, const char *s, size_t len)
{
    if (len == 0 || memchr(s, '=', len))
        return false;
    luaL_Buffer b;
    unsigned char *out = (unsigned char *)luaL_buffinitsize(L, &b, len / 4 * 3 + 3);
    long n = mh_base64_decode(s, len, out, true);
    size_t i = 0;
    while (n > 0 && i < (size_t)n && strchr(" \t\r\n", out[i]))
        i++;
    if (n <= 0 || i == (size_t)n || out[i] != '{') {
        luaL_pushresultsize(&b, 0);
        lua_pop(L, 1);
        return false;
    }
    luaL_pushresultsize(&b, (size_t)n);
    lua_pushvalue(L, lua_upvalueindex(1)); /* cjson.safe.decode */
    lua_insert(L, -2);
    lua_call(L, 1, 1);
    if (lua_type(L, -1) != LUA_TTABLE) {
        lua_pop(L, 1);
        return false;
    }
    return true;
}

/* Checks the signature over input (header.payload); sig is the decoded third segment. */
static const char *check_signature(enum alg alg, const char *key, size_t klen, struct key *k,
                                   const unsigned char *input, size_t ilen,
                                   const unsigned char *sig, size_t siglen)
{
    if (alg == HS256) {
        unsigned char want[HS256_SIG];
        if (siglen != HS256_SIG ||
            mbedtls_md_hmac(mbedtls_md_info_from_type(MBEDTLS_MD_SHA256),
                            (const unsigned char *)key, klen, input, ilen, want) != 0)
            return err_signature;
        return mbedtls_ct_memcmp(want, sig, HS256_SIG) == 0 ? NULL : err_signature;
    }
    if (siglen != ES256_SIG)
        return err_signature;
    unsigned char hash[32];
    unsigned char der[MBEDTLS_ECDSA_MAX_LEN];
    size_t derlen;
    int rc = mbedtls_sha256(input, ilen, hash, 0);
    if (rc == 0)
        rc = mbedtls_ecdsa_raw_to_der(256, sig, ES256_SIG, der, sizeof der, &derlen);
    if (rc == 0)
        rc = mbedtls_pk_verify(&k->pk, MBEDTLS_MD_SHA256, hash, sizeof hash, der, derlen);
    return rc == 0 ? NULL : err_signature;
}

/* Reads NumericDate claim `name` into *out; false when absent (the caller checked the types). */
static bool numeric_claim(lua_State *L, int claims, const char *name, double *out)
{
    bool present = lua_getfield(L, claims, name) == LUA_TNUMBER;
    *out = present ? lua_tonumber(L, -1) : 0;
    lua_pop(L, 1);
    return present;
}

/* exp, nbf, aud and iss of the claims table at `claims`; NULL when all pass. */
static const char *check_claims(lua_State *L, int claims, const struct verify_opts *o)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double now = (double)ts.tv_sec + ts.tv_nsec / 1e9, t;
    static const char *const names[] = {"exp", "nbf"};
    for (int i = 0; i < 2; i++) {
        int type = lua_getfield(L, claims, names[i]);
        lua_pop(L, 1);
        if (type != LUA_TNIL && type != LUA_TNUMBER)
            return err_malformed;
    }
    /* RFC 7519 4.1.4: the token is valid only before exp. */
    if (numeric_claim(L, claims, "exp", &t) && now >= t + o->leeway)
        return err_expired;
    if (numeric_claim(L, claims, "nbf", &t) && now < t - o->leeway)
        return err_not_yet;

    const char *err = NULL;
    int type = lua_getfield(L, claims, "aud");
    if (type != LUA_TNIL || o->aud) {
        err = err_audience;
        if (o->aud && type == LUA_TSTRING && strcmp(lua_tostring(L, -1), o->aud) == 0)
            err = NULL;
        else if (o->aud && type == LUA_TTABLE)
            for (lua_Integer i = 1; err && lua_rawgeti(L, -1, i) != LUA_TNIL; i++) {
                if (lua_type(L, -1) == LUA_TSTRING && strcmp(lua_tostring(L, -1), o->aud) == 0)
                    err = NULL;
                lua_pop(L, 1);
            }
    }
    lua_settop(L, claims);
    if (err)
        return err;
    if (o->iss) {
        type = lua_getfield(L, claims, "iss");
        if (type != LUA_TSTRING || strcmp(lua_tostring(L, -1), o->iss) != 0)
            err = err_issuer;
        lua_pop(L, 1);
    }
    return err;
}

/*
 * The order is RFC 8725's: split, read only the header, refuse any alg but
 * the pinned one, check the signature, and only then decode the payload and
 * look at its claims.
 */
static int l_jwt_verify(lua_State *L)
{
    size_t tlen, klen;
    const char *tok = luaL_checklstring(L, 1, &tlen);
    const char *key = luaL_checklstring(L, 2, &klen);
    struct verify_opts o;
    read_opts(L, 3, &o);
    lua_settop(L, 3);
    struct key *k = NULL;
    if (o.alg == HS256)
        check_secret(L, key, klen, "jwt_verify");
    else
        k = push_ec_key(L, key, klen, false, "jwt_verify"); /* slot 4 */
    lua_settop(L, 4);

    const char *err = err_malformed;
    const char *dot1 = tlen <= MAX_TOKEN ? memchr(tok, '.', tlen) : NULL;
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', tlen - (size_t)(dot1 + 1 - tok)) : NULL;
    const char *end = tok + tlen;
    if (!dot2 || memchr(dot2 + 1, '.', (size_t)(end - dot2 - 1)))
        goto fail;
    if (!push_json_segment(L, tok, (size_t)(dot1 - tok))) /* slot 5: the header */
        goto fail;
    int t = lua_getfield(L, 5, "alg");
    if (t != LUA_TSTRING) {
        err = t == LUA_TNIL ? err_malformed : err_alg;
        goto fail;
    }
    if (strcmp(lua_tostring(L, -1), ALG_NAMES[o.alg]) != 0) {
        err = err_alg;
        goto fail;
    }
    /* We understand no extension, so a critical one must be refused (RFC 7515 4.1.11). */
    if (lua_getfield(L, 5, "crit") != LUA_TNIL)
        goto fail;
    lua_settop(L, 5);

    size_t slen = (size_t)(end - dot2 - 1);
    unsigned char sig[ES256_SIG + 3];
    if (slen > mh_base64_encoded_len(ES256_SIG, true) || memchr(dot2 + 1, '=', slen))
        goto fail;
    long n = mh_base64_decode(dot2 + 1, slen, sig, true);
    if (n < 0)
        goto fail;
    err = check_signature(o.alg, key, klen, k, (const unsigned char *)tok, (size_t)(dot2 - tok),
                          sig, (size_t)n);
    if (k) {
        mbedtls_pk_free(&k->pk);
        k->live = false;
    }
    if (err)
        goto fail;
    err = err_malformed;
    if (!push_json_segment(L, dot1 + 1, (size_t)(dot2 - dot1 - 1))) /* slot 6: the claims */
        goto fail;
    err = check_claims(L, 6, &o);
    if (err)
        goto fail;
    return 1;
fail:
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
}

void mh_lua_jwt_register(lua_State *L)
{
    static const luaL_Reg key_meta[] = {{"__gc", key_free}, {NULL, NULL}};
    mh_lua_register_type(L, &(struct mh_lua_type){.name = KEY_MT, .meta = key_meta});
    lua_pushcfunction(L, l_jwt_sign);
    lua_setfield(L, -2, "jwt_sign");
    lua_getglobal(L, "require");
    lua_pushliteral(L, "cjson.safe");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "decode");
    lua_remove(L, -2);
    lua_pushcclosure(L, l_jwt_verify, 1);
    lua_setfield(L, -2, "jwt_verify");
}
