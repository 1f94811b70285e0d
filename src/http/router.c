/*
 * Go 1.22+ ServeMux semantics on an immutable tree.
 *
 * A pattern is parsed into segments: literals (stored unescaped, as Go does),
 * single wildcards, a trailing {$} and a final multi ({name...} or the
 * anonymous one that a trailing slash stands for). At build time the routes
 * of each host are sorted by their segments, which makes every tree node a
 * contiguous run of the sorted array: the tree is built in one pass, and the
 * literal children of a node come out grouped.
 *
 * Lookup walks the tree depth first, preferring at each position a literal
 * child, then the wildcard child, then the multi child, and resolves the method
 * at the leaf; it backtracks when a leaf has no route for the method. Because
 * conflicting pairs are rejected at build time, the first route found this way
 * is the most specific one that matches (a literal at the first point where two
 * matching patterns differ rules out the other being more specific), which is
 * the same answer as Go's method-first tree.
 */
#include "router.h"
#include "path.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Order matters: it is the sort order, hence the order children are tried. */
enum seg_kind { SEG_LIT, SEG_WILD, SEG_DOLLAR, SEG_MULTI };

struct rseg {
    uint32_t kind;
    uint32_t off, len; /* LIT: unescaped text in the route data; WILD/MULTI: the name */
};

/*
 * One allocation per route: the header, the segments, then the data area
 * "pattern\0where\0host\0literals". Offsets rather than pointers so that the
 * router copies a route with one memcpy.
 */
struct mh_route {
    size_t size;
    int handler_id;
    uint32_t index; /* registration order, for deterministic conflict reports */
    int32_t mid;    /* method id in the router, -1 for "any method" */
    uint32_t nseg, nwild;
    uint32_t pattern_len, method_len; /* the method is a prefix of the pattern */
    uint32_t where_off, where_len, host_off, host_len;
    struct rseg segs[];
};

static const char *route_data(const struct mh_route *r)
{
    return (const char *)(r->segs + r->nseg);
}

static const char *seg_text(const struct mh_route *r, const struct rseg *s)
{
    return route_data(r) + s->off;
}

/*
 * A route that ends at a node, with what lookup needs copied in, so that
 * resolving the method does not touch the (cold) route itself.
 */
struct rleaf {
    int16_t mid;          /* -1: any method */
    uint16_t named_multi; /* ends in {name...}: the multi match is captured */
    int32_t handler_id;
    const struct mh_route *route;
};

/* Nodes with more literal children than this get an open-addressing table. */
#define MH_LIT_LINEAR_MAX 8

/*
 * Nodes live in one arena block, allocated depth first, so a route's chain of
 * nodes is contiguous. Links are 32-bit byte offsets from the node (0 = none)
 * and a literal child carries its key inline: a node header is 56 bytes, a
 * probe touches one cache line, and 10,000 routes stay small enough for the
 * caches. Read links with kid(), lit() and leaves().
 */
struct rnode {
    uint32_t hash, keylen; /* this node's key as a literal child of its parent */
    uint32_t nlits;
    uint32_t hmask; /* table size - 1; 0 when there is no table */
    int32_t lits;   /* -> int32_t[nlits], offsets of the literal children */
    int32_t htab;   /* -> struct hslot[hmask + 1], open addressing over lits */
    int32_t wild, dollar, multi;
    int32_t leaf; /* -> struct rleaf[nleaf], routes ending here, any order */
    uint32_t nleaf;
    int32_t leaf_any;   /* index into leaf of the method-less route, or -1 */
    uint64_t leaf_mask; /* method ids present in leaf */
    char key[];
};

static const struct rnode *kid(const struct rnode *n, int32_t rel)
{
    return rel ? (const struct rnode *)((const char *)n + rel) : NULL;
}

static const struct rnode *lit(const struct rnode *n, uint32_t i)
{
    return (const struct rnode *)((const char *)n +
                                  ((const int32_t *)((const char *)n + n->lits))[i]);
}

static const struct rleaf *leaves(const struct rnode *n)
{
    return (const struct rleaf *)((const char *)n + n->leaf);
}

static int32_t rel_to(const void *from, const void *to)
{
    return (int32_t)((const char *)to - (const char *)from);
}

/*
 * The hash sits in the slot so that a collision costs no visit to another
 * node, and the child is an offset from the parent (the arena is one block),
 * so a slot is 8 bytes: the table of a 10,000-child node stays in L2.
 */
struct hslot {
    uint32_t hash;
    int32_t rel; /* child - parent in bytes; 0 = empty */
};

/* One block sized at build time from an upper bound, never reallocated. */
struct arena {
    char *base;
    size_t used, cap;
};

struct rhost {
    const char *host; /* lowercase */
    size_t len;
    struct rnode *root;
};

struct mh_router_builder {
    struct mh_route **routes;
    size_t n, cap;
};

struct mh_router {
    struct mh_route **routes; /* registration order, owned */
    size_t n;
    const char *mnames[MH_ROUTE_MAX_METHODS]; /* sorted, as Allow lists them */
    uint32_t mlens[MH_ROUTE_MAX_METHODS];
    unsigned nmethods;
    int get_id, head_id;
    struct rhost *hosts; /* sorted by host */
    size_t nhosts;
    struct rnode *root;       /* patterns without a host; NULL if none */
    struct arena arena;       /* every node, leaf and child table */
    struct exact_slot *exact; /* all-literal paths → their node (see build_exact) */
    uint32_t exact_mask;      /* table size - 1; 0 when there is no table */
    char *exact_text;         /* the paths the slots point into */
};

struct exact_slot {
    uint32_t hash, len;
    const char *path;
    const struct rnode *node;
};

static int set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- pattern parsing ---------------------------------------------------- */

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
        set_err(err, errlen, "invalid pattern \"%.*s\": %s", (int)len, pattern, reason_);          \
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
        set_err(err, errlen, "out of memory");
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

