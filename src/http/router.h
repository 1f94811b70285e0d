#ifndef MH_ROUTER_H
#define MH_ROUTER_H
/*
 * The router: Go 1.22+ net/http.ServeMux pattern semantics, compiled once into
 * an immutable tree. Patterns are "[METHOD ][HOST]/[PATH]" with {name},
 * {name...} (last segment only) and {$}. A builder collects patterns, rejects
 * invalid ones and conflicting pairs, and produces a router; lookups on the
 * built router allocate nothing and cost O(path depth).
 *
 * Errors are returned as NULL-terminated messages written into a caller
 * buffer; functions return 0 on success and -1 on error.
 */
#include <stddef.h>
#include <stdint.h>

#define MH_ROUTE_MAX_WILDCARDS 16
/*
 * Room for the Allow header value in a match. mh_router_build rejects a route
 * set whose methods, joined, would not fit, so lookups never truncate.
 */
#define MH_ROUTE_ALLOW_MAX 256
/* At most this many distinct methods (HEAD counts when GET is registered). */
#define MH_ROUTE_MAX_METHODS 64

struct mh_router_builder;
struct mh_router;
struct mh_route;

/* Creates an empty builder. Returns NULL only when out of memory. */
struct mh_router_builder *mh_router_builder_new(void);
/* Frees the builder and its parsed patterns; a router built from it stays valid. NULL is a no-op.
 */
void mh_router_builder_free(struct mh_router_builder *b);

/*
 * Adds a pattern bound to `handler_id` (opaque to the router). `where` names
 * the registration site ("app.lua:12") for error messages; it is copied and
 * may be NULL. The host part of a pattern matches case-insensitively.
 * Returns -1 and writes "invalid pattern \"...\": <reason>" into err when the
 * pattern is malformed. Conflicts are reported by mh_router_build.
 */
int mh_router_add(struct mh_router_builder *b, const char *pattern, size_t len, int handler_id,
                  const char *where, char *err, size_t errlen);

/*
 * Builds the immutable router and frees nothing of the builder (free it
 * after). Returns NULL and writes an error naming both patterns, where each
 * was registered and an example path both match when two patterns conflict.
 */
struct mh_router *mh_router_build(struct mh_router_builder *b, char *err, size_t errlen);
/* Frees the router; no match from it may be used afterwards. NULL is a no-op. */
void mh_router_free(struct mh_router *r);

enum mh_route_status {
    MH_ROUTE_FOUND,              /* match->route and captures are set */
    MH_ROUTE_NOT_FOUND,          /* nothing matches: 404 */
    MH_ROUTE_METHOD_NOT_ALLOWED, /* path matches under other methods: 405, match->allow */
    MH_ROUTE_REDIRECT,           /* match->location (path only; caller appends "?query") */
};

struct mh_route_capture {
    uint32_t off, len; /* a slice of match->path, still %-escaped */
};

/* How non-canonical paths (//, /./, /../) are handled. */
enum mh_clean_mode {
    MH_CLEAN_REDIRECT, /* Go: redirect to the cleaned path */
    MH_CLEAN_REWRITE,  /* route the cleaned path directly, no extra round trip */
};

/*
 * The result of a lookup. Everything points into the router, the caller's
 * strings, the caller's scratch buffer or the match itself (`allow`): nothing
 * is allocated. Captures are slices of `path`, so with MH_CLEAN_REWRITE they
 * live as long as the scratch buffer.
 */
struct mh_route_match {
    const struct mh_route *route; /* FOUND */
    int handler_id;               /* FOUND */
    const char *path;             /* the path that was matched (input or cleaned) */
    size_t path_len;
    unsigned ncaptures;
    struct mh_route_capture captures[MH_ROUTE_MAX_WILDCARDS]; /* in wildcard order */
    const char *allow; /* METHOD_NOT_ALLOWED: "GET, HEAD, POST" */
    size_t allow_len;
    const char *location; /* REDIRECT: escaped path to send in Location */
    size_t location_len;
    char _allow_buf[MH_ROUTE_ALLOW_MAX]; /* backs `allow`: the lookup writes it, never the caller */
};

/*
 * Finds the handler for a request. `path` is the escaped request path (no
 * query); `host` may include a port (ignored for matching). `scratch` (at
 * least path_len + 2 bytes) receives a cleaned path when one is needed, and the
 * "path/" candidate of the trailing-slash redirect. CONNECT requests are not
 * cleaned, as in Go. Order of decisions, as Go's ServeMux: trailing-slash
 * redirect (on the cleaned path), then the clean redirect (MH_CLEAN_REDIRECT
 * only), then FOUND, then METHOD_NOT_ALLOWED, then NOT_FOUND. A scratch buffer
 * smaller than path_len + 2 is misuse: an unclean path then gives NOT_FOUND
 * and the trailing-slash redirect is skipped. `scratch` must not overlap
 * `path`; paths of 4 GiB or more give NOT_FOUND. Safe to call from several
 * threads on one router: the router is never written after the build.
 */
enum mh_route_status mh_router_lookup(const struct mh_router *r, const char *method,
                                      size_t method_len, const char *host, size_t host_len,
                                      const char *path, size_t path_len, enum mh_clean_mode clean,
                                      char *scratch, size_t scratch_len,
                                      struct mh_route_match *match);

/* The pattern as registered, for req.pattern and logs (NUL-terminated). */
const char *mh_route_pattern(const struct mh_route *route);
/* The `where` given to mh_router_add (NUL-terminated, owned by the router). */
const char *mh_route_where(const struct mh_route *route);
/*
 * Name of the i-th wildcard (capture order, 0-based) and its length in *len;
 * NULL when i is out of range. Not NUL-terminated: a slice of the pattern.
 */
const char *mh_route_wildcard_name(const struct mh_route *route, unsigned i, size_t *len);
/* Index of wildcard `name` in the captures, or -1. */
int mh_route_wildcard_index(const struct mh_route *route, const char *name, size_t len);
/* Number of routes in the router. */
size_t mh_router_size(const struct mh_router *r);

/*
 * Decodes %XX escapes of a path segment value into out (at least len bytes).
 * Returns the decoded length, or -1 on a malformed escape.
 */
long mh_path_unescape(const char *in, size_t len, char *out);

#endif
