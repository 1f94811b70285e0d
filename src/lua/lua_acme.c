#include "lua_acme.h"

#include "codec.h"
#include "lua_vm.h"
#include "tls_init.h"

#include <lauxlib.h>
#include <mbedtls/ecp.h>
#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/psa_util.h>
#include <mbedtls/sha256.h>
#include <mbedtls/x509_crt.h>
#include <mbedtls/x509_csr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A CA takes at most 100 names per order (Let's Encrypt); more is a mistake upstream. */
#define NAMES_MAX 100
#define DNS_NAME_MAX 253
/* X.520's upper bound for a commonName: a longer first name is only in the SAN. */
#define CN_MAX 64
/* PEM of a P-256 private key is about 230 bytes, of the validation certificate under 1 KiB. */
#define KEY_PEM_MAX 512
#define CERT_PEM_MAX 2048

/* id-pe-acmeIdentifier, 1.3.6.1.5.5.7.1.31 (RFC 8737 section 6.1). */
#define OID_ACME_IDENTIFIER MBEDTLS_OID_PKIX "\x01\x1f"

static void set_err(char *err, size_t errlen, const char *what, int ret)
{
    char msg[128];
    mbedtls_strerror(ret, msg, sizeof msg);
    snprintf(err, errlen, "%s: %s", what, msg);
}

static int push_err(lua_State *L, const char *err)
{
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
}

static void push_b64url(lua_State *L, const unsigned char *p, size_t n)
{
    luaL_Buffer b;
    size_t len = mh_base64_encoded_len(n, true);
    char *out = luaL_buffinitsize(L, &b, len);
    mh_base64_encode(p, n, out, true);
    luaL_pushresultsize(&b, len);
}

/* PSA's generator is per process once mh_tls_crypto_init ran in it (after fork, too). */
static int rng_ready(char *err, size_t errlen)
{
    int ret = mh_tls_crypto_init();
    if (ret)
        snprintf(err, errlen, "the random generator failed to start (%d)", ret);
    return ret ? -1 : 0;
}

/* Parses a PEM private key that must be ECDSA P-256 (what ES256 and the JWK's crv say). */
static int load_key(mbedtls_pk_context *pk, const char *pem, size_t len, char *err, size_t errlen)
{
    if (rng_ready(err, errlen) < 0)
        return -1;
    /* A Lua string has its NUL at pem[len]; PEM parsing wants it counted. */
    int ret = mbedtls_pk_parse_key(pk, (const unsigned char *)pem, len + 1, NULL, 0,
                                   mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE);
    if (ret) {
        set_err(err, errlen, "bad key PEM", ret);
        return -1;
    }
    if (mbedtls_pk_get_type(pk) != MBEDTLS_PK_ECKEY ||
        mbedtls_ecp_keypair_get_group_id(mbedtls_pk_ec(*pk)) != MBEDTLS_ECP_DP_SECP256R1) {
        snprintf(err, errlen, "the key is not an ECDSA P-256 key");
        return -1;
    }
    return 0;
}

static int new_key(mbedtls_pk_context *pk, char *err, size_t errlen)
{
    if (rng_ready(err, errlen) < 0)
        return -1;
    int ret = mbedtls_pk_setup(pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY));
    if (!ret)
        ret = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(*pk),
                                  mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE);
    if (ret)
        set_err(err, errlen, "generating a P-256 key", ret);
    return ret ? -1 : 0;
}

static int key_pem(mbedtls_pk_context *pk, unsigned char *buf, size_t size, char *err,
                   size_t errlen)
{
    int ret = mbedtls_pk_write_key_pem(pk, buf, size);
    if (ret)
        set_err(err, errlen, "writing the key", ret);
    return ret ? -1 : 0;
}

/*
 * A DNS name as a CA accepts one in an order: letters, digits, '-' and '.',
 * an optional leading "*." (a wildcard, DNS-01 only but not ours to refuse),
 * no empty label. Anything else would also reach the certificate's subject
 * string, where ',' and '=' mean something to Mbed TLS.
 */