/* ---- builder ------------------------------------------------------------- */

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
            return set_err(err, errlen, "out of memory");
        }
        b->routes = nr;
        b->cap = cap;
    }
    r->index = (uint32_t)b->n;
    b->routes[b->n++] = r;
    return 0;
}

/* ---- relationships between patterns (Go's pattern.go) ------------------- */

enum rel { REL_EQUIV, REL_GENERAL, REL_SPECIFIC, REL_DISJOINT, REL_OVERLAPS };

static enum rel combine(enum rel r1, enum rel r2)
{
    switch (r1) {
    case REL_EQUIV:
        return r2;
    case REL_DISJOINT:
        return REL_DISJOINT;
    case REL_OVERLAPS:
        return r2 == REL_DISJOINT ? REL_DISJOINT : REL_OVERLAPS;
    case REL_GENERAL:
    case REL_SPECIFIC:
        if (r2 == REL_EQUIV)
            return r1;
        if ((r1 == REL_GENERAL && r2 == REL_SPECIFIC) || (r1 == REL_SPECIFIC && r2 == REL_GENERAL))
            return REL_OVERLAPS;
        return r2;
    }
    return REL_DISJOINT;
}

static int method_is(const struct mh_route *r, const char *m)
{
    size_t n = strlen(m);
    return r->method_len == n && memcmp(route_data(r), m, n) == 0;
}

static enum rel compare_methods(const struct mh_route *a, const struct mh_route *b)
{
    if (a->method_len == b->method_len && memcmp(route_data(a), route_data(b), a->method_len) == 0)
        return REL_EQUIV;
    if (a->method_len == 0)
        return REL_GENERAL;
    if (b->method_len == 0)
        return REL_SPECIFIC;
    if (method_is(a, "GET") && method_is(b, "HEAD"))
        return REL_GENERAL;
    if (method_is(a, "HEAD") && method_is(b, "GET"))
        return REL_SPECIFIC;
    return REL_DISJOINT;
}

static enum rel compare_segments(const struct mh_route *a, const struct rseg *s1,
                                 const struct mh_route *b, const struct rseg *s2)
{
    if (s1->kind == SEG_MULTI && s2->kind == SEG_MULTI)
        return REL_EQUIV;
    if (s1->kind == SEG_MULTI)
        return REL_GENERAL;
    if (s2->kind == SEG_MULTI)
        return REL_SPECIFIC;
    if (s1->kind == SEG_WILD && s2->kind == SEG_WILD)
        return REL_EQUIV;
    /* A single wildcard never matches the trailing slash that {$} stands for. */
    if (s1->kind == SEG_WILD)
        return s2->kind == SEG_DOLLAR ? REL_DISJOINT : REL_GENERAL;
    if (s2->kind == SEG_WILD)
        return s1->kind == SEG_DOLLAR ? REL_DISJOINT : REL_SPECIFIC;
    if (s1->kind != s2->kind)
        return REL_DISJOINT;
    if (s1->kind == SEG_DOLLAR)
        return REL_EQUIV;
    return s1->len == s2->len && memcmp(seg_text(a, s1), seg_text(b, s2), s1->len) == 0
               ? REL_EQUIV
               : REL_DISJOINT;
}

static enum rel compare_paths(const struct mh_route *a, const struct mh_route *b)
{
    int multi1 = a->segs[a->nseg - 1].kind == SEG_MULTI;
    int multi2 = b->segs[b->nseg - 1].kind == SEG_MULTI;
    if (a->nseg != b->nseg && !multi1 && !multi2)
        return REL_DISJOINT;
    enum rel rel = REL_EQUIV;
    uint32_t n = a->nseg < b->nseg ? a->nseg : b->nseg;
    for (uint32_t i = 0; i < n; i++) {
        rel = combine(rel, compare_segments(a, &a->segs[i], b, &b->segs[i]));
        if (rel == REL_DISJOINT)
            return rel;
    }
    if (a->nseg == b->nseg)
        return rel;
    if (a->nseg < b->nseg && multi1)
        return combine(rel, REL_GENERAL);
    if (b->nseg < a->nseg && multi2)
        return combine(rel, REL_SPECIFIC);
    return REL_DISJOINT;
}

/* Appends "/seg" as Go's writeSegment does: a name for a wildcard, nothing for a multi. */
static void put_segment(char *buf, size_t cap, size_t *w, const struct mh_route *r,
                        const struct rseg *s)
{
    if (*w + 1 < cap)
        buf[(*w)++] = '/';
    if (s->kind == SEG_LIT || s->kind == SEG_WILD) {
        const char *t = seg_text(r, s);
        for (uint32_t i = 0; i < s->len && *w + 1 < cap; i++)
            buf[(*w)++] = t[i];
    }
    buf[*w] = '\0';
}

/* A path both patterns match (Go's commonPath); they must not be disjoint. */
static void common_path(const struct mh_route *a, const struct mh_route *b, char *buf, size_t cap)
{
    size_t w = 0;
    uint32_t i;
    buf[0] = '\0';
    for (i = 0; i < a->nseg && i < b->nseg; i++) {
        const struct rseg *s1 = &a->segs[i], *s2 = &b->segs[i];
        if (s1->kind == SEG_WILD || s1->kind == SEG_MULTI)
            put_segment(buf, cap, &w, b, s2);
        else
            put_segment(buf, cap, &w, a, s1);
    }
    for (; i < a->nseg; i++)
        put_segment(buf, cap, &w, a, &a->segs[i]);
    for (; i < b->nseg; i++)
        put_segment(buf, cap, &w, b, &b->segs[i]);
}

/* ---- tree ---------------------------------------------------------------- */

static uint32_t hash_bytes(uint32_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}
#define MH_FNV_BASIS 2166136261u

