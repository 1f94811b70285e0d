/*
 * Router tests as data: pattern parsing, matching, precedence, conflicts,
 * escaping, cleaning and redirects, derived from the behaviour Go documents
 * for net/http.ServeMux (Go 1.22+).
 */
#include "path.h"
#include "router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        failed++;                                                                                  \
        printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
    } while (0)

/* ---- parsing -------------------------------------------------------------- */

struct parse_case {
    const char *pattern;
    const char *err; /* NULL: valid; else a fragment the message must contain */
};

static const struct parse_case parse_cases[] = {
    {"/", NULL},
    {"/a", NULL},
    {"/a/", NULL},
    {"/a/b/c", NULL},
    {"GET /", NULL},
    {"GET /a/{id}", NULL},
    {"POST /a/{id}/b", NULL},
    {"GET\t/tab", NULL},
    {"GET   /spaces", NULL},
    {"example.com/", NULL},
    {"GET example.com/a/{x}", NULL},
    {"/{x...}", NULL},
    {"/a/{rest...}", NULL},
    {"/a/{$}", NULL},
    {"/{$}", NULL},
    {"/{a}/{b}/{c}", NULL},
    {"/{_x}", NULL},
    {"/{x1}", NULL},
    {"/a%20b", NULL},
    {"/a}b", NULL}, /* a lone '}' is an ordinary literal, as in Go */
    {"PROPFIND /dav/{p...}", NULL},
    {"M-SEARCH /", NULL},
    {"CONNECT /a//b", NULL},
    {"/a//b", NULL},
    {"", "empty pattern"},
    {"GET", "missing /"},
    {"example.com", "missing /"},
    {"G@T /", "invalid method"},
    {"GE(T /", "invalid method"},
    {"GET a{x}/", "host contains '{'"},
    {"{x}/", "host contains '{'"},
    {"/a{x}", "must start with '{'"},
    {"/a/b{x}", "must start with '{'"},
    {"/{x}b", "must end with '}'"},
    {"/{x", "must end with '}'"},
    {"/a/{x}/{x}", "duplicate wildcard name \"x\""},
    {"/{x}/{x...}", "duplicate wildcard name"},
    {"/{x...}/a", "not at end"},
    {"/{$}/a", "{$} not at end"},
    {"/{}", "empty wildcard name"},
    {"/{...}", "empty wildcard name"},
    {"/{1x}", "bad wildcard name \"1x\""},
    {"/{a-b}", "bad wildcard name"},
    {"/{a b}", "invalid method \"/{a\""}, /* the space splits off a "method", as in Go */
    {"/{a}{b}", "bad wildcard name"},
    {"/{{x}}", "bad wildcard name"},
    {"GET /a/../b", "unclean path"},
    {"GET /a//b", "unclean path"},
    {"GET /a/./b", "unclean path"},
    {"/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}/{j}/{k}/{l}/{m}/{n}/{o}/{p}/{q}", "too many wildcards"},
};

static void test_parse(void)
{
    for (size_t i = 0; i < sizeof parse_cases / sizeof *parse_cases; i++) {
        const struct parse_case *c = &parse_cases[i];
        struct mh_router_builder *b = mh_router_builder_new();
        char err[512] = "";
        int rc = mh_router_add(b, c->pattern, strlen(c->pattern), 1, "t.lua:1", err, sizeof err);
        if (!c->err && rc != 0) {
            FAIL("pattern \"%s\" rejected: %s", c->pattern, err);
        } else if (c->err && rc == 0) {
            FAIL("pattern \"%s\" accepted, wanted error with \"%s\"", c->pattern, c->err);
        } else if (c->err && (!strstr(err, c->err) || !strstr(err, "invalid pattern") ||
                              !strstr(err, c->pattern))) {
            FAIL("pattern \"%s\": error \"%s\" lacks \"%s\" or the pattern", c->pattern, err,
                 c->err);
        } else {
            passed++;
        }
        mh_router_builder_free(b);
    }
}

/* ---- matching ------------------------------------------------------------- */

enum {
    F = MH_ROUTE_FOUND,
    N = MH_ROUTE_NOT_FOUND,
    M = MH_ROUTE_METHOD_NOT_ALLOWED,
    R = MH_ROUTE_REDIRECT
};
enum { RD = MH_CLEAN_REDIRECT, RW = MH_CLEAN_REWRITE };

struct match_case {
    int set;            /* index into route_sets */
    const char *method; /* request */
    const char *host;
    const char *path;
    int clean;
    int status;
    const char *want; /* F: pattern; R: location; M: Allow; N: NULL */
    const char *caps; /* F: "name=unescaped value|..." or NULL to skip */
};

static const char *const route_sets[][16] = {
    /* 0: basic precedence, subtree, {$}, methods */
    {"/", "/a", "/a/", "/a/b/{$}", "GET /users/{id}", "POST /users/{id}", "GET /users/admin",
     "GET /files/{path...}", "/static/", "DELETE /items/{id}", "PUT /items/{id}", "GET /items/{id}",
     "HEAD /head-only", NULL},
    /* 1: hosts */
    {"/", "example.com/", "example.com/a/{x}", "GET api.example.com/v1/{id}", "/v1/{id}", NULL},
    /* 2: no root: 404 and trailing-slash redirects */
    {"/tree/", "/exact/{$}", "POST /post/", "/x/{y}/z/", "/deep/a/b/", NULL},
    /* 3: escaping */
    {"/abc", "/a%20b/{x}", "/a%2Fb", "/caf%C3%A9", "/w/{v}", "/m/{rest...}", NULL},
    /* 4: 405 across patterns and hosts */
    {"GET /r/{x}", "POST /r/lit", "PATCH /r/lit", "DELETE h.com/r/lit", "OPTIONS /s/", NULL},
    /* 5: CONNECT and unclean method-less patterns */
    {"CONNECT /c/{x}", "/a//b", "/plain", NULL},
    /* 6: deep backtracking between literals and wildcards */
    {"/a/b/c", "/a/{x}/d", "/{y}/c/e", "/a/b/c/{z...}", "/{p}/{q}/{r}", "POST /m/a/z",
     "GET /m/{x}/z", NULL},
    /* 7: {$} at the root, single wildcards never take the trailing slash */
    {"/{$}", "POST /{$}", "/{x}", "/{x}/{y...}", NULL},
    /* 8: examples from Go's ServeMux documentation */
    {"/index.html", "/static/", "/images/", "/images/thumbnails/", "/b/{bucket}/o/{objectname...}",
     "/b/{bucket}/o/default", "GET /posts/{id}", "GET /posts/latest", NULL},
};

