/*
 * The machinery behind mh_settings[] (settings_table.c): defaults, reading a
 * value from a string, ranges, comparing, and the checks after the merge.
 */
#include "settings.h"

#include "listener.h"
#include "log.h"
#include "suggest.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

char *mh_config_strdup(const char *s)
{
    char *d = strdup(s);
    if (!d) {
        fputs("moonhttp: out of memory\n", stderr);
        exit(1);
    }
    return d;
}

void mh_config_init(struct mh_config *c)
{
    memset(c, 0, sizeof *c);
    mh_compress_conf_init(&c->compress);
    char err[256];
    for (size_t i = 0; i < mh_settings_count; i++) {
        const struct mh_setting *s = &mh_settings[i];
        /* listen's default applies at mh_config_validate: `run` has none */
        if (s->def && s->type != MH_SETTING_LISTEN &&
            mh_setting_parse(c, s, s->def, err, sizeof err) < 0) {
            fprintf(stderr, "moonhttp: the default of %s: %s\n", s->name, err);
            abort(); /* a bad row in mh_settings[]: tests/unit/settings catches it */
        }
    }
    c->mode = MH_MODE_SERVE;
}

void mh_config_clear_certs(struct mh_tls_certs *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->cert[i]);
        free(t->key[i]);
    }
    t->n = 0;
    t->tls13_only = false;
    free(t->client_ca);
    t->client_ca = NULL;
    t->client_optional = false;
    t->acme = false;
}

void mh_config_clear_listen(struct mh_config *c)
{
    for (size_t i = 0; i < c->nlisten; i++) {
        free(c->listen[i]);
        if (c->listen_certs[i]) {
            mh_config_clear_certs(c->listen_certs[i]);
            free(c->listen_certs[i]);
            c->listen_certs[i] = NULL;
        }
        c->listen_tls[i] = MH_LISTEN_TLS_UNSAID;
    }
    c->nlisten = 0;
}

void mh_config_free(struct mh_config *c)
{
    mh_config_clear_listen(c);
    mh_config_clear_certs(&c->tls);
    for (size_t i = 0; i < mh_settings_count; i++) {
        if (mh_settings[i].type == MH_SETTING_STRING) {
            char **field = (char **)((char *)c + mh_settings[i].offset);
            free(*field);
            *field = NULL;
        }
    }
    mh_config_shared_clear(c->shared, &c->nshared);
    if (c->_asked) {
        mh_config_free(c->_asked);
        free(c->_asked);
        c->_asked = NULL;
    }
}

/* Parses "1.5", "500ms", "2s", "1m" into seconds. */
static int parse_duration(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v))
        return -1;
    if (*end == 0 || strcmp(end, "s") == 0)
        ;
    else if (strcmp(end, "ms") == 0)
        v /= 1000;
    else if (strcmp(end, "m") == 0)
        v *= 60;
    else
        return -1;
    *out = v;
    return 0;
}

/* Parses "1048576", "64k", "1m", "1g" (binary multiples) into bytes. */
static int parse_bytes(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v))
        return -1;
    switch (*end) {
    case 0:
        break;
    case 'k':
    case 'K':
        v *= 1024;
        end++;
        break;
    case 'm':
    case 'M':
        v *= 1024 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024 * 1024;
        end++;
        break;
    default:
        return -1;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end)
        return -1;
    *out = v;
    return 0;
}

int mh_config_parse_bytes(const char *s, double *out)
{
    return parse_bytes(s, out);
}

void mh_config_shared_clear(struct mh_shared_decl *d, size_t *n)
{
    for (size_t i = 0; i < *n; i++)
        free(d[i].name);
    *n = 0;
}