static int seg_cmp(const struct mh_route *a, const struct rseg *s1, const struct mh_route *b,
                   const struct rseg *s2)
{
    if (s1->kind != s2->kind)
        return s1->kind < s2->kind ? -1 : 1;
    if (s1->kind != SEG_LIT)
        return 0;
    uint32_t n = s1->len < s2->len ? s1->len : s2->len;
    int c = memcmp(seg_text(a, s1), seg_text(b, s2), n);
    if (c)
        return c;
    return s1->len < s2->len ? -1 : s1->len > s2->len;
}

static int host_cmp(const struct mh_route *a, const struct mh_route *b)
{
    uint32_t n = a->host_len < b->host_len ? a->host_len : b->host_len;
    int c = memcmp(route_data(a) + a->host_off, route_data(b) + b->host_off, n);
    if (c)
        return c;
    return a->host_len < b->host_len ? -1 : a->host_len > b->host_len;
}

/* Host, then segments (a prefix sorts first), then registration order. */
static int route_sort_cmp(const void *pa, const void *pb)
{
    const struct mh_route *a = *(const struct mh_route *const *)pa;
    const struct mh_route *b = *(const struct mh_route *const *)pb;
    int c = host_cmp(a, b);
    if (c)
        return c;
    uint32_t n = a->nseg < b->nseg ? a->nseg : b->nseg;
    for (uint32_t i = 0; i < n; i++) {
        c = seg_cmp(a, &a->segs[i], b, &b->segs[i]);
        if (c)
            return c;
    }
    if (a->nseg != b->nseg)
        return a->nseg < b->nseg ? -1 : 1;
    return a->index < b->index ? -1 : 1;
}

static void *arena_alloc(struct arena *a, size_t n)
{
    n = (n + 7) & ~(size_t)7;
    if (a->cap - a->used < n)
        return NULL; /* the bound in arena_bound was wrong: reported as out of memory */
    void *p = a->base + a->used;
    a->used += n;
    memset(p, 0, n);
    return p;
}

/*
 * An upper bound on the arena the trees of these routes need: at most one
 * node per segment plus one root per route, each with its padding, key,
 * child pointer and a share of a hash table of at most 4 slots per child.
 */
static size_t arena_bound(struct mh_route *const *routes, size_t n)
{
    size_t nodes = 0, keys = 0;
    for (size_t i = 0; i < n; i++) {
        nodes += 1 + routes[i]->nseg;
        for (uint32_t k = 0; k < routes[i]->nseg; k++)
            keys += routes[i]->segs[k].len;
    }
    size_t per_node = sizeof(struct rnode) + 3 * 16 + sizeof(struct rnode *) +
                      4 * sizeof(struct hslot) + 16 * sizeof(struct hslot) / 8;
    return nodes * per_node + keys + n * (sizeof(struct rleaf) + 16) + 64;
}

static int node_index_lits(struct arena *a, struct rnode *n)
{
    if (n->nlits <= MH_LIT_LINEAR_MAX)
        return 0;
    uint32_t size = 16;
    while (size < n->nlits * 2)
        size *= 2;
    struct hslot *tab = arena_alloc(a, size * sizeof *tab);
    if (!tab)
        return -1;
    n->htab = rel_to(n, tab);
    n->hmask = size - 1;
    for (uint32_t i = 0; i < n->nlits; i++) {
        const struct rnode *c = lit(n, i);
        uint32_t j = c->hash & n->hmask;
        while (tab[j].rel)
            j = (j + 1) & n->hmask;
        tab[j] = (struct hslot){c->hash, rel_to(n, c)};
    }
    return 0;
}

/*
 * Builds the node for routes[0..cnt), which share their first `depth`
 * segments; `key` is the node's literal (NULL unless it is a literal child).
 * Routes with exactly `depth` segments end here; the others are grouped by
 * their segment at `depth` (the sort made each group contiguous). The node,
 * its leaf and its child table are allocated together, then the children,
 * depth first.
 */
static struct rnode *node_build(struct arena *a, const struct mh_route **routes, size_t cnt,
                                uint32_t depth, const char *key, uint32_t keylen)
{
    size_t nleaf = 0, nlits = 0;
    while (nleaf < cnt && routes[nleaf]->nseg == depth)
        nleaf++;
    for (size_t i = nleaf; i < cnt; i++)
        if (routes[i]->segs[depth].kind == SEG_LIT &&
            (i == nleaf || seg_cmp(routes[i - 1], &routes[i - 1]->segs[depth], routes[i],
                                   &routes[i]->segs[depth]) != 0))
            nlits++;
    size_t head = (sizeof(struct rnode) + keylen + 7) & ~(size_t)7;
    size_t lsize = nleaf * sizeof(struct rleaf);
    char *mem = arena_alloc(a, head + lsize + nlits * sizeof(int32_t));
    if (!mem)
        return NULL;
    struct rnode *n = (struct rnode *)mem;
    n->keylen = keylen;
    n->hash = hash_bytes(MH_FNV_BASIS, key, keylen);
    if (keylen)
        memcpy(n->key, key, keylen);
    struct rleaf *leaf = (struct rleaf *)(mem + head);
    int32_t *lits = (int32_t *)(mem + head + lsize);
    n->leaf = nleaf ? rel_to(n, leaf) : 0;
    n->lits = nlits ? rel_to(n, lits) : 0;
    n->leaf_any = -1;
    n->nleaf = (uint32_t)nleaf;
    for (size_t k = 0; k < nleaf; k++) {
        const struct mh_route *r = routes[k];
        const struct rseg *last = &r->segs[r->nseg - 1];
        leaf[k] =
            (struct rleaf){(int16_t)r->mid, last->kind == SEG_MULTI && last->len, r->handler_id, r};
        if (r->mid < 0) {
            if (n->leaf_any < 0)
                n->leaf_any = (int32_t)k;
        } else {
            n->leaf_mask |= UINT64_C(1) << r->mid;
        }
    }
    for (size_t i = nleaf; i < cnt;) {
        const struct mh_route *r = routes[i];
        const struct rseg *s = &r->segs[depth];
        size_t j = i + 1;
        while (j < cnt && seg_cmp(r, s, routes[j], &routes[j]->segs[depth]) == 0)
            j++;
        int lit = s->kind == SEG_LIT;
        struct rnode *child = node_build(a, routes + i, j - i, depth + 1,
                                         lit ? seg_text(r, s) : NULL, lit ? s->len : 0);
        if (!child)
            return NULL;
        if (lit)
            lits[n->nlits++] = rel_to(n, child);
        else if (s->kind == SEG_WILD)
            n->wild = rel_to(n, child);
        else if (s->kind == SEG_DOLLAR)
            n->dollar = rel_to(n, child);
        else
            n->multi = rel_to(n, child);
        i = j;
    }
    if (node_index_lits(a, n) < 0)
        return NULL;
    return n;
}