static const struct match_case match_cases[] = {
    /* set 0: precedence, subtree, exact */
    {0, "GET", "", "/", RD, F, "/", ""},
    {0, "GET", "", "/zzz", RD, F, "/", ""},
    {0, "GET", "", "/a", RD, F, "/a", ""},
    {0, "GET", "", "/a/", RD, F, "/a/", ""},
    {0, "GET", "", "/a/x/y", RD, F, "/a/", ""},
    {0, "GET", "", "/a/b/", RD, F, "/a/b/{$}", ""},
    {0, "GET", "", "/a/b", RD, R, "/a/b/", NULL}, /* "/a/b/{$}" is exact */
    {0, "GET", "", "/a/b/c", RD, F, "/a/", ""},
    {0, "GET", "", "/users/42", RD, F, "GET /users/{id}", "id=42"},
    {0, "HEAD", "", "/users/42", RD, F, "GET /users/{id}", "id=42"},
    {0, "POST", "", "/users/7", RD, F, "POST /users/{id}", "id=7"},
    {0, "GET", "", "/users/admin", RD, F, "GET /users/admin", ""},
    {0, "DELETE", "", "/users/admin", RD, F, "/", ""},
    {0, "PUT", "", "/users/42", RD, F, "/", ""}, /* "/" takes any method: no 405 */
    {0, "GET", "", "/users/", RD, F, "/", ""},
    {0, "GET", "", "/files/a/b/c.txt", RD, F, "GET /files/{path...}", "path=a/b/c.txt"},
    {0, "GET", "", "/files/", RD, F, "GET /files/{path...}", "path="},
    {0, "GET", "", "/files", RD, R, "/files/", NULL},
    {0, "POST", "", "/files/x", RD, F, "/", ""},
    {0, "GET", "", "/static", RD, R, "/static/", NULL},
    {0, "GET", "", "/static/css/x.css", RD, F, "/static/", ""},
    {0, "PUT", "", "/items/9", RD, F, "PUT /items/{id}", "id=9"},
    {0, "HEAD", "", "/items/9", RD, F, "GET /items/{id}", "id=9"},
    {0, "POST", "", "/items/9", RD, F, "/", ""}, /* "/" catches every method */
    {0, "HEAD", "", "/head-only", RD, F, "HEAD /head-only", ""},
    {0, "GET", "", "/head-only", RD, F, "/", ""},
    {0, "GET", "example.com:8080", "/a", RD, F, "/a", ""},
    /* set 0: cleaning */
    {0, "GET", "", "/a/../a", RD, R, "/a", NULL},
    {0, "GET", "", "//a", RD, R, "/a", NULL},
    {0, "GET", "", "/a/./", RD, R, "/a/", NULL},
    {0, "GET", "", "/users/./42", RD, R, "/users/42", NULL},
    {0, "GET", "", "/users/./42", RW, F, "GET /users/{id}", "id=42"},
    {0, "GET", "", "/users//42", RW, F, "GET /users/{id}", "id=42"},
    {0, "GET", "", "/x/../users/9", RW, F, "GET /users/{id}", "id=9"},
    {0, "GET", "", "/../../a", RD, R, "/a", NULL},
    {0, "GET", "", "/../../a", RW, F, "/a", ""},
    {0, "GET", "", "/a/b/.", RD, R, "/a/b/", NULL},
    {0, "GET", "", "/a/b/..", RW, F, "/a", ""},
    {0, "GET", "", "", RD, R, "/", NULL},
    {0, "GET", "", "a", RD, R, "/a", NULL},
    {0, "GET", "", "/files/x/../y", RW, F, "GET /files/{path...}", "path=y"},
    {0, "GET", "", "/files//", RD, R, "/files/", NULL},
    /* clean + trailing slash: Go redirects straight to the cleaned "path/" */
    {0, "GET", "", "/x/../static", RD, R, "/static/", NULL},
    {0, "GET", "", "/x/../static", RW, R, "/static/", NULL},
    {0, "GET", "", "//files", RD, R, "/files/", NULL},
    /* set 1: hosts */
    {1, "GET", "example.com", "/", RD, F, "example.com/", ""},
    {1, "GET", "EXAMPLE.com", "/zz", RD, F, "example.com/", ""},
    {1, "GET", "example.com:443", "/a/1", RD, F, "example.com/a/{x}", "x=1"},
    {1, "GET", "other.com", "/a/1", RD, F, "/", ""},
    {1, "GET", "", "/a/1", RD, F, "/", ""},
    {1, "GET", "api.example.com", "/v1/5", RD, F, "GET api.example.com/v1/{id}", "id=5"},
    {1, "POST", "api.example.com", "/v1/5", RD, F, "/v1/{id}", "id=5"},
    {1, "GET", "Api.Example.Com:8443", "/v1/6", RD, F, "GET api.example.com/v1/{id}", "id=6"},
    {1, "GET", "www.example.com", "/v1/6", RD, F, "/v1/{id}", "id=6"},
    {1, "GET", "example.com.", "/a/1", RD, F, "/", ""},
    /* set 2: 404 and trailing-slash redirects */
    {2, "GET", "", "/", RD, N, NULL, NULL},
    {2, "GET", "", "/nope", RD, N, NULL, NULL},
    {2, "GET", "", "/tree", RD, R, "/tree/", NULL},
    {2, "GET", "", "/tree/", RD, F, "/tree/", ""},
    {2, "GET", "", "/tree/x", RD, F, "/tree/", ""},
    {2, "GET", "", "/exact", RD, R, "/exact/", NULL},
    {2, "GET", "", "/exact/", RD, F, "/exact/{$}", ""},
    {2, "GET", "", "/exact/x", RD, N, NULL, NULL},
    /* redirect only for a matching method; the others get 405 with path + "/"'s methods (Go) */
    {2, "GET", "", "/post", RD, M, NULL, "POST"},
    {2, "POST", "", "/post", RD, R, "/post/", NULL},
    {2, "GET", "", "/post/", RD, M, "POST", NULL},
    {2, "GET", "", "/x/1/z", RD, R, "/x/1/z/", NULL},
    {2, "GET", "", "/x/1/z/more", RD, F, "/x/{y}/z/", "y=1"},
    {2, "GET", "", "/x/1", RD, N, NULL, NULL},
    {2, "GET", "", "/deep/a/b", RD, R, "/deep/a/b/", NULL},
    {2, "GET", "", "/deep/a", RD, N, NULL, NULL},
    {2, "GET", "", "/tree?", RD, N, NULL, NULL},
    /* set 3: escaping */
    {3, "GET", "", "/abc", RD, F, "/abc", ""},
    {3, "GET", "", "/a%62c", RD, F, "/abc", ""},
    {3, "GET", "", "/%61%62%63", RD, F, "/abc", ""},
    {3, "GET", "", "/a%20b/1", RD, F, "/a%20b/{x}", "x=1"},
    {3, "GET", "", "/a b/2", RD, F, "/a%20b/{x}", "x=2"},
    {3, "GET", "", "/a%2Fb", RD, F, "/a%2Fb", ""},
    {3, "GET", "", "/a%2fb", RD, F, "/a%2Fb", ""},
    {3, "GET", "", "/a/b", RD, N, NULL, NULL},
    {3, "GET", "", "/caf%c3%a9", RD, F, "/caf%C3%A9", ""},
    {3, "GET", "", "/w/x%2Fy", RD, F, "/w/{v}", "v=x/y"},
    {3, "GET", "", "/w/%zz", RD, F, "/w/{v}", NULL},
    {3, "GET", "", "/w/a%20b", RD, F, "/w/{v}", "v=a b"},
    {3, "GET", "", "/m/a%2Fb/c", RD, F, "/m/{rest...}", "rest=a/b/c"},
    {3, "GET", "", "/ab%", RD, N, NULL, NULL},
    {3, "GET", "", "/%2e%2e/abc", RD, N, NULL, NULL}, /* escaped dots are not cleaned */
    /* set 4: 405 */
    {4, "PUT", "", "/r/lit", RD, M, "GET, HEAD, PATCH, POST", NULL},
    {4, "PUT", "h.com", "/r/lit", RD, M, "DELETE, GET, HEAD, PATCH, POST", NULL},
    {4, "PUT", "", "/r/other", RD, M, "GET, HEAD", NULL},
    {4, "POST", "", "/r/other", RD, M, "GET, HEAD", NULL},
    {4, "HEAD", "", "/r/lit", RD, F, "GET /r/{x}", "x=lit"},
    {4, "GET", "", "/r/lit", RD, F, "GET /r/{x}", "x=lit"},
    {4, "DELETE", "", "/r/lit", RD, M, "GET, HEAD, PATCH, POST", NULL},
    {4, "DELETE", "h.com", "/r/lit", RD, F, "DELETE h.com/r/lit", ""},
    {4, "GET", "", "/s/x", RD, M, "OPTIONS", NULL},
    {4, "OPTIONS", "", "/s", RD, R, "/s/", NULL},
    {4, "GET", "", "/s", RD, M, NULL, "OPTIONS"},
    {4, "get", "", "/r/x", RD, M, "GET, HEAD", NULL}, /* methods are case-sensitive */
    /* set 5: CONNECT is not cleaned; other methods are */
    {5, "CONNECT", "", "/c/../c/x", RD, N, NULL, NULL},
    {5, "CONNECT", "", "/c/x", RD, F, "CONNECT /c/{x}", "x=x"},
    {5, "CONNECT", "", "/a//b", RD, F, "/a//b", ""},
    {5, "GET", "", "/a//b", RD, R, "/a/b", NULL},
    {5, "GET", "", "/a//b", RW, N, NULL, NULL},
    {5, "CONNECT", "", "//plain", RD, N, NULL, NULL},
    {5, "GET", "", "//plain", RW, F, "/plain", ""},
    {5, "CONNECT", "", "/plain", RD, F, "/plain", ""},
    {5, "CONNECT", "", "example.com:443", RD, N, NULL, NULL},
    /* set 6: backtracking */
    {6, "GET", "", "/a/b/c", RD, F, "/a/b/c", ""},
    {6, "GET", "", "/a/b/d", RD, F, "/a/{x}/d", "x=b"},
    {6, "GET", "", "/a/c/e", RD, F, "/{y}/c/e", "y=a"},
    {6, "GET", "", "/a/b/c/d/e", RD, F, "/a/b/c/{z...}", "z=d/e"},
    {6, "GET", "", "/a/b/c/", RD, F, "/a/b/c/{z...}", "z="},
    {6, "GET", "", "/q/r/s", RD, F, "/{p}/{q}/{r}", "p=q|q=r|r=s"},
    {6, "GET", "", "/a/b/e", RD, F, "/{p}/{q}/{r}", "p=a|q=b|r=e"},
    {6, "GET", "", "/m/a/z", RD, F, "GET /m/{x}/z", "x=a"},
    {6, "HEAD", "", "/m/a/z", RD, F, "GET /m/{x}/z", "x=a"},
    {6, "POST", "", "/m/a/z", RD, F, "POST /m/a/z", ""},
    {6, "PUT", "", "/m/a/z", RD, F, "/{p}/{q}/{r}", "p=m|q=a|r=z"},
    {6, "GET", "", "/a/b", RD, N, NULL, NULL},
    {6, "GET", "", "/a/b/c/d", RD, F, "/a/b/c/{z...}", "z=d"},
    /* set 7 */
    {7, "GET", "", "/", RD, F, "/{$}", ""},
    {7, "HEAD", "", "/", RD, F, "/{$}", ""},
    {7, "POST", "", "/", RD, F, "POST /{$}", ""},
    {7, "GET", "", "/a", RD, F, "/{x}", "x=a"},
    {7, "GET", "", "/a/", RD, F, "/{x}/{y...}", "x=a|y="},
    {7, "GET", "", "/a/b/c", RD, F, "/{x}/{y...}", "x=a|y=b/c"},
    {7, "GET", "", "/%2F", RD, F, "/{x}", "x=/"},
    {7, "GET", "", "//", RD, R, "/", NULL},
    /* set 8 */
    {8, "GET", "", "/index.html", RD, F, "/index.html", ""},
    {8, "GET", "", "/images/thumbnails/t.png", RD, F, "/images/thumbnails/", ""},
    {8, "GET", "", "/images/big.png", RD, F, "/images/", ""},
    {8, "GET", "", "/images/thumbnails", RD, R, "/images/thumbnails/", NULL}, /* beats "/images/" */
    {8, "GET", "", "/images", RD, R, "/images/", NULL},
    {8, "GET", "", "/b/bk/o/a/b", RD, F, "/b/{bucket}/o/{objectname...}",
     "bucket=bk|objectname=a/b"},
    {8, "GET", "", "/b/bk/o/default", RD, F, "/b/{bucket}/o/default", "bucket=bk"},
    {8, "GET", "", "/b/bk/o", RD, R, "/b/bk/o/", NULL},
    {8, "GET", "", "/posts/latest", RD, F, "GET /posts/latest", ""},
    {8, "GET", "", "/posts/7", RD, F, "GET /posts/{id}", "id=7"},
    {8, "POST", "", "/posts/7", RD, M, "GET, HEAD", NULL},
    {8, "GET", "", "/index.html/", RD, N, NULL, NULL},
};