static bool dns_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > DNS_NAME_MAX)
        return false;
    size_t i = 0, label = 0;
    if (len > 2 && s[0] == '*' && s[1] == '.')
        i = 2;
    for (; i < len; i++) {
        char c = s[i];
        if (c == '.') {
            if (label == 0)
                return false;
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-') {
            if (++label > 63)
                return false;
        } else {
            return false;
        }
    }
    return label > 0;
}

/* "CN=<name>" for the subject, or "" when the name is longer than a commonName may be. */
static void subject_of(const char *name, size_t len, char *out, size_t outlen)
{
    if (len > CN_MAX)
        out[0] = 0;
    else
        snprintf(out, outlen, "CN=%.*s", (int)len, name);
}

/* ---- key_new, jwk, sign_es256 --------------------------------------------- */

static int l_key_new(lua_State *L)
{
    char err[192];
    unsigned char pem[KEY_PEM_MAX];
    mbedtls_pk_context pk;
    mbedtls_pk_init(&pk);
    int rc = new_key(&pk, err, sizeof err);
    if (rc == 0)
        rc = key_pem(&pk, pem, sizeof pem, err, sizeof err);
    mbedtls_pk_free(&pk);
    if (rc < 0)
        return push_err(L, err);
    lua_pushstring(L, (const char *)pem);
    mbedtls_platform_zeroize(pem, sizeof pem);
    return 1;
}

static int l_jwk(lua_State *L)
{
    size_t len;
    const char *pem = luaL_checklstring(L, 1, &len);
    char err[192];
    unsigned char point[65]; /* 0x04 || x || y */
    size_t plen = 0;
    mbedtls_pk_context pk;
    mbedtls_pk_init(&pk);
    int rc = load_key(&pk, pem, len, err, sizeof err);
    if (rc == 0) {
        int ret = mbedtls_ecp_write_public_key(mbedtls_pk_ec(pk), MBEDTLS_ECP_PF_UNCOMPRESSED,
                                               &plen, point, sizeof point);
        if (ret || plen != sizeof point) {
            set_err(err, sizeof err, "reading the public key", ret);
            rc = -1;
        }
    }
    mbedtls_pk_free(&pk);
    if (rc < 0)
        return push_err(L, err);
    /* RFC 7638 section 3.2: the required members only, in lexicographic order, no spaces. */
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"");
    push_b64url(L, point + 1, 32);
    luaL_addvalue(&b);
    luaL_addstring(&b, "\",\"y\":\"");
    push_b64url(L, point + 33, 32);
    luaL_addvalue(&b);
    luaL_addstring(&b, "\"}");
    luaL_pushresult(&b);
    size_t jlen;
    const char *json = lua_tolstring(L, -1, &jlen);
    unsigned char digest[32];
    mbedtls_sha256((const unsigned char *)json, jlen, digest, 0);
    push_b64url(L, digest, sizeof digest);
    return 2;
}

static int l_sign_es256(lua_State *L)
{
    size_t len, ilen;
    const char *pem = luaL_checklstring(L, 1, &len);
    const char *input = luaL_checklstring(L, 2, &ilen);
    char err[192];
    unsigned char hash[32], der[MBEDTLS_ECDSA_MAX_SIG_LEN(256)], raw[64];
    size_t dlen = 0, rlen = 0;
    mbedtls_sha256((const unsigned char *)input, ilen, hash, 0);
    mbedtls_pk_context pk;
    mbedtls_pk_init(&pk);
    int rc = load_key(&pk, pem, len, err, sizeof err);
    if (rc == 0) {
        /* Mbed TLS signs in DER (SEQUENCE of two INTEGERs); JWS wants the two
         * 32-byte big-endian numbers side by side (RFC 7518 section 3.4). */
        int ret = mbedtls_pk_sign(&pk, MBEDTLS_MD_SHA256, hash, sizeof hash, der, sizeof der,
                                  &dlen, mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE);
        if (!ret)
            ret = mbedtls_ecdsa_der_to_raw(256, der, dlen, raw, sizeof raw, &rlen);
        if (ret) {
            set_err(err, sizeof err, "signing", ret);
            rc = -1;
        }
    }
    mbedtls_pk_free(&pk);
    if (rc < 0)
        return push_err(L, err);
    push_b64url(L, raw, rlen);
    return 1;
}