/* Adds name = size (a string like "16m" or bytes) to d[], kept sorted by name. */
int mh_config_shared_add(struct mh_shared_decl *d, size_t *n, const char *name, size_t nlen,
                         const char *size, double bytes, char *err, size_t errlen)
{
    bool ok = nlen > 0 && nlen < 64;
    for (size_t i = 0; ok && i < nlen; i++)
        ok = name[i] == '_' || (name[i] >= '0' && name[i] <= '9') ||
             ((name[i] | 0x20) >= 'a' && (name[i] | 0x20) <= 'z');
    if (!ok) {
        snprintf(err, errlen, "shared: \"%.*s\" is not a name (1 to 63 letters, digits or _)",
                 (int)nlen, name);
        return -1;
    }
    if (size && parse_bytes(size, &bytes) < 0) {
        snprintf(err, errlen, "shared.%.*s: \"%s\" is not a size (e.g. 65536, 64k, 16m)", (int)nlen,
                 name, size);
        return -1;
    }
    const struct mh_setting *s = mh_setting_find("shared", 6, false);
    if (bytes < s->min || bytes > s->max || bytes != floor(bytes)) {
        snprintf(err, errlen, "shared.%.*s: %g bytes is out of range (%gk..%gg)", (int)nlen, name,
                 bytes, s->min / 1024, s->max / (1L << 30));
        return -1;
    }
    size_t at = 0;
    while (at < *n && strncmp(d[at].name, name, nlen) < 0)
        at++;
    if (at < *n && strlen(d[at].name) == nlen && !strncmp(d[at].name, name, nlen)) {
        snprintf(err, errlen, "shared: %.*s is declared twice", (int)nlen, name);
        return -1;
    }
    if (*n == MH_MAX_SHARED) {
        snprintf(err, errlen, "shared: at most %d dicts", MH_MAX_SHARED);
        return -1;
    }
    memmove(&d[at + 1], &d[at], (*n - at) * sizeof *d);
    d[at].name = strndup(name, nlen);
    d[at].size = (long)bytes;
    (*n)++;
    return d[at].name ? 0 : -1;
}

/* --shared cache=16m,limits=1m */
static int shared_from_flag(struct mh_config *c, const char *v, char *err, size_t errlen)
{
    mh_config_shared_clear(c->shared, &c->nshared);
    while (*v) {
        const char *comma = strchr(v, ','), *end = comma ? comma : v + strlen(v);
        const char *eq = memchr(v, '=', (size_t)(end - v));
        if (!eq) {
            snprintf(err, errlen, "shared: expected name=size, got \"%.*s\"", (int)(end - v), v);
            return -1;
        }
        char size[64];
        snprintf(size, sizeof size, "%.*s", (int)(end - eq - 1), eq + 1);
        if (mh_config_shared_add(c->shared, &c->nshared, v, (size_t)(eq - v), size, 0, err,
                                 errlen) < 0)
            return -1;
        v = comma ? comma + 1 : end;
    }
    return 0;
}

int mh_setting_set_number(struct mh_config *c, const struct mh_setting *s, double v, char *err,
                          size_t errlen)
{
    /* written so that NaN (0/0 in a script) is out of range too */
    if (!(v >= s->min && v <= s->max) || (s->type != MH_SETTING_DURATION && v != floor(v))) {
        snprintf(err, errlen, "%s: %g is out of range (%g..%g%s)", s->name, v, s->min, s->max,
                 s->type == MH_SETTING_DURATION ? " seconds" : ", whole numbers");
        return -1;
    }
    char *field = (char *)c + s->offset;
    if (s->type == MH_SETTING_DURATION)
        *(double *)field = v;
    else
        *(long *)field = (long)v;
    return 0;
}