static struct mh_router *build_set(int set, char *err, size_t errlen)
{
    struct mh_router_builder *b = mh_router_builder_new();
    for (int i = 0; route_sets[set][i]; i++) {
        const char *p = route_sets[set][i];
        if (mh_router_add(b, p, strlen(p), i, "set", err, errlen) != 0) {
            mh_router_builder_free(b);
            return NULL;
        }
    }
    struct mh_router *r = mh_router_build(b, err, errlen);
    mh_router_builder_free(b);
    return r;
}

/* Checks "a=1|b=2" against the captures, unescaped. */
static int check_caps(const struct mh_route_match *m, const char *want, char *why, size_t whylen)
{
    char buf[256];
    unsigned n = 0;
    const char *p = want;
    while (*p) {
        const char *eq = strchr(p, '=');
        const char *bar = strchr(p, '|');
        size_t vlen = bar ? (size_t)(bar - eq - 1) : strlen(eq + 1);
        int idx = mh_route_wildcard_index(m->route, p, (size_t)(eq - p));
        if (idx < 0 || (unsigned)idx >= m->ncaptures) {
            snprintf(why, whylen, "no capture %.*s", (int)(eq - p), p);
            return 0;
        }
        const struct mh_route_capture *c = &m->captures[idx];
        long dl = mh_path_unescape(m->path + c->off, c->len, buf);
        if (dl < 0 || (size_t)dl != vlen || memcmp(buf, eq + 1, vlen) != 0) {
            snprintf(why, whylen, "capture %.*s = \"%.*s\"", (int)(eq - p), p, (int)c->len,
                     m->path + c->off);
            return 0;
        }
        n++;
        p = bar ? bar + 1 : eq + 1 + vlen;
    }
    if (n != m->ncaptures) {
        snprintf(why, whylen, "%u captures, wanted %u", m->ncaptures, n);
        return 0;
    }
    return 1;
}

