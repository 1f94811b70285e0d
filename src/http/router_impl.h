#ifndef MH_ROUTER_IMPL_H
#define MH_ROUTER_IMPL_H
/*
 * The router's insides, shared by its files and by nothing else (router.h is
 * the contract): a route is a parsed pattern (route_parse.c), two routes
 * relate as Go's pattern.go says (route_relation.c, which also rejects
 * conflicting pairs), the routes of each host become an immutable tree
 * (router_tree.c), the build (router.c) ties those together with the method
 * table and the exact-path table, and router_lookup.c walks the result.
 *
 * The helpers below are inline because lookups run through them on every
 * request (find_lit_raw, hash_path, the node links, name_cmp).
 */
#include "router.h"
#include "path.h"

#include <stddef.h>
#include <stdint.h>
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

static inline const char *route_data(const struct mh_route *r)
{
    return (const char *)(r->segs + r->nseg);
}

static inline const char *seg_text(const struct mh_route *r, const struct rseg *s)
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

static inline const struct rnode *kid(const struct rnode *n, int32_t rel)
{
    return rel ? (const struct rnode *)((const char *)n + rel) : NULL;
}

static inline const struct rnode *lit(const struct rnode *n, uint32_t i)
{
    return (const struct rnode *)((const char *)n +
                                  ((const int32_t *)((const char *)n + n->lits))[i]);
}

static inline const struct rleaf *leaves(const struct rnode *n)
{
    return (const struct rleaf *)((const char *)n + n->leaf);
}

static inline int32_t rel_to(const void *from, const void *to)
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

/* The FNV-1a step of the literal-child tables. */
static inline uint32_t hash_bytes(uint32_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}
#define MH_FNV_BASIS 2166136261u

static inline int method_is(const struct mh_route *r, const char *m)
{
    size_t n = strlen(m);
    return r->method_len == n && memcmp(route_data(r), m, n) == 0;
}

/* Segments are short: an inline loop beats a call into libc's memcmp. */
static inline int key_eq(const char *a, const char *b, size_t n)
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
static inline const struct rnode *find_lit_raw(const struct rnode *n, const char *key, size_t len)
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

static inline uint32_t hash_path(const char *s, size_t n)
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

/* Byte order, a prefix first (as Go sorts strings). Inline: method names are short. */
static inline int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    size_t n = an < bn ? an : bn;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (unsigned char)a[i] < (unsigned char)b[i] ? -1 : 1;
    return an < bn ? -1 : an > bn;
}

/* route_parse.c: writes the message into err (when given); returns -1. */
int mh_router_set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* router_tree.c: the qsort order of routes that makes each node a contiguous run. */
int mh_router_sort_cmp(const void *pa, const void *pb);
/* router_tree.c: an upper bound of the arena bytes the trees of these routes take. */
size_t mh_router_arena_bound(struct mh_route *const *routes, size_t n);
/* router_tree.c: splits the sorted routes by host and builds one tree per host; -1 on OOM. */
int mh_router_build_trees(struct mh_router *r, const struct mh_route **sorted);

/*
 * route_relation.c: the earliest-registered conflicting pair of the built
 * router, worded as Go's panic at the second registration: -1 with err set,
 * or 0 when there is none.
 */
int mh_router_check_conflicts(const struct mh_router *r, char *err, size_t errlen);

/* router_lookup.c: the id of method m in r's sorted table, or -1. */
int mh_router_method_id(const struct mh_router *r, const char *m, size_t n);
/* router_lookup.c: the tree of host h (any case, no port), or NULL. */
const struct rnode *mh_router_host_root(const struct mh_router *r, const char *h, size_t hlen);

#endif
