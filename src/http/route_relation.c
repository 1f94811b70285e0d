/*
 * How two patterns relate (Go's pattern.go: equivalent, more general, more
 * specific, disjoint, overlapping), and the build's rejection of conflicting
 * pairs with a message naming both and a path they both match.
 */
#include "router_impl.h"

#include <stdio.h>

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
    mh_router_set_err(
        err, errlen,
        "pattern \"%s\" (registered at %s) conflicts with pattern \"%s\" (registered at %s): "
        "%s; both match \"%s\"",
        ps, route_data(p) + p->where_off, qs, route_data(q) + q->where_off, why, example);
}

static const struct rnode *root_for(const struct mh_router *r, const struct mh_route *rt)
{
    return rt->host_len ? mh_router_host_root(r, route_data(rt) + rt->host_off, rt->host_len)
                        : r->root;
}

int mh_router_check_conflicts(const struct mh_router *r, char *err, size_t errlen)
{
    /* Report the conflict that Go would panic on first: at the earliest second registration. */
    for (size_t i = 0; i < r->n; i++) {
        struct cwalk c = {r->routes[i], NULL, REL_DISJOINT};
        conflict_walk(&c, root_for(r, r->routes[i]), 0);
        if (c.q) {
            conflict_message(c.p, c.q, c.rel, err, errlen);
            return -1;
        }
    }
    return 0;
}