static const char *status_name(int s)
{
    static const char *names[] = {"FOUND", "NOT_FOUND", "METHOD_NOT_ALLOWED", "REDIRECT"};
    return names[s];
}

static void run_match(struct mh_router *r, const struct match_case *c)
{
    struct mh_route_match m;
    char scratch[512];
    size_t plen = strlen(c->path);
    int st = mh_router_lookup(r, c->method, strlen(c->method), c->host, strlen(c->host), c->path,
                              plen, c->clean, scratch, plen + 2, &m);
    char got[600] = "";
    if (st == F)
        snprintf(got, sizeof got, "%s", mh_route_pattern(m.route));
    else if (st == R)
        snprintf(got, sizeof got, "%.*s", (int)m.location_len, m.location);
    else if (st == M)
        snprintf(got, sizeof got, "%.*s", (int)m.allow_len, m.allow);
    char why[300] = "";
    if (st != c->status || (c->want && strcmp(got, c->want) != 0)) {
        FAIL("set %d %s %s%s (%s): got %s \"%s\", wanted %s \"%s\"", c->set, c->method, c->host,
             c->path, c->clean == RD ? "redirect" : "rewrite", status_name(st), got,
             status_name(c->status), c->want ? c->want : "");
    } else if (st == F && c->caps && !check_caps(&m, c->caps, why, sizeof why)) {
        FAIL("set %d %s %s: %s", c->set, c->method, c->path, why);
    } else if (st == F && m.handler_id < 0) {
        FAIL("set %d %s %s: no handler id", c->set, c->method, c->path);
    } else {
        passed++;
    }
}

static void test_match(void)
{
    struct mh_router *routers[sizeof route_sets / sizeof *route_sets];
    for (size_t s = 0; s < sizeof route_sets / sizeof *route_sets; s++) {
        char err[512];
        routers[s] = build_set((int)s, err, sizeof err);
        if (!routers[s])
            FAIL("set %zu failed to build: %s", s, err);
        else
            passed++;
    }
    for (size_t i = 0; i < sizeof match_cases / sizeof *match_cases; i++)
        if (routers[match_cases[i].set])
            run_match(routers[match_cases[i].set], &match_cases[i]);
    for (size_t s = 0; s < sizeof route_sets / sizeof *route_sets; s++)
        mh_router_free(routers[s]);
}

/* ---- conflicts ------------------------------------------------------------- */

