#include "lua_tls.h"

#include "tls.h"

#include <arpa/inet.h>
#include <lauxlib.h>
#include <mbedtls/pem.h>
#include <mbedtls/x509_crt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_string(lua_State *L, const char *key, const char *v)
{
    if (!v)
        return;
    lua_pushstring(L, v);
    lua_setfield(L, -2, key);
}

/*
 * subjectAltName entries as OpenSSL prints them ("DNS:a.test", "IP:127.0.0.1",
 * "email:...", "URI:..."); other kinds are left out.
 */
static void push_sans(lua_State *L, const mbedtls_x509_crt *crt)
{
    lua_newtable(L);
    lua_Integer n = 0;
    for (const mbedtls_x509_sequence *cur = &crt->subject_alt_names; cur && cur->buf.p;
         cur = cur->next) {
        int tag = cur->buf.tag & ~MBEDTLS_ASN1_CONTEXT_SPECIFIC;
        const char *p = (const char *)cur->buf.p;
        int len = (int)cur->buf.len;
        char ip[INET6_ADDRSTRLEN];
        if (tag == MBEDTLS_X509_SAN_IP_ADDRESS) {
            if ((len != 4 && len != 16) ||
                !inet_ntop(len == 4 ? AF_INET : AF_INET6, p, ip, sizeof ip))
                continue;
            lua_pushfstring(L, "IP:%s", ip);
        } else {
            const char *kind = tag == MBEDTLS_X509_SAN_DNS_NAME                      ? "DNS:"
                               : tag == MBEDTLS_X509_SAN_RFC822_NAME                 ? "email:"
                               : tag == MBEDTLS_X509_SAN_UNIFORM_RESOURCE_IDENTIFIER ? "URI:"
                                                                                     : NULL;
            if (!kind)
                continue;
            lua_pushstring(L, kind);
            lua_pushlstring(L, p, (size_t)len); /* the name's bytes, as sent */
            lua_concat(L, 2);
        }
        lua_rawseti(L, -2, ++n);
    }
}

static void push_cert(lua_State *L, const mbedtls_x509_crt *crt)
{
    char buf[1024];
    lua_createtable(L, 0, 6);
    if (mbedtls_x509_dn_gets(buf, sizeof buf, &crt->subject) >= 0)
        set_string(L, "subject", buf);
    if (mbedtls_x509_dn_gets(buf, sizeof buf, &crt->issuer) >= 0)
        set_string(L, "issuer", buf);
    if (mbedtls_x509_serial_gets(buf, sizeof buf, &crt->serial) >= 0)
        set_string(L, "serial", buf);
    const mbedtls_x509_time *t = &crt->valid_to;
    snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", t->year, t->mon, t->day, t->hour,
             t->min, t->sec);
    set_string(L, "not_after", buf);
    push_sans(L, crt);
    lua_setfield(L, -2, "sans");
    /* base64 is 4/3 of the DER plus line breaks every 64 characters and the two armour lines */
    size_t cap = crt->raw.len * 4 / 3 + crt->raw.len / 48 + 128, olen = 0;
    unsigned char *pem = malloc(cap);
    if (pem &&
        mbedtls_pem_write_buffer("-----BEGIN CERTIFICATE-----\n", "-----END CERTIFICATE-----\n",
                                 crt->raw.p, crt->raw.len, pem, cap, &olen) == 0)
        set_string(L, "pem", (const char *)pem);
    free(pem);
}

int mh_lua_push_tls(lua_State *L, const struct mh_transport *t)
{
    struct mh_tls_info info;
    if (!t || !mh_tls_info(t, &info)) {
        lua_pushnil(L);
        return 1;
    }
    lua_createtable(L, 0, 5);
    set_string(L, "version", info.version);
    set_string(L, "cipher", info.cipher);
    set_string(L, "alpn", info.alpn);
    set_string(L, "sni", info.sni);
    if (info.client_cert) {
        push_cert(L, info.client_cert);
        lua_setfield(L, -2, "client_cert");
    }
    return 1;
}

bool mh_lua_tls13_only(lua_State *L, int idx, const char *what)
{
    int ty = lua_getfield(L, idx, "min_version");
    const char *v = ty == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    bool only13 = v && strcmp(v, "1.3") == 0;
    lua_pop(L, 1);
    if (ty != LUA_TNIL && !only13 && !(v && strcmp(v, "1.2") == 0))
        luaL_error(L, "%s: tls.min_version: expected \"1.2\" or \"1.3\"", what);
    return only13;
}
