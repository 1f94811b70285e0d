/*
 * A route: a pattern parsed as Go's parsePattern does, into one allocation of
 * segments and text, and what the router's users read of it (its pattern,
 * where it was registered, its wildcard names). The builder collects routes.
 */
#include "router_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int mh_router_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/*
 * Go accepts any Unicode letter; we accept any non-ASCII byte as a letter
 * rather than carry a Unicode table, so a few names Go rejects are accepted.
 */
static int is_valid_name(const char *s, size_t n)
{
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c >= 0x80;
        int digit = c >= '0' && c <= '9';
        if (!letter && !(digit && i > 0))
            return 0;
    }
    return 1;
}

#define BAD(...)                                                                                   \
    do {                                                                                           \
        char reason_[160];                                                                         \
        snprintf(reason_, sizeof reason_, __VA_ARGS__);                                            \
        mh_router_set_err(err, errlen, "invalid pattern \"%.*s\": %s", (int)len, pattern,          \
                          reason_);                                                                \
        free(r);                                                                                   \
        return NULL;                                                                               \
    } while (0)

/*
 * Parses a pattern as Go's parsePattern does, with the same reasons for
 * rejection. Returns a route (index and mid not yet meaningful) or NULL with
 * err set.
 */
static struct mh_route *parse_pattern(const char *pattern, size_t len, int handler_id,
                                      const char *where, char *err, size_t errlen)
{
    struct mh_route *r = NULL;
    if (len == 0)
        BAD("empty pattern");
    if (memchr(pattern, '\0', len))
        BAD("contains a NUL byte");
    if (len > UINT32_MAX / 2)
        BAD("too long");

    size_t mlen = 0, rest = 0;
    for (size_t i = 0; i < len; i++) {
        if (pattern[i] == ' ' || pattern[i] == '\t') {
            mlen = i;
            rest = i + 1;
            while (rest < len && (pattern[rest] == ' ' || pattern[rest] == '\t'))
                rest++;
            break;
        }
    }
    for (size_t i = 0; i < mlen; i++)
        if (!is_tchar((unsigned char)pattern[i]))
            BAD("invalid method \"%.*s\"", (int)mlen, pattern);

    const char *slash = memchr(pattern + rest, '/', len - rest);
    if (!slash)
        BAD("host/path missing /");
    size_t host_off = rest, host_len = (size_t)(slash - pattern) - rest;
    if (memchr(pattern + host_off, '{', host_len))
        BAD("host contains '{' (missing initial '/'?)");
    const char *path = slash;
    size_t plen = len - (size_t)(slash - pattern);
    if (mlen && !(mlen == 7 && memcmp(pattern, "CONNECT", 7) == 0) && !mh_path_is_clean(path, plen))
        BAD("non-CONNECT pattern with unclean path can never match");

    size_t nslash = 0;
    for (size_t i = 0; i < plen; i++)
        nslash += path[i] == '/';
    size_t wlen = where ? strlen(where) : 0;
    size_t size =
        sizeof *r + nslash * sizeof(struct rseg) + len + 1 + wlen + 1 + host_len + 1 + plen;
    r = calloc(1, size);
    if (!r) {
        mh_router_set_err(err, errlen, "out of memory");
        return NULL;
    }
    r->size = size;
    r->handler_id = handler_id;
    r->mid = -1;
    r->nseg = (uint32_t)nslash; /* every '/' starts exactly one segment */
    r->pattern_len = (uint32_t)len;
    r->method_len = (uint32_t)mlen;
    char *data = (char *)(r->segs + r->nseg);
    memcpy(data, pattern, len);
    r->where_off = (uint32_t)len + 1;
    r->where_len = (uint32_t)wlen;
    if (wlen)
        memcpy(data + r->where_off, where, wlen);
    r->host_off = r->where_off + (uint32_t)wlen + 1;
    r->host_len = (uint32_t)host_len;
    for (size_t i = 0; i < host_len; i++) {
        char c = pattern[host_off + i];
        data[r->host_off + i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    uint32_t lit_off = r->host_off + (uint32_t)host_len + 1;
    const size_t path_off = (size_t)(path - pattern); /* names are offsets into the pattern */

    unsigned nseg = 0;
    size_t pos = 0;
    while (pos < plen) {
        struct rseg *sg = &r->segs[nseg++];
        pos++; /* the '/' */
        if (pos == plen) {
            sg->kind = SEG_MULTI; /* trailing slash: anonymous multi */
            break;
        }
        const char *e = memchr(path + pos, '/', plen - pos);
        size_t end = e ? (size_t)(e - path) : plen;
        const char *s = path + pos;
        size_t n = end - pos;
        const char *brace = memchr(s, '{', n);
        if (!brace) {
            long dl = mh_path_unescape(s, n, data + lit_off);
            if (dl < 0) { /* Go keeps a malformed escape as it is */
                memcpy(data + lit_off, s, n);
                dl = (long)n;
            }
            sg->kind = SEG_LIT;
            sg->off = lit_off;
            sg->len = (uint32_t)dl;
            lit_off += (uint32_t)dl;
        } else {
            if (brace != s)
                BAD("bad wildcard segment \"%.*s\" (must start with '{')", (int)n, s);
            if (s[n - 1] != '}')
                BAD("bad wildcard segment \"%.*s\" (must end with '}')", (int)n, s);
            size_t name_off = path_off + pos + 1, name_len = n - 2;
            if (name_len == 1 && s[1] == '$') {
                if (end != plen)
                    BAD("{$} not at end");
                sg->kind = SEG_DOLLAR;
                break;
            }
            int multi = name_len >= 3 && memcmp(s + 1 + name_len - 3, "...", 3) == 0;
            if (multi) {
                name_len -= 3;
                if (end != plen)
                    BAD("{...} wildcard not at end");
            }
            if (name_len == 0)
                BAD("empty wildcard name");
            if (!is_valid_name(pattern + name_off, name_len))
                BAD("bad wildcard name \"%.*s\"", (int)name_len, pattern + name_off);
            for (unsigned i = 0; i + 1 < nseg; i++) {
                const struct rseg *o = &r->segs[i];
                if ((o->kind == SEG_WILD || o->kind == SEG_MULTI) && o->len == name_len &&
                    memcmp(data + o->off, pattern + name_off, name_len) == 0)
                    BAD("duplicate wildcard name \"%.*s\"", (int)name_len, pattern + name_off);
            }
            if (++r->nwild > MH_ROUTE_MAX_WILDCARDS)
                BAD("too many wildcards (at most %d)", MH_ROUTE_MAX_WILDCARDS);
            sg->kind = multi ? SEG_MULTI : SEG_WILD;
            sg->off = (uint32_t)name_off;
            sg->len = (uint32_t)name_len;
        }
        pos = end;
    }
    return r;
}
#undef BAD

struct mh_router_builder *mh_router_builder_new(void)
{
    return calloc(1, sizeof(struct mh_router_builder));
}

void mh_router_builder_free(struct mh_router_builder *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++)
        free(b->routes[i]);
    free(b->routes);
    free(b);
}

int mh_router_add(struct mh_router_builder *b, const char *pattern, size_t len, int handler_id,
                  const char *where, char *err, size_t errlen)
{
    struct mh_route *r = parse_pattern(pattern, len, handler_id, where, err, errlen);
    if (!r)
        return -1;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        struct mh_route **nr = realloc(b->routes, cap * sizeof *nr);
        if (!nr) {
            free(r);
            return mh_router_set_err(err, errlen, "out of memory");
        }
        b->routes = nr;
        b->cap = cap;
    }
    r->index = (uint32_t)b->n;
    b->routes[b->n++] = r;
    return 0;
}

const char *mh_route_pattern(const struct mh_route *route)
{
    return route_data(route);
}

const char *mh_route_where(const struct mh_route *route)
{
    return route_data(route) + route->where_off;
}

const char *mh_route_wildcard_name(const struct mh_route *route, unsigned i, size_t *len)
{
    for (uint32_t k = 0; k < route->nseg; k++) {
        const struct rseg *s = &route->segs[k];
        if ((s->kind == SEG_WILD || (s->kind == SEG_MULTI && s->len)) && i-- == 0) {
            *len = s->len;
            return seg_text(route, s);
        }
    }
    return NULL;
}

int mh_route_wildcard_index(const struct mh_route *route, const char *name, size_t len)
{
    int idx = 0;
    for (uint32_t k = 0; k < route->nseg; k++) {
        const struct rseg *s = &route->segs[k];
        if (s->kind != SEG_WILD && !(s->kind == SEG_MULTI && s->len))
            continue;
        if (s->len == len && memcmp(seg_text(route, s), name, len) == 0)
            return idx;
        idx++;
    }
    return -1;
}