/* ---- csr ------------------------------------------------------------------ */

/*
 * Reads the names table at idx into sans[] (their bytes stay in the Lua
 * strings, which the table keeps alive). Mbed TLS writes ASN.1 from the end,
 * so the list runs from the last name (sans[n - 1]) back to the first, and
 * the request lists them in the caller's order. Returns n, or -1 with err.
 */
static int read_names(lua_State *L, int idx, mbedtls_x509_san_list *sans, char *err, size_t errlen)
{
    lua_Integer n = luaL_len(L, idx);
    if (n < 1) {
        snprintf(err, errlen, "no names");
        return -1;
    }
    if (n > NAMES_MAX) {
        snprintf(err, errlen, "%lld names: at most %d", (long long)n, NAMES_MAX);
        return -1;
    }
    for (lua_Integer i = 1; i <= n; i++) {
        size_t len = 0;
        const char *s = lua_rawgeti(L, idx, i) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        lua_pop(L, 1);
        if (!s || !dns_name_ok(s, len)) {
            snprintf(err, errlen, "names[%lld] is not a DNS name", (long long)i);
            return -1;
        }
        mbedtls_x509_san_list *node = &sans[i - 1];
        memset(node, 0, sizeof *node);
        node->node.type = MBEDTLS_X509_SAN_DNS_NAME;
        node->node.san.unstructured_name.p = (unsigned char *)s;
        node->node.san.unstructured_name.len = len;
        node->next = i > 1 ? &sans[i - 2] : NULL;
    }
    return (int)n;
}

static int l_csr(lua_State *L)
{
    size_t len;
    const char *pem = luaL_checklstring(L, 1, &len);
    luaL_checktype(L, 2, LUA_TTABLE);
    char err[192];
    mbedtls_x509_san_list sans[NAMES_MAX];
    int n = read_names(L, 2, sans, err, sizeof err);
    if (n < 0)
        return push_err(L, err);
    size_t size = 1024;
    for (int i = 0; i < n; i++)
        size += sans[i].node.san.unstructured_name.len + 8;
    unsigned char *buf = malloc(size);
    if (!buf)
        return luaL_error(L, "acme.csr: out of memory");
    char subject[CN_MAX + 4];
    subject_of((const char *)sans[0].node.san.unstructured_name.p,
               sans[0].node.san.unstructured_name.len, subject, sizeof subject);
    mbedtls_pk_context pk;
    mbedtls_pk_init(&pk);
    mbedtls_x509write_csr csr;
    mbedtls_x509write_csr_init(&csr);
    int ret = 0;
    int rc = load_key(&pk, pem, len, err, sizeof err);
    if (rc == 0) {
        mbedtls_x509write_csr_set_md_alg(&csr, MBEDTLS_MD_SHA256);
        mbedtls_x509write_csr_set_key(&csr, &pk);
        /* No subject at all when the first name is too long to be a CN. */
        if (subject[0])
            ret = mbedtls_x509write_csr_set_subject_name(&csr, subject);
        if (!ret)
            ret = mbedtls_x509write_csr_set_subject_alternative_name(&csr, &sans[n - 1]);
        /* Writes at the end of buf and returns the length. */
        if (!ret)
            ret = mbedtls_x509write_csr_der(&csr, buf, size, mbedtls_psa_get_random,
                                            MBEDTLS_PSA_RANDOM_STATE);
        if (ret < 0) {
            set_err(err, sizeof err, "writing the CSR", ret);
            rc = -1;
        }
    }
    mbedtls_x509write_csr_free(&csr);
    mbedtls_pk_free(&pk);
    if (rc < 0) {
        free(buf);
        return push_err(L, err);
    }
    lua_pushlstring(L, (const char *)buf + size - (size_t)ret, (size_t)ret);
    free(buf);
    return 1;
}

/* ---- alpn_cert ------------------------------------------------------------ */

static void validity_time(time_t t, char out[15])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 15, "%Y%m%d%H%M%S", &tm);
}

