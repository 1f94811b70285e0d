/*
 * Go 1.22+ ServeMux semantics on an immutable tree: the build. It copies the
 * builder's routes, interns their methods in sorted order, builds the trees
 * (router_tree.c), rejects conflicting pairs (route_relation.c) and indexes
 * all-literal paths for the lookup's fast path (router_lookup.c).
 */
#include "router_impl.h"

#include <stdlib.h>

static int intern_method(struct mh_router *r, const char *m, size_t n, char *err, size_t errlen)
{
    for (unsigned k = 0; k < r->nmethods; k++)
        if (r->mlens[k] == n && memcmp(r->mnames[k], m, n) == 0)
            return 0;
    if (r->nmethods == MH_ROUTE_MAX_METHODS)
        return mh_router_set_err(err, errlen, "too many distinct methods (at most %d)",
                                 MH_ROUTE_MAX_METHODS);
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
        return mh_router_set_err(err, errlen,
                                 "the registered methods do not fit an Allow header of %d bytes",
                                 MH_ROUTE_ALLOW_MAX);
    r->get_id = mh_router_method_id(r, "GET", 3);
    r->head_id = mh_router_method_id(r, "HEAD", 4);
    for (size_t i = 0; i < r->n; i++)
        r->routes[i]->mid =
            r->routes[i]->method_len
                ? mh_router_method_id(r, route_data(r->routes[i]), r->routes[i]->method_len)
                : -1;
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
    qsort(sorted, r->n, sizeof *sorted, mh_router_sort_cmp);
    r->arena.cap = mh_router_arena_bound(r->routes, r->n);
    if (r->arena.cap > INT32_MAX) { /* hash slots hold 32-bit offsets */
        mh_router_set_err(err, errlen, "routes too large for one router (tree over 2 GiB)");
        goto fail;
    }
    r->arena.base = malloc(r->arena.cap);
    if (!r->arena.base)
        goto oom;
    if (mh_router_build_trees(r, sorted) < 0)
        goto oom;
    free(sorted);
    sorted = NULL;

    if (mh_router_check_conflicts(r, err, errlen) < 0)
        goto fail;
    if (build_exact(r) < 0)
        goto oom;
    return r;
oom:
    mh_router_set_err(err, errlen, "out of memory");
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

size_t mh_router_size(const struct mh_router *r)
{
    return r->n;
}