/* Finds the literal child for an already-unescaped key. */
/* Segments are short: an inline loop beats a call into libc's memcmp. */
static int key_eq(const char *a, const char *b, size_t n)
{
    if (n > 16)
        return memcmp(a, b, n) == 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/*
 * Finds the literal child for an unescaped key. FNV-1a is a serial chain of
 * multiplies, so it is computed only for nodes that have a table.
 */
static const struct rnode *find_lit_raw(const struct rnode *n, const char *key, size_t len)
{
    if (n->hmask) {
        uint32_t h = hash_bytes(MH_FNV_BASIS, key, len);
        const struct hslot *tab = (const struct hslot *)((const char *)n + n->htab);
        for (uint32_t j = h & n->hmask; tab[j].rel; j = (j + 1) & n->hmask) {
            const struct rnode *c = kid(n, tab[j].rel);
            if (tab[j].hash == h && c->keylen == len && key_eq(c->key, key, len))
                return c;
        }
        return NULL;
    }
    for (uint32_t i = 0; i < n->nlits; i++) {
        const struct rnode *c = lit(n, i);
        if (c->keylen == len && key_eq(c->key, key, len))
            return c;
    }
    return NULL;
}

/* Compares a literal with an escaped segment, decoding %XX on the fly. */
static int eq_decoded(const char *lit, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++, lit++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            c = (unsigned char)(mh_path_hexval((unsigned char)s[i + 1]) << 4 |
                                mh_path_hexval((unsigned char)s[i + 2]));
            i += 2;
        }
        if ((unsigned char)*lit != c)
            return 0;
    }
    return 1;
}

static uint32_t hash_decoded(const char *s, size_t n)
{
    uint32_t h = MH_FNV_BASIS;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            c = (unsigned char)(mh_path_hexval((unsigned char)s[i + 1]) << 4 |
                                mh_path_hexval((unsigned char)s[i + 2]));
            i += 2;
        }
        h = (h ^ c) * 16777619u;
    }
    return h;
}

/*
 * Finds the literal child for an escaped request segment. Literals are stored
 * unescaped, so "/a%62c" reaches the child "abc"; a malformed escape is
 * compared raw, as Go's pathUnescape falls back to the input.
 */
static const struct rnode *find_lit(const struct rnode *n, const char *s, size_t len, int pct)
{
    int has_pct = 0;
    long dl = pct ? mh_path_seg_decoded_len(s, len, &has_pct) : (long)len;
    if (!has_pct || dl < 0)
        return find_lit_raw(n, s, len);
    size_t klen = (size_t)dl;
    if (n->hmask) {
        uint32_t h = hash_decoded(s, len);
        const struct hslot *tab = (const struct hslot *)((const char *)n + n->htab);
        for (uint32_t j = h & n->hmask; tab[j].rel; j = (j + 1) & n->hmask) {
            const struct rnode *c = kid(n, tab[j].rel);
            if (tab[j].hash == h && c->keylen == klen && eq_decoded(c->key, s, len))
                return c;
        }
        return NULL;
    }
    for (uint32_t i = 0; i < n->nlits; i++) {
        const struct rnode *c = lit(n, i);
        if (c->keylen == klen && eq_decoded(c->key, s, len))
            return c;
    }
    return NULL;
}

/* ---- conflict detection -------------------------------------------------- */

/*
 * Instead of comparing all pairs, each pattern walks the tree along the paths
 * it can match and compares itself only with the routes it reaches there (the
 * tree is an index of the other patterns, as Go's routingIndex is). Only routes
 * registered earlier are reported, the earliest first, so the message reads
 * like Go's panic at the second registration.
 */
struct cwalk {
    const struct mh_route *p;
    const struct mh_route *q; /* earliest conflicting route so far */
    enum rel rel;
};

static void conflict_leaf(struct cwalk *c, const struct rnode *n)
{
    for (uint32_t i = 0; n && i < n->nleaf; i++) {
        const struct mh_route *q = leaves(n)[i].route;
        if (q->index >= c->p->index || (c->q && c->q->index < q->index))
            continue;
        enum rel m = compare_methods(c->p, q);
        if (m == REL_DISJOINT)
            continue;
        enum rel rel = combine(m, compare_paths(c->p, q));
        if (rel == REL_EQUIV || rel == REL_OVERLAPS) {
            c->q = q;
            c->rel = rel;
        }
    }
}

static void conflict_subtree(struct cwalk *c, const struct rnode *n)
{
    if (!n)
        return;
    conflict_leaf(c, n);
    for (uint32_t i = 0; i < n->nlits; i++)
        conflict_subtree(c, lit(n, i));
    conflict_subtree(c, kid(n, n->wild));
    conflict_subtree(c, kid(n, n->dollar));
    conflict_subtree(c, kid(n, n->multi));
}