/* Writes the self-signed validation certificate for name over pk into pem. */
static int write_alpn_cert(mbedtls_pk_context *pk, const char *name, size_t nlen,
                           const unsigned char digest[32], unsigned char *pem, size_t pemlen,
                           char *err, size_t errlen)
{
    char subject[CN_MAX + 4];
    subject_of(name, nlen, subject, sizeof subject);
    if (!subject[0]) /* a subject may not be empty in a self-signed cert's issuer */
        snprintf(subject, sizeof subject, "CN=acme-tls-alpn-01");
    /* A positive 16-byte serial: top bit clear, first byte non-zero. */
    unsigned char serial[16];
    int ret = mbedtls_psa_get_random(MBEDTLS_PSA_RANDOM_STATE, serial, sizeof serial);
    serial[0] = (unsigned char)((serial[0] & 0x7f) | 0x01);
    /* The extension's value: Authorization ::= OCTET STRING (SIZE (32)), in DER. */
    unsigned char ext[34] = {MBEDTLS_ASN1_OCTET_STRING, 32};
    memcpy(ext + 2, digest, 32);
    mbedtls_x509_san_list san = {
        .node = {.type = MBEDTLS_X509_SAN_DNS_NAME,
                 .san.unstructured_name = {.p = (unsigned char *)name, .len = nlen}},
    };
    /* A day either side of now: the validating CA's clock need not be ours. */
    time_t now = time(NULL);
    char from[15], to[15];
    validity_time(now - 86400, from);
    validity_time(now + 7 * 86400, to);
    mbedtls_x509write_cert crt;
    mbedtls_x509write_crt_init(&crt);
    mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
    mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
    mbedtls_x509write_crt_set_subject_key(&crt, pk);
    mbedtls_x509write_crt_set_issuer_key(&crt, pk);
    if (!ret)
        ret = mbedtls_x509write_crt_set_serial_raw(&crt, serial, sizeof serial);
    if (!ret)
        ret = mbedtls_x509write_crt_set_validity(&crt, from, to);
    if (!ret)
        ret = mbedtls_x509write_crt_set_subject_name(&crt, subject);
    if (!ret)
        ret = mbedtls_x509write_crt_set_issuer_name(&crt, subject);
    if (!ret)
        ret = mbedtls_x509write_crt_set_subject_alternative_name(&crt, &san);
    if (!ret)
        ret = mbedtls_x509write_crt_set_extension(&crt, OID_ACME_IDENTIFIER,
                                                  MBEDTLS_OID_SIZE(OID_ACME_IDENTIFIER), 1, ext,
                                                  sizeof ext);
    if (!ret)
        ret = mbedtls_x509write_crt_pem(&crt, pem, pemlen, mbedtls_psa_get_random,
                                        MBEDTLS_PSA_RANDOM_STATE);
    mbedtls_x509write_crt_free(&crt);
    if (ret)
        set_err(err, errlen, "writing the validation certificate", ret);
    return ret ? -1 : 0;
}

static int l_alpn_cert(lua_State *L)
{
    size_t nlen, klen;
    const char *name = luaL_checklstring(L, 1, &nlen);
    const char *keyauth = luaL_checklstring(L, 2, &klen);
    if (!dns_name_ok(name, nlen) || name[0] == '*')
        return push_err(L, "not a DNS name");
    char err[192];
    unsigned char digest[32], cert[CERT_PEM_MAX], key[KEY_PEM_MAX];
    mbedtls_sha256((const unsigned char *)keyauth, klen, digest, 0);
    mbedtls_pk_context pk;
    mbedtls_pk_init(&pk);
    int rc = new_key(&pk, err, sizeof err);
    if (rc == 0)
        rc = write_alpn_cert(&pk, name, nlen, digest, cert, sizeof cert, err, sizeof err);
    if (rc == 0)
        rc = key_pem(&pk, key, sizeof key, err, sizeof err);
    mbedtls_pk_free(&pk);
    if (rc < 0)
        return push_err(L, err);
    lua_pushstring(L, (const char *)cert);
    lua_pushstring(L, (const char *)key);
    mbedtls_platform_zeroize(key, sizeof key);
    return 2;
}