struct conflict_case {
    const char *routes[6];
    int conflict; /* 1: the first two of `names` must appear in the error */
    const char *a, *b;
};

static const struct conflict_case conflict_cases[] = {
    {{"/a", "/a"}, 1, "\"/a\"", "\"/a\""},
    {{"GET /a/{x}", "GET /a/{y}"}, 1, "GET /a/{x}", "GET /a/{y}"},
    {{"/a/{x}/c", "/a/b/{y}"}, 1, "/a/{x}/c", "/a/b/{y}"},
    {{"GET /a/{x}", "/a/b"}, 1, "GET /a/{x}", "/a/b"},
    {{"/{x...}", "/"}, 1, "/{x...}", "\"/\""},
    {{"/a/", "/a/{rest...}"}, 1, "/a/", "/a/{rest...}"},
    {{"/{x}/b", "/a/{y}"}, 1, "/{x}/b", "/a/{y}"},
    {{"GET /a/{$}", "/a/{$}", "GET /a/{$}"}, 1, "GET /a/{$}", "t.lua:3"},
    {{"HEAD /h/{x}", "GET /h/y"}, 1, "HEAD /h/{x}", "GET /h/y"},
    {{"/x/{a}/{b...}", "/x/{c}/d/{e...}", "/x/q/"}, 1, "/x/q/", "/x/{c}/d/{e...}"},
    {{"example.com/a", "example.com/a"}, 1, "example.com/a", "t.lua:2"},
    {{"EXAMPLE.com/a", "example.com/a"}, 1, "EXAMPLE.com/a", "example.com/a"},
    {{"/{a}/{b}", "/{c}/{d}"}, 1, "/{a}/{b}", "/{c}/{d}"},
    {{"/a/{x...}", "/{y}/b/"}, 1, "/a/{x...}", "/{y}/b/"},
    {{"/a/b/", "/a/b/c", "/a/b/{x}", "/a/{y}/c"},
     1,
     "/a/{y}/c",
     "\"/a/b/\" (registered at t.lua:1)"},
    /* no conflict */
    {{"/a", "/a/"}, 0, NULL, NULL},
    {{"GET /a", "POST /a"}, 0, NULL, NULL},
    {{"GET /a", "HEAD /a"}, 0, NULL, NULL},
    {{"GET /a/{x}", "/a/{x}"}, 0, NULL, NULL},
    {{"/a/{x}", "/a/b"}, 0, NULL, NULL},
    {{"/a/{$}", "/a/{x}"}, 0, NULL, NULL},
    {{"/a/{$}", "/a/"}, 0, NULL, NULL},
    {{"/a/{x...}", "/a/b/{y...}"}, 0, NULL, NULL},
    {{"/", "/{x}"}, 0, NULL, NULL},
    {{"a.com/x", "/x", "b.com/x"}, 0, NULL, NULL},
    {{"/a/{x}/c", "/a/{x}/{y}"}, 0, NULL, NULL},
    {{"/{x}/b", "/a/b"}, 0, NULL, NULL},
    {{"GET /a/", "/a"}, 0, NULL, NULL},
    {{"/a/b/{c...}", "/a/{x}/c/"}, 1, "/a/{x}/c/", "/a/b/{c...}"},
};

static void test_conflicts(void)
{
    for (size_t i = 0; i < sizeof conflict_cases / sizeof *conflict_cases; i++) {
        const struct conflict_case *c = &conflict_cases[i];
        struct mh_router_builder *b = mh_router_builder_new();
        char err[1024] = "", where[32];
        for (int k = 0; k < 6 && c->routes[k]; k++) {
            snprintf(where, sizeof where, "t.lua:%d", k + 1);
            if (mh_router_add(b, c->routes[k], strlen(c->routes[k]), k, where, err, sizeof err))
                FAIL("case %zu: add %s: %s", i, c->routes[k], err);
        }
        struct mh_router *r = mh_router_build(b, err, sizeof err);
        if (c->conflict && r) {
            FAIL("case %zu (%s, %s): built, wanted a conflict", i, c->routes[0], c->routes[1]);
        } else if (!c->conflict && !r) {
            FAIL("case %zu: unexpected error: %s", i, err);
        } else if (c->conflict &&
                   (!strstr(err, c->a) || !strstr(err, c->b) || !strstr(err, "conflicts with") ||
                    !strstr(err, "t.lua:") || !strstr(err, "both match \"/"))) {
            FAIL("case %zu: error \"%s\" lacks \"%s\" / \"%s\" / where / example", i, err, c->a,
                 c->b);
        } else {
            passed++;
        }
        mh_router_free(r);
        mh_router_builder_free(b);
    }
}

/* ---- path helpers ---------------------------------------------------------- */