static void conflict_walk(struct cwalk *c, const struct rnode *n, uint32_t depth)
{
    if (!n)
        return;
    if (depth == c->p->nseg) {
        conflict_leaf(c, n);
        return;
    }
    const struct rseg *s = &c->p->segs[depth];
    switch (s->kind) {
    case SEG_LIT:
        conflict_walk(c, find_lit_raw(n, seg_text(c->p, s), s->len), depth + 1);
        conflict_walk(c, kid(n, n->wild), depth + 1);
        conflict_leaf(c, kid(n, n->multi));
        break;
    case SEG_WILD:
        for (uint32_t i = 0; i < n->nlits; i++)
            conflict_walk(c, lit(n, i), depth + 1);
        conflict_walk(c, kid(n, n->wild), depth + 1);
        conflict_leaf(c, kid(n, n->multi));
        break;
    case SEG_DOLLAR:
        conflict_leaf(c, kid(n, n->dollar));
        conflict_leaf(c, kid(n, n->multi));
        break;
    default: /* a multi matches everything below, but not the node itself */
        for (uint32_t i = 0; i < n->nlits; i++)
            conflict_subtree(c, lit(n, i));
        conflict_subtree(c, kid(n, n->wild));
        conflict_subtree(c, kid(n, n->dollar));
        conflict_subtree(c, kid(n, n->multi));
        break;
    }
}

static void conflict_message(const struct mh_route *p, const struct mh_route *q, enum rel rel,
                             char *err, size_t errlen)
{
    char example[512], why[256];
    common_path(p, q, example, sizeof example);
    enum rel m = compare_methods(p, q), pr = compare_paths(p, q);
    const char *ps = route_data(p), *qs = route_data(q);
    if (rel == REL_EQUIV)
        snprintf(why, sizeof why, "both match the same requests");
    else if (pr == REL_OVERLAPS)
        snprintf(why, sizeof why, "both match some paths but neither is more specific");
    else if (m == REL_GENERAL)
        snprintf(why, sizeof why, "\"%s\" matches more methods but has a more specific path", ps);
    else
        snprintf(why, sizeof why, "\"%s\" matches fewer methods but has a more general path", ps);
    set_err(err, errlen,
            "pattern \"%s\" (registered at %s) conflicts with pattern \"%s\" (registered at %s): "
            "%s; both match \"%s\"",
            ps, route_data(p) + p->where_off, qs, route_data(q) + q->where_off, why, example);
}

/* ---- build --------------------------------------------------------------- */

/* Byte order, a prefix first (as Go sorts strings). Inline: method names are short. */
static int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    size_t n = an < bn ? an : bn;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (unsigned char)a[i] < (unsigned char)b[i] ? -1 : 1;
    return an < bn ? -1 : an > bn;
}