/* ---- cert_info ------------------------------------------------------------ */

/* Seconds since the epoch of a certificate's UTC time (days from civil, proleptic Gregorian). */
static lua_Integer x509_epoch(const mbedtls_x509_time *t)
{
    long long y = t->year - (t->mon <= 2), m = t->mon;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + t->day - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    long long days = era * 146097 + doe - 719468;
    return (lua_Integer)(days * 86400 + t->hour * 3600 + t->min * 60 + t->sec);
}

/* The leaf's DNS names: its SAN dNSNames, or its CN when it has no SAN. */
static void push_names(lua_State *L, const mbedtls_x509_crt *crt)
{
    lua_newtable(L);
    lua_Integer n = 0;
    for (const mbedtls_x509_sequence *s = &crt->subject_alt_names; s && s->buf.p; s = s->next) {
        if (s->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_DNS_NAME)) {
            lua_pushlstring(L, (const char *)s->buf.p, s->buf.len);
            lua_rawseti(L, -2, ++n);
        }
    }
    for (const mbedtls_x509_name *a = &crt->subject; n == 0 && a && a->oid.p; a = a->next) {
        if (MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &a->oid) == 0) {
            lua_pushlstring(L, (const char *)a->val.p, a->val.len);
            lua_rawseti(L, -2, ++n);
        }
    }
}

static int l_cert_info(lua_State *L)
{
    size_t len;
    const char *pem = luaL_checklstring(L, 1, &len);
    mbedtls_x509_crt chain;
    mbedtls_x509_crt_init(&chain);
    /* A positive result counts certificates that did not parse: one bad link is a bad file. */
    int ret = mbedtls_x509_crt_parse(&chain, (const unsigned char *)pem, len + 1);
    if (ret != 0 || !chain.raw.p) {
        char err[192];
        if (ret > 0)
            snprintf(err, sizeof err, "bad certificate PEM: %d certificates do not parse", ret);
        else
            set_err(err, sizeof err, "bad certificate PEM", ret);
        mbedtls_x509_crt_free(&chain);
        return push_err(L, err);
    }
    const mbedtls_x509_crt *leaf = &chain;
    lua_createtable(L, 0, 5);
    lua_pushinteger(L, x509_epoch(&leaf->valid_from));
    lua_setfield(L, -2, "not_before");
    lua_pushinteger(L, x509_epoch(&leaf->valid_to));
    lua_setfield(L, -2, "not_after");
    push_names(L, leaf);
    lua_setfield(L, -2, "names");
    /* The INTEGER's content octets, a leading 0x00 included: what RFC 9773 encodes. */
    push_b64url(L, leaf->serial.p, leaf->serial.len);
    lua_setfield(L, -2, "serial");
    if (leaf->authority_key_id.keyIdentifier.p) {
        push_b64url(L, leaf->authority_key_id.keyIdentifier.p,
                    leaf->authority_key_id.keyIdentifier.len);
        lua_setfield(L, -2, "aki");
    }
    mbedtls_x509_crt_free(&chain);
    return 1;
}

/* ---- install -------------------------------------------------------------- */

static int l_install(lua_State *L)
{
    lua_Integer index = luaL_checkinteger(L, 1);
    const char *cert = luaL_checkstring(L, 2);
    const char *key = luaL_checkstring(L, 3);
    const struct mh_gen_host *host = mh_gen_of(L)->host;
    if (!host || !host->tls_install)
        return push_err(L, "no listeners in this process");
    if (index < 1)
        return push_err(L, "listener index must be 1 or more");
    char err[512];
    if (host->tls_install(host, (size_t)(index - 1), cert, key, err, sizeof err) < 0)
        return push_err(L, err);
    lua_pushboolean(L, 1);
    return 1;
}

void mh_lua_acme_open(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"key_new", l_key_new},     {"jwk", l_jwk},
        {"sign_es256", l_sign_es256}, {"csr", l_csr},
        {"alpn_cert", l_alpn_cert}, {"cert_info", l_cert_info},
        {"install", l_install},     {NULL, NULL},
    };
    luaL_newlib(L, fns);
    lua_setfield(L, -2, "acme");
}