int mh_setting_parse(struct mh_config *c, const struct mh_setting *s, const char *v, char *err,
                     size_t errlen)
{
    char *field = (char *)c + s->offset;
    double d;
    switch (s->type) {
    case MH_SETTING_DURATION:
        if (parse_duration(v, &d) < 0) {
            snprintf(err, errlen, "%s: \"%s\" is not a duration (e.g. 5, 1.5s, 500ms)", s->name, v);
            return -1;
        }
        return mh_setting_set_number(c, s, d, err, errlen);
    case MH_SETTING_BYTES:
        if (parse_bytes(v, &d) < 0) {
            snprintf(err, errlen, "%s: \"%s\" is not a size (e.g. 65536, 64k, 1m)", s->name, v);
            return -1;
        }
        return mh_setting_set_number(c, s, d, err, errlen);
    case MH_SETTING_INT: {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (end == v || *end || errno) {
            snprintf(err, errlen, "%s: \"%s\" is not a whole number", s->name, v);
            return -1;
        }
        return mh_setting_set_number(c, s, (double)n, err, errlen);
    }
    case MH_SETTING_BOOL:
        if (!strcmp(v, "on") || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "yes"))
            *(bool *)field = true;
        else if (!strcmp(v, "off") || !strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "no"))
            *(bool *)field = false;
        else {
            snprintf(err, errlen, "%s: \"%s\" is not on/off", s->name, v);
            return -1;
        }
        return 0;
    case MH_SETTING_STRING:
        free(*(char **)field);
        *(char **)field = mh_config_strdup(v);
        return 0;
    case MH_SETTING_LISTEN: {
        if (c->nlisten == MH_MAX_LISTEN) {
            snprintf(err, errlen, "listen: at most %d addresses", MH_MAX_LISTEN);
            return -1;
        }
        enum mh_listen_tls tls = MH_LISTEN_TLS_UNSAID;
        if (!strncmp(v, "https://", 8)) {
            tls = MH_LISTEN_TLS_SHARED;
            v += 8;
        } else if (!strncmp(v, "http://", 7)) {
            tls = MH_LISTEN_TLS_OFF;
            v += 7;
        }
        c->listen_tls[c->nlisten] = tls;
        c->listen[c->nlisten++] = mh_config_strdup(v);
        return 0;
    }
    case MH_SETTING_TLS:
        snprintf(err, errlen, "tls: set it in the script, or use --tls-cert and --tls-key");
        return -1;
    case MH_SETTING_MODULE:
        snprintf(err, errlen, "%s: set it in the script (a table)", s->name);
        return -1;
    case MH_SETTING_SHARED:
        return shared_from_flag(c, v, err, errlen);
    case MH_SETTING_COMPRESS: {
        struct mh_compress_conf *cc = (struct mh_compress_conf *)field;
        char *end;
        long level = strtol(v, &end, 10);
        mh_compress_conf_init(cc);
        if (!strcmp(v, "on") || !strcmp(v, "off")) {
            cc->on = v[1] == 'n';
        } else if (end != v && !*end && level >= 1 && level <= 9) {
            cc->on = true;
            cc->level = (int)level;
        } else {
            snprintf(err, errlen, "compress: \"%s\" is not on, off or a level 1..9", v);
            return -1;
        }
        return 0;
    }
    }
    return -1;
}

const struct mh_setting *mh_setting_find(const char *name, size_t len, bool flag_form)
{
    for (size_t i = 0; i < mh_settings_count; i++) {
        const char *n = mh_settings[i].name;
        if (strlen(n) != len)
            continue;
        size_t j = 0;
        for (; j < len; j++) {
            char ch = name[j];
            if (flag_form && ch == '-')
                ch = '_';
            if (ch != n[j])
                break;
        }
        if (j == len)
            return &mh_settings[i];
    }
    return NULL;
}

/* The known setting closest to a misspelt name, or NULL when none is close. */
const char *mh_setting_suggest(const char *name, size_t len, bool flag_form)
{
    struct mh_suggest s;
    mh_suggest_init(&s, name, len, flag_form);
    for (size_t i = 0; i < mh_settings_count; i++)
        mh_suggest_try(&s, mh_settings[i].name);
    return s.best;
}

bool mh_config_is_setting(const char *name, size_t len)
{
    return mh_setting_find(name, len, false) != NULL;
}

const char *mh_config_suggest(const char *name, size_t len)
{
    return mh_setting_suggest(name, len, false);
}

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool same_certs(const struct mh_tls_certs *a, const struct mh_tls_certs *b)
{
    if (!a || !b)
        return a == b;
    if (a->n != b->n || a->tls13_only != b->tls13_only || !same_str(a->client_ca, b->client_ca) ||
        a->client_optional != b->client_optional || a->acme != b->acme)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!same_str(a->cert[i], b->cert[i]) || !same_str(a->key[i], b->key[i]))
            return false;
    return true;
}