static int method_id(const struct mh_router *r, const char *m, size_t n)
{
    unsigned lo = 0, hi = r->nmethods;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        int c = name_cmp(r->mnames[mid], r->mlens[mid], m, n);
        if (c == 0)
            return (int)mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int intern_method(struct mh_router *r, const char *m, size_t n, char *err, size_t errlen)
{
    for (unsigned k = 0; k < r->nmethods; k++)
        if (r->mlens[k] == n && memcmp(r->mnames[k], m, n) == 0)
            return 0;
    if (r->nmethods == MH_ROUTE_MAX_METHODS)
        return set_err(err, errlen, "too many distinct methods (at most %d)", MH_ROUTE_MAX_METHODS);
    r->mnames[r->nmethods] = m;
    r->mlens[r->nmethods++] = (uint32_t)n;
    return 0;
}

/*
 * Interns the methods in sorted order, so that an Allow list is just the set
 * bits of a mask in order, and checks that the longest possible list fits.
 */
static int build_methods(struct mh_router *r, char *err, size_t errlen)
{
    int has_get = 0;
    for (size_t i = 0; i < r->n; i++) {
        const struct mh_route *rt = r->routes[i];
        if (!rt->method_len)
            continue;
        if (intern_method(r, route_data(rt), rt->method_len, err, errlen) < 0)
            return -1;
        has_get |= method_is(rt, "GET");
    }
    /* GET serves HEAD, so HEAD needs an id for Allow even if nobody registered it. */
    if (has_get && intern_method(r, "HEAD", 4, err, errlen) < 0)
        return -1;
    for (unsigned i = 1; i < r->nmethods; i++) { /* insertion sort: at most 64 */
        const char *m = r->mnames[i];
        uint32_t ml = r->mlens[i];
        unsigned j = i;
        for (; j > 0 && name_cmp(r->mnames[j - 1], r->mlens[j - 1], m, ml) > 0; j--) {
            r->mnames[j] = r->mnames[j - 1];
            r->mlens[j] = r->mlens[j - 1];
        }
        r->mnames[j] = m;
        r->mlens[j] = ml;
    }
    size_t total = 0;
    for (unsigned i = 0; i < r->nmethods; i++)
        total += r->mlens[i] + 2;
    if (total >= MH_ROUTE_ALLOW_MAX)
        return set_err(err, errlen, "the registered methods do not fit an Allow header of %d bytes",
                       MH_ROUTE_ALLOW_MAX);
    r->get_id = method_id(r, "GET", 3);
    r->head_id = method_id(r, "HEAD", 4);
    for (size_t i = 0; i < r->n; i++)
        r->routes[i]->mid = r->routes[i]->method_len
                                ? method_id(r, route_data(r->routes[i]), r->routes[i]->method_len)
                                : -1;
    return 0;
}

static const struct rnode *host_root(const struct mh_router *r, const char *h, size_t hlen);

static const struct rnode *root_for(const struct mh_router *r, const struct mh_route *rt)
{
    return rt->host_len ? host_root(r, route_data(rt) + rt->host_off, rt->host_len) : r->root;
}

/* Splits the sorted routes by host and builds one tree per host. */
static int build_trees(struct mh_router *r, const struct mh_route **sorted)
{
    size_t i = 0;
    while (i < r->n) {
        size_t j = i + 1;
        while (j < r->n && host_cmp(sorted[i], sorted[j]) == 0)
            j++;
        struct rnode *root = node_build(&r->arena, sorted + i, j - i, 0, NULL, 0);
        if (!root)
            return -1;
        if (!sorted[i]->host_len) {
            r->root = root;
        } else {
            struct rhost *nh = realloc(r->hosts, (r->nhosts + 1) * sizeof *nh);
            if (!nh)
                return -1;
            r->hosts = nh;
            r->hosts[r->nhosts++] = (struct rhost){route_data(sorted[i]) + sorted[i]->host_off,
                                                   sorted[i]->host_len, root};
        }
        i = j;
    }
    return 0;
}

/*
 * The fast path for the commonest request: a path that is, byte for byte,
 * an all-literal pattern ("/api/users"). Such a pattern, when its node has a
 * route for the request's method, is the most specific match there can be:
 * any other pattern matching the path has a wildcard or is a subtree, so it
 * matches a superset, and a pair where that is not strictly so (a
 * method-less literal against a method-specific wildcard) is a conflict the
 * build rejects. Host patterns would outrank it, so with any of them there
 * is no table. Paths are stored unescaped; a request that spells one with
 * %XX escapes takes the general path.
 */
static int exact_candidate(const struct mh_route *rt)
{
    if (rt->host_len || rt->nwild || rt->nseg == 0)
        return 0;
    for (uint32_t i = 0; i < rt->nseg; i++) {
        const struct rseg *sg = &rt->segs[i];
        const char *t = seg_text(rt, sg);
        if (sg->kind != SEG_LIT || sg->len == 0 || memchr(t, '/', sg->len) ||
            memchr(t, '%', sg->len) || (sg->len == 1 && t[0] == '.') ||
            (sg->len == 2 && t[0] == '.' && t[1] == '.'))
            return 0;
    }
    return 1;
}

/*
 * The exact table's hash: eight bytes a step (FNV-1a's byte loop was most
 * of a lookup). Only this table uses it; the keys are the routes' own and
 * every probe compares the whole path, so a poor spread costs probes only.
 */
static inline uint64_t hash_word(uint64_t h, const char *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
    h = (h ^ w) * 0x100000001b3ull;
    return h ^ h >> 29;
}

static uint32_t hash_path(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    if (n >= 8) {
        const char *last = s + n - 8; /* the final word overlaps the one before it */
        for (; s < last; s += 8)
            h = hash_word(h, s);
        h = hash_word(h, last);
    } else {
        for (; n > 0; s++, n--)
            h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    }
    return (uint32_t)(h ^ h >> 32);
}

static int build_exact(struct mh_router *r)
{
    if (r->nhosts || !r->root)
        return 0;
    size_t count = 0, text = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (!exact_candidate(r->routes[i]))
            continue;
        count++;
        for (uint32_t j = 0; j < r->routes[i]->nseg; j++)
            text += 1 + r->routes[i]->segs[j].len;
    }
    if (count == 0)
        return 0;
    uint32_t size = 16;
    while (size < 2 * count)
        size *= 2;
    r->exact = calloc(size, sizeof *r->exact);
    r->exact_text = malloc(text);
    if (!r->exact || !r->exact_text)
        return -1;
    r->exact_mask = size - 1;
    char *p = r->exact_text;
    for (size_t i = 0; i < r->n; i++) {
        const struct mh_route *rt = r->routes[i];
        if (!exact_candidate(rt))
            continue;
        const char *path = p;
        const struct rnode *n = r->root;
        for (uint32_t j = 0; j < rt->nseg && n; j++) {
            const struct rseg *sg = &rt->segs[j];
            *p++ = '/';
            memcpy(p, seg_text(rt, sg), sg->len);
            n = find_lit_raw(n, p, sg->len);
            p += sg->len;
        }
        uint32_t len = (uint32_t)(p - path), h = hash_path(path, len);
        uint32_t k = h & r->exact_mask;
        while (r->exact[k].path &&
               !(r->exact[k].len == len && memcmp(r->exact[k].path, path, len) == 0))
            k = (k + 1) & r->exact_mask;
        if (n && !r->exact[k].path) /* routes differing only by method share the node */
            r->exact[k] = (struct exact_slot){h, len, path, n};
    }
    return 0;
}

struct mh_router *mh_router_build(struct mh_router_builder *b, char *err, size_t errlen)
{
    struct mh_router *r = calloc(1, sizeof *r);
    const struct mh_route **sorted = NULL;
    if (!r)
        goto oom;
    r->get_id = r->head_id = -1;
    r->routes = calloc(b->n ? b->n : 1, sizeof *r->routes);
    if (!r->routes)
        goto oom;
    for (size_t i = 0; i < b->n; i++) {
        struct mh_route *c = malloc(b->routes[i]->size);
        if (!c)
            goto oom;
        memcpy(c, b->routes[i], b->routes[i]->size);
        r->routes[r->n++] = c;
    }
    if (build_methods(r, err, errlen) < 0)
        goto fail;
    sorted = malloc((r->n ? r->n : 1) * sizeof *sorted);
    if (!sorted)
        goto oom;
    memcpy(sorted, r->routes, r->n * sizeof *sorted);
    qsort(sorted, r->n, sizeof *sorted, route_sort_cmp);
    r->arena.cap = arena_bound(r->routes, r->n);
    if (r->arena.cap > INT32_MAX) { /* hash slots hold 32-bit offsets */
        set_err(err, errlen, "routes too large for one router (tree over 2 GiB)");
        goto fail;
    }
    r->arena.base = malloc(r->arena.cap);
    if (!r->arena.base)
        goto oom;
    if (build_trees(r, sorted) < 0)
        goto oom;
    free(sorted);
    sorted = NULL;

    /* Report the conflict that Go would panic on first: at the earliest second registration. */
    for (size_t i = 0; i < r->n; i++) {
        struct cwalk c = {r->routes[i], NULL, REL_DISJOINT};
        conflict_walk(&c, root_for(r, r->routes[i]), 0);
        if (c.q) {
            conflict_message(c.p, c.q, c.rel, err, errlen);
            goto fail;
        }
    }
    if (build_exact(r) < 0)
        goto oom;
    return r;
oom:
    set_err(err, errlen, "out of memory");
fail:
    free(sorted);
    mh_router_free(r);
    return NULL;
}

