/*
 * The routes of each host as one immutable tree in one arena block. The
 * routes are sorted by their segments first, which makes every node a
 * contiguous run of the sorted array: the tree is built in one pass, and the
 * literal children of a node come out grouped.
 */
#include "router_impl.h"

#include <stdlib.h>

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
int mh_router_sort_cmp(const void *pa, const void *pb)
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
size_t mh_router_arena_bound(struct mh_route *const *routes, size_t n)
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

/* Splits the sorted routes by host and builds one tree per host. */
int mh_router_build_trees(struct mh_router *r, const struct mh_route **sorted)
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