static void test_clean(void)
{
    static const char *const cases[][2] = {
        {"", "/"},
        {"/", "/"},
        {"a", "/a"},
        {"a/", "/a/"},
        {"//", "/"},
        {"/a//b", "/a/b"},
        {"/a/./b", "/a/b"},
        {"/a/../b", "/b"},
        {"/..", "/"},
        {"/../a/", "/a/"},
        {"/a/b/../..", "/"},
        {"/a/b/../../", "/"},
        {"/a/.", "/a"},
        {"/a/./", "/a/"},
        {"/a/..b", "/a/..b"},
        {"/.a/b.", "/.a/b."},
        {"/a/b/", "/a/b/"},
        {"/%2e%2e/a", "/%2e%2e/a"},
        {"///a///", "/a/"},
        {"/a/../../b/c/", "/b/c/"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t n = mh_path_clean(cases[i][0], strlen(cases[i][0]), out);
        int clean = mh_path_is_clean(cases[i][0], strlen(cases[i][0]));
        int same = strcmp(cases[i][0], cases[i][1]) == 0;
        if (n != strlen(cases[i][1]) || memcmp(out, cases[i][1], n) != 0)
            FAIL("clean(\"%s\") = \"%.*s\", wanted \"%s\"", cases[i][0], (int)n, out, cases[i][1]);
        else if (clean != same)
            FAIL("is_clean(\"%s\") = %d", cases[i][0], clean);
        else
            passed++;
    }
    static const char *const esc[][2] = {
        {"abc", "abc"}, {"a%20b", "a b"}, {"%2F", "/"}, {"%e2%82%ac", "\xe2\x82\xac"},
        {"a+b", "a+b"}, {"%", NULL},      {"%2", NULL}, {"%zz", NULL},
        {"%%", NULL},
    };
    for (size_t i = 0; i < sizeof esc / sizeof *esc; i++) {
        long n = mh_path_unescape(esc[i][0], strlen(esc[i][0]), out);
        if (!esc[i][1] ? n != -1
                       : (n != (long)strlen(esc[i][1]) || memcmp(out, esc[i][1], (size_t)n) != 0))
            FAIL("unescape(\"%s\") = %ld", esc[i][0], n);
        else
            passed++;
    }
}

/* ---- API details ------------------------------------------------------------ */

static void test_api(void)
{
    struct mh_router_builder *b = mh_router_builder_new();
    char err[256];
    const char *p = "GET /u/{id}/f/{rest...}";
    if (mh_router_add(b, p, strlen(p), 77, "app.lua:3", err, sizeof err) != 0)
        FAIL("add: %s", err);
    struct mh_router *r = mh_router_build(b, err, sizeof err);
    mh_router_builder_free(b); /* the router must not depend on the builder */
    if (!r) {
        FAIL("build: %s", err);
        return;
    }
    struct mh_route_match m;
    char scratch[64];
    const char *path = "/u/1/f/x/y";
    int st = mh_router_lookup(r, "GET", 3, "h", 1, path, strlen(path), MH_CLEAN_REDIRECT, scratch,
                              sizeof scratch, &m);
    size_t nl = 0;
    const char *n0 = st == F ? mh_route_wildcard_name(m.route, 0, &nl) : NULL;
    if (st != F || m.handler_id != 77 || mh_router_size(r) != 1 ||
        strcmp(mh_route_where(m.route), "app.lua:3") != 0 || !n0 || nl != 2 ||
        memcmp(n0, "id", 2) != 0 || mh_route_wildcard_index(m.route, "rest", 4) != 1 ||
        mh_route_wildcard_index(m.route, "nope", 4) != -1 ||
        mh_route_wildcard_name(m.route, 2, &nl) != NULL || m.path != path)
        FAIL("api accessors");
    else
        passed++;
    /* An unclean path is rewritten into the scratch buffer, not the input. */
    path = "/u/1//f/x";
    st = mh_router_lookup(r, "GET", 3, "", 0, path, strlen(path), MH_CLEAN_REWRITE, scratch,
                          sizeof scratch, &m);
    if (st != F || m.path != scratch || m.path_len != 8 || memcmp(m.path, "/u/1/f/x", 8) != 0)
        FAIL("rewrite into scratch");
    else
        passed++;
    /* A scratch buffer below path_len + 2 is misuse: an unclean path is not served. */
    path = "/u/1//f/x";
    st = mh_router_lookup(r, "GET", 3, "", 0, path, strlen(path), MH_CLEAN_REWRITE, scratch,
                          strlen(path) + 1, &m);
    if (st != MH_ROUTE_NOT_FOUND)
        FAIL("small scratch");
    else
        passed++;
    /* No match: the Allow and Location fields are cleared. */
    st = mh_router_lookup(r, "GET", 3, "", 0, "/zz", 3, MH_CLEAN_REDIRECT, scratch, sizeof scratch,
                          &m);
    if (st != MH_ROUTE_NOT_FOUND || m.allow || m.location || m.route || m.ncaptures)
        FAIL("404 fields");
    else
        passed++;
    mh_router_free(r);

    /* An empty router answers 404. */
    b = mh_router_builder_new();
    r = mh_router_build(b, err, sizeof err);
    mh_router_builder_free(b);
    if (!r || mh_router_lookup(r, "GET", 3, "", 0, "/", 1, MH_CLEAN_REDIRECT, scratch,
                               sizeof scratch, &m) != MH_ROUTE_NOT_FOUND)
        FAIL("empty router");
    else
        passed++;
    mh_router_free(r);
}

/* Many routes: build time stays small and every route is found again. */
static void test_many(void)
{
    struct mh_router_builder *b = mh_router_builder_new();
    char p[64], err[256];
    int ok = 1;
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(p, sizeof p, "GET /api/r%d/{id}/items", i);
        ok &= mh_router_add(b, p, (size_t)n, i, "gen", err, sizeof err) == 0;
        n = snprintf(p, sizeof p, "/static/f%d/x", i);
        ok &= mh_router_add(b, p, (size_t)n, 5000 + i, "gen", err, sizeof err) == 0;
    }
    struct mh_router *r = mh_router_build(b, err, sizeof err);
    mh_router_builder_free(b);
    if (!ok || !r) {
        FAIL("many: %s", err);
        mh_router_free(r);
        return;
    }
    struct mh_route_match m;
    char scratch[64];
    for (int i = 0; i < 5000; i += 7) {
        int n = snprintf(p, sizeof p, "/api/r%d/abc/items", i);
        int st = mh_router_lookup(r, "GET", 3, "", 0, p, (size_t)n, MH_CLEAN_REDIRECT, scratch,
                                  sizeof scratch, &m);
        n = snprintf(p, sizeof p, "/static/f%d/x", i);
        int st2 = mh_router_lookup(r, "GET", 3, "", 0, p, (size_t)n, MH_CLEAN_REDIRECT, scratch,
                                   sizeof scratch, &m);
        if (st != F || st2 != F || m.handler_id != 5000 + i)
            ok = 0;
    }
    if (!ok)
        FAIL("many: lookups");
    else
        passed++;
    mh_router_free(r);

    /* A conflict hidden among many routes is still found, with both sites. */
    b = mh_router_builder_new();
    for (int i = 0; i < 3000; i++) {
        int n = snprintf(p, sizeof p, "/v/%d/{x}", i);
        mh_router_add(b, p, (size_t)n, i, "gen.lua:1", err, sizeof err);
    }
    mh_router_add(b, "/v/{y}/7", 8, 1, "late.lua:9", err, sizeof err);
    r = mh_router_build(b, err, sizeof err);
    mh_router_builder_free(b);
    if (r || !strstr(err, "\"/v/{y}/7\" (registered at late.lua:9)") ||
        !strstr(err, "\"/v/0/{x}\" (registered at gen.lua:1)") || !strstr(err, "\"/v/0/7\""))
        FAIL("many: conflict not reported: %s", r ? "(built)" : err);
    else
        passed++;
    mh_router_free(r);
}

