/*
 * The reader of http.server{} tables: each value, by the type its
 * mh_settings[] row declares, into struct mh_config. Strings go through the
 * same mh_setting_parse as the command line; what only a Lua table can say
 * (tls certificates, listen entries with their own tls, compress and shared
 * tables) is read here.
 */
#include "lua_settings.h"

#include "suggest.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mh_config_shared_from_lua(struct mh_shared_decl *out, size_t *n, lua_State *L, int idx,
                              char *err, size_t errlen)
{
    idx = lua_absindex(L, idx);
    mh_config_shared_clear(out, n);
    if (lua_type(L, idx) != LUA_TTABLE) {
        snprintf(err, errlen, "shared: expected a table { name = size }, got %s",
                 luaL_typename(L, idx));
        return -1;
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        int rc = -1;
        if (lua_type(L, -2) != LUA_TSTRING) {
            snprintf(err, errlen, "shared: names must be strings");
        } else {
            size_t nlen;
            const char *name = lua_tolstring(L, -2, &nlen);
            if (lua_type(L, -1) == LUA_TNUMBER)
                rc = mh_config_shared_add(out, n, name, nlen, NULL, lua_tonumber(L, -1), err,
                                          errlen);
            else if (lua_type(L, -1) == LUA_TSTRING)
                rc = mh_config_shared_add(out, n, name, nlen, lua_tostring(L, -1), 0, err, errlen);
            else
                snprintf(err, errlen, "shared.%s: expected a size like \"16m\", got %s", name,
                         luaL_typename(L, -1));
        }
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

/* -1 with the message in err when the table at idx has a name outside known (NULL-terminated). */
static int check_keys(lua_State *L, int idx, const char *what, const char *const *known, char *err,
                      size_t errlen)
{
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        size_t len;
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        const char *const *n = known;
        while (k && *n && strcmp(k, *n) != 0)
            n++;
        if (!k || !*n) {
            if (k)
                mh_suggest_unknown(err, errlen, what, "key", k, len, known);
            else
                snprintf(err, errlen, "%s: key names must be strings", what);
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

/* The settings of an endpoint beside its certificates (tls_certs.h). */
static const char *const tls_options[] = {"min_version", "client_ca", "client_auth", "acme", NULL};

/* Reads tls_options from the table at vidx into t. 0, or -1 with err. */
static int lua_tls_options(struct mh_tls_certs *t, lua_State *L, int vidx, const char *what,
                           char *err, size_t errlen)
{
    int rc = 0;
    if (lua_getfield(L, vidx, "min_version") != LUA_TNIL) {
        const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "";
        if (strcmp(v, "1.2") != 0 && strcmp(v, "1.3") != 0) {
            snprintf(err, errlen, "%s.min_version: expected \"1.2\" or \"1.3\"", what);
            rc = -1;
        }
        t->tls13_only = strcmp(v, "1.3") == 0;
    }
    lua_pop(L, 1);
    int ca = lua_getfield(L, vidx, "client_ca");
    int auth = lua_getfield(L, vidx, "client_auth");
    const char *v = auth == LUA_TSTRING ? lua_tostring(L, -1) : "";
    if (rc == 0 && ca != LUA_TNIL && ca != LUA_TSTRING) {
        snprintf(err, errlen, "%s.client_ca: expected a PEM file name", what);
        rc = -1;
    } else if (rc == 0 && auth != LUA_TNIL && strcmp(v, "require") && strcmp(v, "optional")) {
        snprintf(err, errlen, "%s.client_auth: expected \"require\" or \"optional\"", what);
        rc = -1;
    } else if (rc == 0 && auth != LUA_TNIL && ca == LUA_TNIL) {
        snprintf(err, errlen, "%s.client_auth: needs client_ca (the CAs to check against)", what);
        rc = -1;
    } else if (rc == 0 && ca == LUA_TSTRING) {
        t->client_ca = mh_config_strdup(lua_tostring(L, -2));
        t->client_optional = strcmp(v, "optional") == 0; /* client_ca alone: required */
    }
    lua_pop(L, 2);
    return rc;
}

/* In a list of certificates, the string keys are the options: an unknown one is an error. */
static int check_option_keys(lua_State *L, int vidx, const char *what, char *err, size_t errlen)
{
    lua_pushnil(L);
    while (lua_next(L, vidx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING)
            continue;
        size_t len;
        const char *k = lua_tolstring(L, -1, &len);
        const char *const *n = tls_options;
        while (*n && strcmp(k, *n) != 0)
            n++;
        if (!*n) {
            mh_suggest_unknown(err, errlen, what, "key", k, len, tls_options);
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

/*
 * Reads { cert = ..., key = ... } or a list of such tables at vidx into t,
 * with the options (tls_options) in the same table: beside cert and key, or
 * beside the list's entries.
 */
static int lua_certs(struct mh_tls_certs *t, lua_State *L, int vidx, const char *what, char *err,
                     size_t errlen)
{
    vidx = lua_absindex(L, vidx);
    mh_config_clear_certs(t);
    if (lua_type(L, vidx) != LUA_TTABLE) {
        snprintf(err, errlen, "%s: expected { cert = ..., key = ... } or a list of them", what);
        return -1;
    }
    bool single = lua_getfield(L, vidx, "cert") != LUA_TNIL;
    lua_pop(L, 1);
    /* acme = { ... }: the Lua ACME client checks the names inside; here only the table. */
    int acme = lua_getfield(L, vidx, "acme");
    lua_pop(L, 1);
    if (acme != LUA_TNIL && acme != LUA_TTABLE) {
        snprintf(err, errlen, "%s.acme: expected a table { domains = ..., ... }, got %s", what,
                 lua_typename(L, acme));
        return -1;
    }
    t->acme = acme == LUA_TTABLE;
    if ((!single && check_option_keys(L, vidx, what, err, errlen) < 0) ||
        lua_tls_options(t, L, vidx, what, err, errlen) < 0)
        return -1;
    if (t->acme && !single && luaL_len(L, vidx) == 0) /* no certificate until ACME gives one */
        return 0;
    lua_Integer n = single ? 1 : luaL_len(L, vidx);
    if (n < 1 || n > MH_MAX_CERTS) {
        snprintf(err, errlen, "%s: expected 1 to %d certificates", what, MH_MAX_CERTS);
        return -1;
    }
    for (lua_Integer i = 1; i <= n; i++) {
        if (single)
            lua_pushvalue(L, vidx);
        else
            lua_rawgeti(L, vidx, i);
        static const char *const known[] = {"cert", "key", NULL};
        static const char *const known_single[] = {
            "cert", "key", "min_version", "client_ca", "client_auth", "acme", NULL};
        int ok = lua_type(L, -1) == LUA_TTABLE;
        if (ok && check_keys(L, -1, what, single ? known_single : known, err, errlen) < 0) {
            lua_settop(L, vidx);
            return -1;
        }
        ok = ok && lua_getfield(L, -1, "cert") == LUA_TSTRING;
        ok = ok && lua_getfield(L, -2, "key") == LUA_TSTRING;
        if (ok) {
            t->cert[t->n] = mh_config_strdup(lua_tostring(L, -2));
            t->key[t->n++] = mh_config_strdup(lua_tostring(L, -1));
        }
        lua_settop(L, vidx);
        if (!ok) {
            snprintf(err, errlen, "%s[%lld]: expected { cert = \"file\", key = \"file\" }", what,
                     (long long)i);
            return -1;
        }
    }
    return 0;
}

/* A listen entry: "addr" or { addr = "addr", tls = true | false | certificates }. */
static int lua_listen_entry(struct mh_config *c, const struct mh_setting *s, lua_State *L, int vidx,
                            lua_Integer i, char *err, size_t errlen)
{
    if (lua_type(L, vidx) == LUA_TSTRING)
        return mh_setting_parse(c, s, lua_tostring(L, vidx), err, errlen);
    if (lua_type(L, vidx) != LUA_TTABLE || lua_getfield(L, vidx, "addr") != LUA_TSTRING) {
        if (lua_type(L, vidx) == LUA_TTABLE)
            lua_pop(L, 1);
        snprintf(err, errlen, "listen[%lld]: expected a string or { addr = ..., tls = ... }",
                 (long long)i);
        return -1;
    }
    static const char *const known[] = {"addr", "tls", NULL};
    char what[32];
    snprintf(what, sizeof what, "listen[%lld]", (long long)i);
    int rc = mh_setting_parse(c, s, lua_tostring(L, -1), err, errlen);
    lua_pop(L, 1);
    if (rc < 0 || check_keys(L, vidx, what, known, err, errlen) < 0)
        return -1;
    size_t at = c->nlisten - 1;
    int t = lua_getfield(L, vidx, "tls");
    if (t == LUA_TBOOLEAN) {
        c->listen_tls[at] = lua_toboolean(L, -1) ? MH_LISTEN_TLS_SHARED : MH_LISTEN_TLS_OFF;
    } else if (t != LUA_TNIL) {
        snprintf(what, sizeof what, "listen[%lld].tls", (long long)i);
        if (!(c->listen_certs[at] = calloc(1, sizeof *c->listen_certs[at]))) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        } else {
            rc = lua_certs(c->listen_certs[at], L, -1, what, err, errlen);
            c->listen_tls[at] = MH_LISTEN_TLS_OWN;
        }
    }
    lua_pop(L, 1);
    return rc;
}

static int compress_types(lua_State *L, int t, struct mh_compress_conf *c, const char *what,
                          char *err, size_t errlen)
{
    if (lua_type(L, t) != LUA_TTABLE) {
        snprintf(err, errlen, "%s.types: expected a list of media types", what);
        return -1;
    }
    mh_compress_conf_clear_types(c);
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, t, i);
        size_t len;
        const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        const char *e = s ? mh_compress_conf_add_type(c, s, len) : "expected a string";
        lua_pop(L, 1);
        if (e) {
            snprintf(err, errlen, "%s.types[%lld]: %s", what, (long long)i, e);
            return -1;
        }
    }
    return 0;
}

/*
 * compress = true | false | { types = {...}, min_bytes = n, level = 1..9 }:
 * a table turns compression on; types replace the default list when given.
 */
int mh_config_compress_from_lua(struct mh_compress_conf *c, lua_State *L, int idx, const char *what,
                                char *err, size_t errlen)
{
    idx = lua_absindex(L, idx);
    mh_compress_conf_init(c);
    if (lua_type(L, idx) == LUA_TBOOLEAN) {
        c->on = lua_toboolean(L, idx);
        return 0;
    }
    if (lua_type(L, idx) != LUA_TTABLE) {
        snprintf(err, errlen, "%s: expected a boolean or { types, min_bytes, level }", what);
        return -1;
    }
    c->on = true;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int rc = 0;
        if (!strcmp(k, "types")) {
            rc = compress_types(L, lua_gettop(L), c, what, err, errlen);
        } else if (!strcmp(k, "min_bytes") || !strcmp(k, "level")) {
            int isnum;
            lua_Integer v = lua_tointegerx(L, -1, &isnum);
            bool level = k[0] == 'l';
            if (!isnum || v < (level ? 1 : 0) || v > (level ? 9 : (lua_Integer)1 << 40)) {
                snprintf(err, errlen, "%s.%s: expected a whole number %s", what, k,
                         level ? "1..9" : ">= 0");
                rc = -1;
            } else if (level) {
                c->level = (int)v;
            } else {
                c->min_bytes = (uint64_t)v;
            }
        } else {
            static const char *const known[] = {"types", "min_bytes", "level", NULL};
            mh_suggest_unknown(err, errlen, what, "key", k, strlen(k), known);
            rc = -1;
        }
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

static int apply_lua_value(struct mh_config *c, const struct mh_setting *s, lua_State *L, int vidx,
                           char *err, size_t errlen)
{
    char *field = (char *)c + s->offset;
    int t = lua_type(L, vidx);
    if (s->type == MH_SETTING_BOOL) {
        if (t != LUA_TBOOLEAN) {
            snprintf(err, errlen, "%s: expected a boolean, got %s", s->name, lua_typename(L, t));
            return -1;
        }
        *(bool *)field = lua_toboolean(L, vidx);
        return 0;
    }
    if (s->type == MH_SETTING_MODULE)
        return 0; /* its module read it at http.server{} (lua_load.c) */
    if (s->type == MH_SETTING_TLS)
        return lua_certs(&c->tls, L, vidx, "tls", err, errlen);
    if (s->type == MH_SETTING_SHARED)
        return mh_config_shared_from_lua(c->shared, &c->nshared, L, vidx, err, errlen);
    if (s->type == MH_SETTING_COMPRESS)
        return mh_config_compress_from_lua((struct mh_compress_conf *)field, L, vidx, "compress",
                                           err, errlen);
    if (s->type == MH_SETTING_LISTEN) {
        mh_config_clear_listen(c);
        if (t == LUA_TSTRING)
            return mh_setting_parse(c, s, lua_tostring(L, vidx), err, errlen);
        if (t != LUA_TTABLE) {
            snprintf(err, errlen, "listen: expected a string or a list of entries");
            return -1;
        }
        lua_getfield(L, vidx, "addr");
        bool entry = !lua_isnil(L, -1);
        lua_pop(L, 1);
        if (entry) /* listen = { addr = ..., tls = ... } */
            return lua_listen_entry(c, s, L, vidx, 1, err, errlen);
        lua_Integer n = luaL_len(L, vidx);
        for (lua_Integer i = 1; i <= n; i++) {
            lua_rawgeti(L, vidx, i);
            int rc = lua_listen_entry(c, s, L, lua_gettop(L), i, err, errlen);
            lua_pop(L, 1);
            if (rc < 0)
                return rc;
        }
        return 0;
    }
    if (t == LUA_TNUMBER && s->type != MH_SETTING_STRING)
        return mh_setting_set_number(c, s, lua_tonumber(L, vidx), err, errlen);
    if (t == LUA_TBOOLEAN && s->list && !lua_toboolean(L, vidx))
        return mh_setting_parse(c, s, "off", err, errlen); /* false: none */
    if (t == LUA_TTABLE && s->list) {
        /* { "a", "b" } is "a,b"; the check then sees each name (a comma inside one fails it) */
        vidx = lua_absindex(L, vidx);
        lua_Integer n = luaL_len(L, vidx);
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_rawgeti(L, vidx, i) != LUA_TSTRING) {
                snprintf(err, errlen, "%s: entry %lld is not a string", s->name, (long long)i);
                return -1;
            }
            luaL_addvalue(&b);
            if (i < n)
                luaL_addchar(&b, ',');
        }
        luaL_pushresult(&b);
        const char *v = lua_rawlen(L, -1) ? lua_tostring(L, -1) : "off"; /* {}: none */
        int rc = mh_setting_parse(c, s, v, err, errlen) < 0
                     ? -1
                     : mh_setting_check(c, s, err, errlen);
        lua_pop(L, 1);
        return rc;
    }
    /* A choice is checked now, not at the merge, so the error names the script's line. */
    if (t == LUA_TSTRING || (t == LUA_TNUMBER && s->type == MH_SETTING_STRING))
        return mh_setting_parse(c, s, lua_tostring(L, vidx), err, errlen) < 0
                   ? -1
                   : mh_setting_check(c, s, err, errlen);
    snprintf(err, errlen, "%s: unexpected %s", s->name, lua_typename(L, t));
    return -1;
}

int mh_config_apply_lua(struct mh_config *c, lua_State *L, int idx, char *err, size_t errlen)
{
    idx = lua_absindex(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING) {
            lua_pop(L, 2);
            snprintf(err, errlen, "http.server: setting names must be strings");
            return -1;
        }
        size_t klen;
        const char *k = lua_tolstring(L, -2, &klen);
        const struct mh_setting *s = mh_setting_find(k, klen, false);
        if (!s) {
            snprintf(err, errlen, "http.server: unknown setting \"%s\"", k);
            lua_pop(L, 2);
            return -1;
        }
        int rc = 0;
        if (!c->_from_cli[s - mh_settings])
            rc = apply_lua_value(c, s, L, -1, err, errlen);
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

int mh_config_changed(struct mh_config *c, lua_State *L, int idx, char *out, size_t outlen)
{
    idx = lua_absindex(L, idx);
    size_t used = 0;
    int n = 0;
    out[0] = 0;
    struct mh_config *asked = malloc(sizeof *asked);
    if (!asked) {
        fputs("moonhttp: out of memory\n", stderr);
        exit(1);
    }
    mh_config_init(asked);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        size_t klen;
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &klen) : NULL;
        const struct mh_setting *s = k ? mh_setting_find(k, klen, false) : NULL;
        /* A reload does apply shared dicts it adds, and says itself which size needs a restart
         * (server/shared_zones.c). */
        if (s && !c->_from_cli[s - mh_settings] && s->type != MH_SETTING_SHARED) {
            char err[256];
            /* A value that does not even parse differs too (a restart would fail on it), and
             * is named every time: there is no value to remember. */
            size_t i = (size_t)(s - mh_settings);
            bool parsed = apply_lua_value(asked, s, L, -1, err, sizeof err) == 0;
            bool same = parsed && mh_setting_same(s, asked, c);
            bool said = parsed && c->_asked && c->_asked->_in_script[i] &&
                        mh_setting_same(s, asked, c->_asked);
            asked->_in_script[i] = parsed;
            if (!same && !said) {
                int w = snprintf(out + used, outlen - used, "%s%s", n ? ", " : "", s->name);
                if (w > 0 && (size_t)w < outlen - used)
                    used += (size_t)w;
                n++;
            }
        }
        lua_pop(L, 1);
    }
    if (c->_asked) {
        mh_config_free(c->_asked);
        free(c->_asked);
    }
    c->_asked = asked;
    return n;
}
