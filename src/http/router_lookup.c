/*
 * Lookup walks the tree depth first, preferring at each position a literal
 * child, then the wildcard child, then the multi child, and resolves the method
 * at the leaf; it backtracks when a leaf has no route for the method. Because
 * conflicting pairs are rejected at build time, the first route found this way
 * is the most specific one that matches (a literal at the first point where two
 * matching patterns differ rules out the other being more specific), which is
 * the same answer as Go's method-first tree.
 */
#include "router_impl.h"

int mh_router_method_id(const struct mh_router *r, const char *m, size_t n)
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

const struct rnode *mh_router_host_root(const struct mh_router *r, const char *h, size_t hlen)
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
            int mid = mh_router_method_id(r, method, method_len);
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
    const struct rnode *hroot = mh_router_host_root(r, host, host_len);
    int mid = mh_router_method_id(r, method, method_len);
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