/* Whether setting s has the same value in a and b. */
bool mh_setting_same(const struct mh_setting *s, const struct mh_config *a,
                     const struct mh_config *b)
{
    const char *fa = (const char *)a + s->offset, *fb = (const char *)b + s->offset;
    switch (s->type) {
    case MH_SETTING_DURATION:
        return *(const double *)fa == *(const double *)fb;
    case MH_SETTING_BYTES:
    case MH_SETTING_INT:
        return *(const long *)fa == *(const long *)fb;
    case MH_SETTING_BOOL:
        return *(const bool *)fa == *(const bool *)fb;
    case MH_SETTING_STRING:
        return same_str(*(char *const *)fa, *(char *const *)fb);
    case MH_SETTING_LISTEN:
        if (a->nlisten != b->nlisten)
            return false;
        for (size_t i = 0; i < a->nlisten; i++)
            if (strcmp(a->listen[i], b->listen[i]) || a->listen_tls[i] != b->listen_tls[i] ||
                !same_certs(a->listen_certs[i], b->listen_certs[i]))
                return false;
        return true;
    case MH_SETTING_TLS:
        return same_certs(&a->tls, &b->tls);
    case MH_SETTING_MODULE:
        return true; /* its module keeps it, not struct mh_config */
    case MH_SETTING_SHARED:
        if (a->nshared != b->nshared)
            return false;
        for (size_t i = 0; i < a->nshared; i++)
            if (strcmp(a->shared[i].name, b->shared[i].name) ||
                a->shared[i].size != b->shared[i].size)
                return false;
        return true;
    case MH_SETTING_COMPRESS: /* both start from mh_compress_conf_init's memset: padding compares
                                 too */
        return memcmp(&a->compress, &b->compress, sizeof a->compress) == 0;
    }
    return false;
}

/* "a, b or c" into out. */
static void join_choices(const char *const *choices, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = 0;
    for (size_t i = 0; choices[i] && used < outlen; i++) {
        const char *sep = i == 0 ? "" : choices[i + 1] ? ", " : " or ";
        int w = snprintf(out + used, outlen - used, "%s%s", sep, choices[i]);
        used += w > 0 ? (size_t)w : 0;
    }
}

int mh_setting_check(const struct mh_config *c, const struct mh_setting *s, char *err,
                     size_t errlen)
{
    if (s->type != MH_SETTING_STRING)
        return 0;
    const char *v = *(char *const *)((const char *)c + s->offset);
    if (!v)
        return 0;
    if (s->choices) {
        for (size_t i = 0; s->choices[i]; i++)
            if (!strcmp(v, s->choices[i]))
                return 0;
        char expect[128];
        join_choices(s->choices, expect, sizeof expect);
        struct mh_suggest near;
        mh_suggest_init(&near, v, strlen(v), false);
        for (size_t i = 0; s->choices[i]; i++)
            mh_suggest_try(&near, s->choices[i]);
        snprintf(err, errlen, "%s: \"%s\" is not %s%s%s%s", s->name, v, expect,
                 near.best ? " (did you mean \"" : "", near.best ? near.best : "",
                 near.best ? "\"?)" : "");
        return -1;
    }
    const char *why = s->check ? s->check(v) : NULL;
    if (!why)
        return 0;
    snprintf(err, errlen, "%s: \"%s\" is not %s%s%s%s", s->name, v, s->expect, *why ? " (" : "",
             why, *why ? ")" : "");
    return -1;
}

/*
 * free_ports: "host:port" becomes "host:0", so the kernel picks a free port
 * (tests run side by side without agreeing on ports). An all-addresses host
 * becomes loopback of the same family: a server under test answers on this
 * machine only. addr was checked by mh_listen_addr_parse.
 */
static char *free_port_addr(const char *addr)
{
    char host[256] = "";
    if (addr[0] == '[')
        snprintf(host, sizeof host, "%.*s", (int)(strchr(addr, ']') - addr - 1), addr + 1);
    else if (strrchr(addr, ':'))
        snprintf(host, sizeof host, "%.*s", (int)(strrchr(addr, ':') - addr), addr);
    char out[300];
    if (strchr(host, ':')) /* IPv6 */
        snprintf(out, sizeof out, "[%s]:0", strcmp(host, "::") ? host : "::1");
    else
        snprintf(out, sizeof out, "%s:0",
                 !host[0] || !strcmp(host, "*") || !strcmp(host, "0.0.0.0") ? "127.0.0.1" : host);
    return mh_config_strdup(out);
}

static void use_free_ports(struct mh_config *c)
{
    for (size_t i = 0; i < c->nlisten; i++) {
        char *was = c->listen[i];
        c->listen[i] = free_port_addr(was);
        free(was);
    }
    if (strcmp(c->metrics, "off")) {
        char *was = c->metrics;
        c->metrics = free_port_addr(was);
        free(was);
    }
}