void mh_router_free(struct mh_router *r)
{
    if (!r)
        return;
    free(r->exact);
    free(r->exact_text);
    for (size_t i = 0; i < r->n; i++)
        free(r->routes[i]);
    free(r->routes);
    free(r->hosts);
    free(r->arena.base);
    free(r);
}

/* ---- lookup -------------------------------------------------------------- */

struct mctx {
    const char *path;
    size_t end;
    int pct;     /* the path contains '%': segments may need decoding */
    int mid;     /* request method id, -1 if no route names it */
    int head_id; /* the GET id when the request is HEAD, else -1 */
    struct mh_route_capture *caps;
    unsigned ncap;
    int exact; /* the match consumed the whole path (Go's exactMatch) */
};

/* The node of an all-literal path equal to `path`, from the build_exact table. */
static const struct rnode *exact_node(const struct mh_router *r, const char *path, size_t len)
{
    uint32_t h = hash_path(path, len);
    for (uint32_t k = h & r->exact_mask; r->exact[k].path; k = (k + 1) & r->exact_mask) {
        const struct exact_slot *e = &r->exact[k];
        if (e->hash == h && e->len == len && memcmp(e->path, path, len) == 0)
            return e->node;
    }
    return NULL;
}

/* Method resolution at a leaf: exact method, then GET for HEAD, then any method. */
static const struct rleaf *pick(const struct rnode *n, const struct mctx *c)
{
    int want = -1;
    if (c->mid >= 0 && (n->leaf_mask >> c->mid & 1))
        want = c->mid;
    else if (c->head_id >= 0 && (n->leaf_mask >> c->head_id & 1))
        want = c->head_id;
    if (want < 0)
        return n->leaf_any >= 0 ? &leaves(n)[n->leaf_any] : NULL;
    const struct rleaf *l = leaves(n);
    for (uint32_t i = 0; i < n->nleaf; i++)
        if (l[i].mid == want)
            return &l[i];
    return NULL;
}

static const struct rleaf *match_multi(const struct rnode *n, size_t off, unsigned ncap,
                                       struct mctx *c)
{
    const struct rleaf *l = pick(n, c);
    if (!l)
        return NULL;
    /* The trailing slash of "/a/" is an anonymous multi: nothing to capture. */
    if (l->named_multi)
        c->caps[ncap++] = (struct mh_route_capture){(uint32_t)off, (uint32_t)(c->end - off)};
    c->ncap = ncap;
    c->exact = off == c->end;
    return l;
}

/*
 * Depth-first match of path[pos..end) (path[pos] is '/') below n. A lone
 * trailing "/" is not a segment: only {$} or a multi take it, never {x}.
 */
static const struct rleaf *match_node(const struct rnode *n, size_t pos, unsigned ncap,
                                      struct mctx *c)
{
    const struct rleaf *l;
    if (pos == c->end) {
        if ((l = pick(n, c)) != NULL) {
            c->ncap = ncap;
            c->exact = 1;
        }
        return l;
    }
    if (pos + 1 == c->end) {
        if (n->dollar && (l = pick(kid(n, n->dollar), c)) != NULL) {
            c->ncap = ncap;
            c->exact = 1;
            return l;
        }
        return n->multi ? match_multi(kid(n, n->multi), c->end, ncap, c) : NULL;
    }
    size_t s = pos + 1, e = s;
    const char *p = c->path;
    while (e < c->end && p[e] != '/')
        e++;
    if (n->nlits) {
        const struct rnode *child =
            c->pct ? find_lit(n, p + s, e - s, 1) : find_lit_raw(n, p + s, e - s);
        if (child && (l = match_node(child, e, ncap, c)) != NULL)
            return l;
    }
    if (n->wild) {
        c->caps[ncap] = (struct mh_route_capture){(uint32_t)s, (uint32_t)(e - s)};
        if ((l = match_node(kid(n, n->wild), e, ncap + 1, c)) != NULL)
            return l;
    }
    return n->multi ? match_multi(kid(n, n->multi), s, ncap, c) : NULL;
}

/* Methods of every route whose path matches, whatever its method (for 405). */
static uint64_t collect_methods(const struct rnode *n, const char *p, size_t pos, size_t end)
{
    if (!n)
        return 0;
    if (pos == end)
        return n->leaf_mask;
    uint64_t m = n->multi ? kid(n, n->multi)->leaf_mask : 0;
    if (pos + 1 == end)
        return m | (n->dollar ? kid(n, n->dollar)->leaf_mask : 0);
    size_t s = pos + 1;
    const char *slash = memchr(p + s, '/', end - s);
    size_t e = slash ? (size_t)(slash - p) : end;
    if (n->nlits)
        m |= collect_methods(find_lit(n, p + s, e - s, 1), p, e, end);
    return m | collect_methods(kid(n, n->wild), p, e, end);
}

static int host_key_cmp(const char *key, size_t klen, const char *h, size_t hlen)
{
    size_t n = klen < hlen ? klen : hlen;
    for (size_t i = 0; i < n; i++) {
        unsigned char a = (unsigned char)key[i], b = (unsigned char)h[i];
        if (b >= 'A' && b <= 'Z')
            b += 32;
        if (a != b)
            return a < b ? -1 : 1;
    }
    return klen < hlen ? -1 : klen > hlen;
}