/* ---- randomized cross-check against a brute-force matcher ------------------- */

/*
 * Random small route sets that build (conflict-free) are checked against a
 * linear matcher that follows Go's algorithm literally: patterns grouped by
 * method first (exact, then GET for HEAD, then any), and within a group the
 * pattern whose first differing segment is the more specific kind wins
 * (literal, then {x}, then {$}, then a multi). The router resolves methods at
 * its leaves and backtracks instead: this checks that both agree.
 */
enum { K_LIT, K_WILD, K_DOLLAR, K_MULTI };

struct ref_pat {
    char str[96];
    const char *method; /* "" for any */
    int nseg, kind[6];
    char lit[6];
};

static unsigned rng_state = 12345;
static unsigned rng(unsigned n)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (rng_state >> 16) % n;
}

static void ref_gen(struct ref_pat *p)
{
    static const char *const methods[] = {"", "", "GET", "POST", "HEAD"};
    int w = 0, depth = 1 + (int)rng(3);
    size_t o;
    p->method = methods[rng(5)];
    o = (size_t)snprintf(p->str, sizeof p->str, "%s%s", p->method, *p->method ? " " : "");
    p->nseg = 0;
    for (int i = 0; i < depth; i++) {
        unsigned c = rng(3);
        p->kind[p->nseg] = c == 2 ? K_WILD : K_LIT;
        p->lit[p->nseg] = c == 2 ? 0 : (char)('a' + c);
        if (c == 2)
            o += (size_t)snprintf(p->str + o, sizeof p->str - o, "/{w%d}", w++);
        else
            o += (size_t)snprintf(p->str + o, sizeof p->str - o, "/%c", 'a' + c);
        p->nseg++;
    }
    switch (rng(4)) {
    case 1:
        snprintf(p->str + o, sizeof p->str - o, "/");
        p->kind[p->nseg++] = K_MULTI;
        break;
    case 2:
        snprintf(p->str + o, sizeof p->str - o, "/{$}");
        p->kind[p->nseg++] = K_DOLLAR;
        break;
    case 3:
        snprintf(p->str + o, sizeof p->str - o, "/{rest...}");
        p->kind[p->nseg++] = K_MULTI;
        break;
    default:
        break;
    }
}

/* Matches a clean path like "/a/b/"; sets *exact as Go's exactMatch. */
static int ref_path_match(const struct ref_pat *p, const char *path, int *exact)
{
    const char *r = path;
    for (int k = 0; k < p->nseg; k++) {
        if (r[0] != '/')
            return 0;
        if (p->kind[k] == K_MULTI) {
            *exact = r[1] == '\0';
            return 1;
        }
        if (p->kind[k] == K_DOLLAR) {
            *exact = 1;
            return r[1] == '\0';
        }
        const char *e = strchr(r + 1, '/');
        size_t n = e ? (size_t)(e - r - 1) : strlen(r + 1);
        if (n == 0)
            return 0; /* the trailing slash is not a segment */
        if (p->kind[k] == K_LIT && (n != 1 || r[1] != p->lit[k]))
            return 0;
        r += 1 + n;
    }
    *exact = 1;
    return *r == '\0';
}

static int ref_more_specific(const struct ref_pat *a, const struct ref_pat *b)
{
    for (int k = 0; k < a->nseg && k < b->nseg; k++)
        if (a->kind[k] != b->kind[k])
            return a->kind[k] < b->kind[k];
    return a->nseg > b->nseg;
}

static const struct ref_pat *ref_lookup(const struct ref_pat *pats, int n, const char *method,
                                        const char *path, int *exact)
{
    const char *groups[3] = {method, strcmp(method, "HEAD") == 0 ? "GET" : NULL, ""};
    for (int g = 0; g < 3; g++) {
        const struct ref_pat *best = NULL;
        int best_exact = 0, ex;
        for (int i = 0; groups[g] && i < n; i++) {
            if (strcmp(pats[i].method, groups[g]) != 0 || !ref_path_match(&pats[i], path, &ex))
                continue;
            if (!best || ref_more_specific(&pats[i], best)) {
                best = &pats[i];
                best_exact = ex;
            }
        }
        if (best) {
            *exact = best_exact;
            return best;
        }
    }
    return NULL;
}

static void ref_expect(const struct ref_pat *pats, int n, const char *method, const char *path,
                       int *status, char *want, size_t wantlen)
{
    int exact = 0, ex2 = 0;
    const struct ref_pat *w = ref_lookup(pats, n, method, path, &exact);
    size_t len = strlen(path);
    if (!(w && exact) && path[len - 1] != '/') {
        char p2[80];
        snprintf(p2, sizeof p2, "%s/", path);
        if (ref_lookup(pats, n, method, p2, &ex2) && ex2) {
            *status = R;
            snprintf(want, wantlen, "%s", p2);
            return;
        }
    }
    if (w) {
        *status = F;
        snprintf(want, wantlen, "%s", w->str);
        return;
    }
    static const char *const sorted[] = {"GET", "HEAD", "POST"};
    int has[3] = {0, 0, 0}, any = 0;
    for (int i = 0; i < n; i++)
        for (int m = 0; m < 3; m++)
            if (strcmp(pats[i].method, sorted[m]) == 0 && ref_path_match(&pats[i], path, &ex2))
                has[m] = 1;
    if (path[len - 1] != '/') { /* Go's ServeMux also counts the methods of path + "/" */
        char p2[80];
        snprintf(p2, sizeof p2, "%s/", path);
        for (int i = 0; i < n; i++)
            for (int m = 0; m < 3; m++)
                if (strcmp(pats[i].method, sorted[m]) == 0 && ref_path_match(&pats[i], p2, &ex2))
                    has[m] = 1;
    }
    has[1] |= has[0];
    want[0] = '\0';
    for (int m = 0; m < 3; m++) {
        if (!has[m])
            continue;
        size_t o = strlen(want);
        snprintf(want + o, wantlen - o, "%s%s", any ? ", " : "", sorted[m]);
        any = 1;
    }
    *status = any ? M : N;
}