/*
 * The ACME zone (MH_ACME_ZONE), declared once beside the script's dicts. Its
 * dotted name is one mh_config_shared_add refuses, so no script's dict can
 * be it; the list stays sorted by name as the others expect.
 */
static int add_acme_zone(struct mh_config *c, char *err, size_t errlen)
{
    size_t at = 0;
    while (at < c->nshared && strcmp(c->shared[at].name, MH_ACME_ZONE) < 0)
        at++;
    if (at < c->nshared && !strcmp(c->shared[at].name, MH_ACME_ZONE))
        return 0;
    if (c->nshared == MH_MAX_SHARED) {
        snprintf(err, errlen, "shared: %d dicts, and an ACME listener needs one more",
                 MH_MAX_SHARED);
        return -1;
    }
    memmove(&c->shared[at + 1], &c->shared[at], (c->nshared - at) * sizeof c->shared[0]);
    c->shared[at] = (struct mh_shared_decl){
        .name = mh_config_strdup(MH_ACME_ZONE),
        .size = MH_ACME_ZONE_SIZE,
    };
    c->nshared++;
    return 0;
}

int mh_config_validate(struct mh_config *c, char *err, size_t errlen)
{
    for (size_t i = 0; i < mh_settings_count; i++)
        if (mh_setting_check(c, &mh_settings[i], err, errlen) < 0)
            return -1;
    const struct mh_setting *listen = mh_setting_find("listen", 6, false);
    if (c->nlisten == 0 && c->mode != MH_MODE_RUN &&
        mh_setting_parse(c, listen, listen->def, err, errlen) < 0)
        return -1;
    for (size_t i = 0; i < c->nlisten; i++) {
        struct sockaddr_storage ss;
        socklen_t len;
        const char *e = mh_listen_addr_parse(c->listen[i], &ss, &len);
        if (e) {
            snprintf(err, errlen, "listen: \"%s\": %s", c->listen[i], e);
            return -1;
        }
    }
    if (c->free_ports)
        use_free_ports(c);
    if (!c->tls_cert != !c->tls_key) {
        snprintf(err, errlen, "--tls-cert and --tls-key go together");
        return -1;
    }
    if (c->tls_cert) {
        mh_config_clear_certs(&c->tls);
        c->tls.cert[0] = mh_config_strdup(c->tls_cert);
        c->tls.key[0] = mh_config_strdup(c->tls_key);
        c->tls.n = 1;
    }
    bool used = false;
    for (size_t i = 0; i < c->nlisten; i++) {
        if (c->listen_tls[i] == MH_LISTEN_TLS_SHARED && c->tls.n == 0 && !c->tls.acme) {
            snprintf(err, errlen, "listen \"%s\": TLS asked for, but no tls certificates are set",
                     c->listen[i]);
            return -1;
        }
        used = used || mh_config_listen_tls(c, i) == &c->tls;
    }
    if ((c->tls.n > 0 || c->tls.acme) && !used && c->mode == MH_MODE_SERVE) {
        snprintf(err, errlen,
                 "tls: no listener uses the certificates (with several listeners, "
                 "mark one { addr = ..., tls = true } or \"https://addr\")");
        return -1;
    }
    return mh_config_has_acme(c) ? add_acme_zone(c, err, errlen) : 0;
}

bool mh_config_has_acme(const struct mh_config *c)
{
    for (size_t i = 0; i < c->nlisten; i++) {
        const struct mh_tls_certs *t = mh_config_listen_tls(c, i);
        if (t && t->acme)
            return true;
    }
    return false;
}

const struct mh_tls_certs *mh_config_listen_tls(const struct mh_config *c, size_t i)
{
    switch (c->listen_tls[i]) {
    case MH_LISTEN_TLS_OWN:
        return c->listen_certs[i];
    case MH_LISTEN_TLS_SHARED:
        return &c->tls;
    case MH_LISTEN_TLS_UNSAID:
        return c->nlisten == 1 && (c->tls.n > 0 || c->tls.acme) ? &c->tls : NULL;
    default:
        return NULL;
    }
}

int mh_config_workers(const struct mh_config *c)
{
    if (c->dev)
        return 1;
    if (strcmp(c->workers, "auto") == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (int)n : 1;
    }
    return atoi(c->workers);
}