static const struct rnode *host_root(const struct mh_router *r, const char *h, size_t hlen)
{
    if (!hlen)
        return NULL;
    /* Hosts are few; sorted at build (they came from the sorted routes). */
    size_t lo = 0, hi = r->nhosts;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = host_key_cmp(r->hosts[mid].host, r->hosts[mid].len, h, hlen);
        if (c == 0)
            return r->hosts[mid].root;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Drops a port as Go's stripHostPort does ("[::1]:80" → "::1", "a:80" → "a"). */
static void strip_port(const char **h, size_t *n)
{
    const char *s = *h;
    size_t len = *n;
    if (len && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close && (size_t)(close - s) + 1 < len && close[1] == ':') {
            *h = s + 1;
            *n = (size_t)(close - s) - 1;
        }
        return;
    }
    const char *colon = memchr(s, ':', len);
    if (colon && !memchr(colon + 1, ':', len - (size_t)(colon - s) - 1))
        *n = (size_t)(colon - s);
}

/* Host-specific patterns first; if none of them matches, the host-less ones. */
static const struct rleaf *match_all(const struct mh_router *r, const struct rnode *hroot,
                                     struct mctx *c)
{
    const struct rleaf *l = NULL;
    if (!c->end || c->path[0] != '/')
        return NULL;
    c->pct = memchr(c->path, '%', c->end) != NULL;
    if (hroot && (l = match_node(hroot, 0, 0, c)) != NULL)
        return l;
    return r->root ? match_node(r->root, 0, 0, c) : NULL;
}

static enum mh_route_status redirect(struct mh_route_match *m, const char *loc, size_t len)
{
    m->location = loc;
    m->location_len = len;
    return MH_ROUTE_REDIRECT;
}

enum mh_route_status mh_router_lookup(const struct mh_router *r, const char *method,
                                      size_t method_len, const char *host, size_t host_len,
                                      const char *path, size_t path_len, enum mh_clean_mode clean,
                                      char *scratch, size_t scratch_len, struct mh_route_match *m)
{
    m->route = NULL;
    m->handler_id = -1;
    m->ncaptures = 0;
    m->allow = m->location = NULL;
    m->allow_len = m->location_len = 0;
    m->path = path;
    m->path_len = path_len;

    if (path_len > UINT32_MAX - 2) /* captures are 32-bit slices */
        return MH_ROUTE_NOT_FOUND;
    int connect = method_len == 7 && memcmp(method, "CONNECT", 7) == 0;
    if (r->exact_mask && !connect) {
        const struct rnode *n = exact_node(r, path, path_len);
        if (n) {
            int mid = method_id(r, method, method_len);
            struct mctx ec = {path, path_len, 0, mid, -1, m->captures, 0, 1};
            if (mid >= 0 && mid == r->head_id)
                ec.head_id = r->get_id;
            const struct rleaf *l = pick(n, &ec);
            if (l) {
                m->route = l->route;
                m->handler_id = l->handler_id;
                return MH_ROUTE_FOUND;
            }
        }
    }
    int cleaned = 0;
    if (!connect && !mh_path_is_clean(path, path_len)) {
        if (scratch_len < path_len + 2)
            return MH_ROUTE_NOT_FOUND;
        m->path_len = mh_path_clean(path, path_len, scratch);
        m->path = scratch;
        cleaned = 1;
    }
    strip_port(&host, &host_len);
    const struct rnode *hroot = host_root(r, host, host_len);
    int mid = method_id(r, method, method_len);
    struct mctx c = {m->path, m->path_len, 0, mid, -1, m->captures, 0, 0};
    if (mid >= 0 && mid == r->head_id)
        c.head_id = r->get_id;
    const struct rleaf *rt = match_all(r, hroot, &c);

    /* Go's trailing-slash redirect: "/a" → "/a/" when that is an exact match. */
    size_t n = m->path_len;
    if (!(rt && c.exact) && n && m->path[n - 1] != '/' && scratch_len >= n + 1) {
        if (m->path != scratch)
            memcpy(scratch, m->path, n);
        scratch[n] = '/';
        struct mh_route_capture caps[MH_ROUTE_MAX_WILDCARDS];
        struct mctx c2 = c;
        c2.path = scratch;
        c2.end = n + 1;
        c2.caps = caps;
        if (match_all(r, hroot, &c2) && c2.exact)
            return redirect(m, scratch, n + 1);
    }
    if (cleaned && clean == MH_CLEAN_REDIRECT)
        return redirect(m, m->path, m->path_len);
    if (rt) {
        m->route = rt->route;
        m->handler_id = rt->handler_id;
        m->ncaptures = c.ncap;
        return MH_ROUTE_FOUND;
    }
    uint64_t mask = 0;
    if (m->path_len && m->path[0] == '/') {
        mask = collect_methods(hroot, m->path, 0, m->path_len) |
               collect_methods(r->root, m->path, 0, m->path_len);
        /*
         * As Go's ServeMux: a method that would have been redirected to
         * path + "/" counts as allowed, so with only "GET /x/", "POST /x" is
         * a 405 (Allow: GET, HEAD), not a 404.
         */
        if (n && m->path[n - 1] != '/' && scratch_len >= n + 1) {
            if (m->path != scratch)
                memcpy(scratch, m->path, n);
            scratch[n] = '/';
            mask |= collect_methods(hroot, scratch, 0, n + 1) |
                    collect_methods(r->root, scratch, 0, n + 1);
        }
    }
    if (!mask)
        return MH_ROUTE_NOT_FOUND;
    if (r->get_id >= 0 && (mask >> r->get_id & 1))
        mask |= UINT64_C(1) << r->head_id;
    size_t w = 0;
    for (unsigned i = 0; i < r->nmethods; i++) {
        if (!(mask >> i & 1))
            continue;
        if (w) {
            memcpy(m->_allow_buf + w, ", ", 2);
            w += 2;
        }
        memcpy(m->_allow_buf + w, r->mnames[i], r->mlens[i]);
        w += r->mlens[i];
    }
    m->_allow_buf[w] = '\0';
    m->allow = m->_allow_buf;
    m->allow_len = w;
    return MH_ROUTE_METHOD_NOT_ALLOWED;
}

/* ---- accessors ------------------------------------------------------------ */

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

size_t mh_router_size(const struct mh_router *r)
{
    return r->n;
}