static void test_random(void)
{
    static const char *const methods[] = {"GET", "HEAD", "POST", "PUT"};
    int sets = 0, checked = 0, bad = 0;
    for (int iter = 0; iter < 3000 && bad < 5; iter++) {
        struct ref_pat pats[6];
        int n = 2 + (int)rng(5);
        struct mh_router_builder *b = mh_router_builder_new();
        char err[512];
        for (int i = 0; i < n; i++) {
            ref_gen(&pats[i]);
            mh_router_add(b, pats[i].str, strlen(pats[i].str), i, "rnd", err, sizeof err);
        }
        struct mh_router *r = mh_router_build(b, err, sizeof err);
        mh_router_builder_free(b);
        if (!r)
            continue; /* a conflict (or a duplicate wildcard-free repeat) */
        sets++;
        for (int q = 0; q < 40; q++) {
            char path[64] = "";
            size_t o = 0;
            int depth = (int)rng(5);
            for (int k = 0; k < depth; k++)
                o += (size_t)snprintf(path + o, sizeof path - o, "/%c", 'a' + (int)rng(3));
            if (depth == 0 || rng(3) == 0)
                snprintf(path + o, sizeof path - o, "/");
            const char *method = methods[rng(4)];
            int want_status;
            char want[96];
            ref_expect(pats, n, method, path, &want_status, want, sizeof want);
            struct mh_route_match m;
            char scratch[80], got[96] = "";
            int st = mh_router_lookup(r, method, strlen(method), "", 0, path, strlen(path),
                                      MH_CLEAN_REDIRECT, scratch, sizeof scratch, &m);
            if (st == F)
                snprintf(got, sizeof got, "%s", mh_route_pattern(m.route));
            else if (st == R)
                snprintf(got, sizeof got, "%.*s", (int)m.location_len, m.location);
            else if (st == M)
                snprintf(got, sizeof got, "%.*s", (int)m.allow_len, m.allow);
            checked++;
            if (st != want_status || strcmp(got, want) != 0) {
                bad++;
                FAIL("random set:");
                for (int i = 0; i < n; i++)
                    printf("    %s\n", pats[i].str);
                printf("  %s %s: got %s \"%s\", wanted %s \"%s\"\n", method, path, status_name(st),
                       got, status_name(want_status), want);
                break;
            }
        }
        mh_router_free(r);
    }
    if (!bad && sets > 500)
        passed++;
    else if (!bad)
        FAIL("random: only %d route sets built", sets);
    printf("random cross-check: %d route sets, %d lookups\n", sets, checked);
}

static int ref_method_ok(const struct ref_pat *p, const char *m)
{
    return !*p->method || strcmp(p->method, m) == 0 ||
           (strcmp(p->method, "GET") == 0 && strcmp(m, "HEAD") == 0);
}

/*
 * Conflicts by definition: over every request of a small universe (paths of
 * up to 5 segments over a, b and c, where c stands for "anything else", with
 * and without a trailing slash), two patterns conflict when both match some
 * request and neither matches a strict subset of the other's requests.
 */
static void test_random_conflicts(void)
{
    static const char *const methods[] = {"GET", "HEAD", "POST", "PUT"};
    static char paths[800][24];
    int np = 0, bad = 0, pairs = 0, conflicts = 0;
    for (int depth = 0; depth <= 5; depth++) {
        int total = 1;
        for (int k = 0; k < depth; k++)
            total *= 3;
        for (int v = 0; v < total; v++) {
            char p[16];
            size_t o = 0;
            for (int k = 0, x = v; k < depth; k++, x /= 3)
                o += (size_t)snprintf(p + o, sizeof p - o, "/%c", 'a' + x % 3);
            if (depth)
                snprintf(paths[np++], sizeof paths[0], "%s", p);
            snprintf(paths[np++], sizeof paths[0], "%s/", p);
        }
    }
    for (int iter = 0; iter < 1500 && bad < 5; iter++) {
        struct ref_pat a, b;
        ref_gen(&a);
        ref_gen(&b);
        int both = 0, only_a = 0, only_b = 0, ex;
        for (int m = 0; m < 4; m++) {
            for (int i = 0; i < np; i++) {
                int ma = ref_method_ok(&a, methods[m]) && ref_path_match(&a, paths[i], &ex);
                int mb = ref_method_ok(&b, methods[m]) && ref_path_match(&b, paths[i], &ex);
                both += ma && mb;
                only_a += ma && !mb;
                only_b += mb && !ma;
            }
        }
        int want = both && only_a && only_b; /* overlap, neither more specific */
        want |= both && !only_a && !only_b;  /* the same requests */
        struct mh_router_builder *bl = mh_router_builder_new();
        char err[512];
        mh_router_add(bl, a.str, strlen(a.str), 0, "a.lua:1", err, sizeof err);
        mh_router_add(bl, b.str, strlen(b.str), 1, "b.lua:2", err, sizeof err);
        struct mh_router *r = mh_router_build(bl, err, sizeof err);
        mh_router_builder_free(bl);
        pairs++;
        conflicts += want;
        if (want != (r == NULL)) {
            bad++;
            FAIL("pair \"%s\" / \"%s\": %s, wanted %s", a.str, b.str, r ? "built" : err,
                 want ? "a conflict" : "no conflict");
        }
        mh_router_free(r);
    }
    if (!bad)
        passed++;
    printf("random conflicts: %d pairs, %d conflicting\n", pairs, conflicts);
}

int main(void)
{
    test_parse();
    test_match();
    test_conflicts();
    test_clean();
    test_api();
    test_many();
    test_random();
    test_random_conflicts();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
