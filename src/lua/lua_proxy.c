/*
 * http.proxy's two heads in C (lua/moonhttp/proxy.lua holds the policy that
 * needs Lua: targets, hooks, errors, the body relay). Without a request hook
 * (and for a URL target) the upstream request head is built from the
 * request's parsed fields in one call; without a response hook the upstream
 * response's head goes from the client's parser into the response's header
 * list in another: no Lua table, no string per field. The rules are
 * proxy.lua's (upstream_request and send_head), which still run when a hook
 * needs the headers as tables; the two must agree (spec/proxy_paths_spec.lua
 * sends the same requests both ways).
 *
 *   core.proxy_request(req, authority, prefix, opts|nil) → head, method, stream | nil, why
 *   core.proxy_response(res, resp, req, via) → true | nil, why
 *
 * nil, why means "take the Lua path": an upgrade (relay.lua), a message with
 * more Connection fields than struct mh_hop holds, a status res:status
 * refuses, a stand-in req or res (moonhttp.cache's).
 */
#include "lua_proxy.h"

#include "client.h"
#include "hop.h"
#include "lua_client.h"
#include "lua_request.h"
#include "lua_response.h"
#include "lua_sched.h"
#include "req.h"
#include "response.h"
#include "tls.h"

#include <lauxlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/*
 * The mh_req of the moonhttp.Request or moonhttp.Response at idx (key: its
 * metatable's registry key), or NULL for anything else: moonhttp.cache hands
 * http.proxy stand-in tables, which proxy.lua's Lua path serves. Raises for a
 * handle whose request has ended, as its methods do.
 */
static struct mh_req *to_handle(lua_State *L, int idx, const char *key, const char *what)
{
    struct mh_lua_req *h = lua_touserdata(L, idx); /* mh_lua_res has the same layout */
    if (!h || !lua_getmetatable(L, idx))
        return NULL;
    lua_rawgetp(L, LUA_REGISTRYINDEX, key);
    bool same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!same)
        return NULL;
    if (!h->r)
        luaL_error(L, "request finished: this %s belongs to a handler that has returned", what);
    return h->r;
}

/* The nil, why of a request or response proxy.lua must take itself. */
static int lua_path(lua_State *L, const char *why)
{
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
}

static bool name_is(const char *n, size_t len, const char *lower, size_t llen)
{
    return len == llen && strncasecmp(n, lower, llen) == 0;
}

/* opts[k] is set and not false. */
static bool opt_true(lua_State *L, int opts, const char *k)
{
    lua_getfield(L, opts, k);
    bool v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* The fields the proxy sets itself on the way up, whatever the client sent. */
static bool own_up(const char *n, size_t len)
{
    return name_is(n, len, "host", 4) || name_is(n, len, "content-length", 14) ||
           name_is(n, len, "expect", 6);
}

enum fwd { FWD_NONE, FWD_FOR, FWD_PROTO, FWD_HOST, FWD_FORWARDED };

static enum fwd forwarding(const char *n, size_t len)
{
    if (len == 15 && strncasecmp(n, "x-forwarded-", 12) == 0) {
        if (strncasecmp(n + 12, "for", 3) == 0)
            return FWD_FOR;
    } else if (len == 17 && strncasecmp(n, "x-forwarded-proto", 17) == 0) {
        return FWD_PROTO;
    } else if (len == 16 && strncasecmp(n, "x-forwarded-host", 16) == 0) {
        return FWD_HOST;
    } else if (len == 9 && strncasecmp(n, "forwarded", 9) == 0) {
        return FWD_FORWARDED;
    }
    return FWD_NONE;
}

/* The client's address without its port (and an IPv6 one without brackets), as proxy.lua's
 * client_ip. */
static size_t client_ip(struct mh_req *c, char *buf, size_t size, const char **ip)
{
    const char *a = c->ops->remote_addr(c, buf, size);
    size_t n = strlen(a);
    *ip = a;
    if (n && a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (close && close[1] == ':') {
            *ip = a + 1;
            return (size_t)(close - a - 1);
        }
    }
    const char *colon = strrchr(a, ':');
    if (colon && colon[1]) {
        for (const char *d = colon + 1; *d; d++)
            if (*d < '0' || *d > '9')
                return n;
        return (size_t)(colon - a);
    }
    return n;
}

static void add_field(luaL_Buffer *b, const char *name, size_t nlen, const char *v, size_t vlen)
{
    luaL_addlstring(b, name, nlen);
    luaL_addlstring(b, ": ", 2);
    luaL_addlstring(b, v, vlen);
    luaL_addlstring(b, "\r\n", 2);
}

static bool bad_text(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0')
            return true;
    return false;
}

/* opts.via as text for a Via field, or NULL when not set; raises for misuse. */
static const char *via_text(lua_State *L, int idx, size_t *len)
{
    if (lua_isnoneornil(L, idx) || (lua_isboolean(L, idx) && !lua_toboolean(L, idx)))
        return NULL;
    const char *v = lua_tolstring(L, idx, len);
    if (!v)
        luaL_error(L, "http.proxy: opts.via must be a string");
    if (bad_text(v, *len))
        luaL_error(L, "http.fetch: header Via: value contains CR, LF or NUL");
    return v;
}

/* What the walk over the request's fields saw (proxy.lua's upstream_request). */
struct walk {
    const char *cl; /* the first Content-Length */
    size_t cl_len;
    bool te, upgrade, has_xfp, has_xfh;
    int xff;  /* X-Forwarded-For fields passed on (joined into one) */
    int xff1; /* the first one's index */
};

/*
 * The spelling of the first of the request's fields before index `upto` named
 * n (any case), or n itself. Whether a field passes depends on its name only,
 * so that first one passed too: a name that repeats in another case goes up
 * in its first spelling, as proxy.lua's add() sends it.
 */
static const char *first_spelling_up(const struct mh_req *c, const struct mh_hop *hop,
                                     uint32_t upto, const char *n, size_t nl)
{
    const struct mh_request *r = &c->head;
    const char *base = mh_req_head(c);
    for (uint32_t j = 0; j < upto; j++) {
        const char *jn = base + r->headers[j].name.off;
        if (r->headers[j].name.len == nl && strncasecmp(jn, n, nl) == 0 &&
            !mh_hop_drops(hop, jn, nl))
            return jn;
    }
    return n;
}

/*
 * Appends the request's fields that pass (hop-by-hop ones, those the proxy
 * sets itself and, unless trusted, the forwarding ones dropped), in the
 * client's order, each name in its first spelling. X-Forwarded-For is left
 * to the caller, which joins its values.
 */
static void pass_fields(luaL_Buffer *b, const struct mh_req *c, const struct mh_hop *hop,
                        bool trust, struct walk *w)
{
    const struct mh_request *r = &c->head;
    const char *base = mh_req_head(c);
    for (uint32_t i = 0; i < r->nheaders; i++) {
        const char *n = base + r->headers[i].name.off, *v = base + r->headers[i].value.off;
        size_t nl = r->headers[i].name.len, vl = r->headers[i].value.len;
        enum fwd f = forwarding(n, nl);
        if (mh_hop_drops(hop, n, nl) || own_up(n, nl) || (f != FWD_NONE && !trust)) {
            if (name_is(n, nl, "content-length", 14)) {
                if (!w->cl) {
                    w->cl = v;
                    w->cl_len = vl;
                }
            } else if (name_is(n, nl, "transfer-encoding", 17)) {
                w->te = true;
            } else if (name_is(n, nl, "upgrade", 7)) {
                w->upgrade = true;
            }
            continue;
        }
        if (f == FWD_FOR) {
            if (!w->xff++)
                w->xff1 = (int)i;
            continue;
        }
        w->has_xfp |= f == FWD_PROTO;
        w->has_xfh |= f == FWD_HOST;
        add_field(b, first_spelling_up(c, hop, i, n, nl), nl, v, vl);
    }
}

/* X-Forwarded-For: the trusted ones joined, then the client's address (or that alone). */
static void add_xff(luaL_Buffer *b, const struct mh_req *c, const struct walk *w, const char *ip,
                    size_t iplen)
{
    const struct mh_request *r = &c->head;
    const char *base = mh_req_head(c);
    if (!w->xff) {
        add_field(b, "X-Forwarded-For", 15, ip, iplen);
        return;
    }
    const struct mh_header *first = &r->headers[w->xff1];
    luaL_addlstring(b, base + first->name.off, first->name.len);
    luaL_addlstring(b, ": ", 2);
    for (uint32_t i = (uint32_t)w->xff1; i < r->nheaders; i++) {
        const struct mh_header *h = &r->headers[i];
        if (forwarding(base + h->name.off, h->name.len) != FWD_FOR)
            continue;
        luaL_addlstring(b, base + h->value.off, h->value.len);
        luaL_addlstring(b, ", ", 2);
    }
    luaL_addlstring(b, ip, iplen);
    luaL_addlstring(b, "\r\n", 2);
}

/* Forwarded: for=<node>;proto=<proto>[;host="<host without \ and ">"] (RFC 7239). */
static void add_forwarded(luaL_Buffer *b, const char *name, const char *ip, size_t iplen,
                          const char *proto, const char *host, size_t hlen)
{
    luaL_addlstring(b, name, 9);
    luaL_addstring(b, ": for=");
    bool v6 = memchr(ip, ':', iplen) != NULL;
    if (v6)
        luaL_addlstring(b, "\"[", 2);
    luaL_addlstring(b, ip, iplen);
    if (v6)
        luaL_addlstring(b, "]\"", 2);
    luaL_addstring(b, ";proto=");
    luaL_addstring(b, proto);
    if (hlen) {
        luaL_addstring(b, ";host=\"");
        for (size_t i = 0; i < hlen; i++)
            if (host[i] != '\\' && host[i] != '"')
                luaL_addchar(b, host[i]);
        luaL_addchar(b, '"');
    }
    luaL_addlstring(b, "\r\n", 2);
}

/*
 * How the body goes up, as http.fetch with `body = req` sends it: -2 none (no
 * Content-Length, or "0"), -1 chunked (Transfer-Encoding, or a length that is
 * not a number), else the declared length.
 */
static lua_Integer body_length(const struct walk *w)
{
    if (!w->te && (!w->cl || (w->cl_len == 1 && w->cl[0] == '0')))
        return -2;
    if (w->te || w->cl_len == 0 || w->cl_len > 18)
        return -1;
    lua_Integer len = 0;
    for (size_t i = 0; i < w->cl_len; i++) {
        if (w->cl[i] < '0' || w->cl[i] > '9')
            return -1;
        len = len * 10 + (w->cl[i] - '0');
    }
    return len;
}

/*
 * The framing that ends the head: a streamed body's length or chunked;
 * "Content-Length: 0" for an empty body and a bodiless POST, PUT or PATCH.
 */
static void add_framing(luaL_Buffer *b, const struct walk *w, lua_Integer body, const char *m)
{
    if (body == -1) {
        luaL_addstring(b, "Transfer-Encoding: chunked\r\n\r\n");
    } else if (body >= 0) {
        char line[48];
        int n = snprintf(line, sizeof line, "Content-Length: %lld\r\n\r\n", (long long)body);
        luaL_addlstring(b, line, (size_t)n);
    } else if (w->cl || !strcmp(m, "POST") || !strcmp(m, "PUT") || !strcmp(m, "PATCH")) {
        luaL_addstring(b, "Content-Length: 0\r\n\r\n");
    } else {
        luaL_addlstring(b, "\r\n", 2);
    }
}

/*
 * core.proxy_request(req, authority, prefix, opts): the upstream request's
 * head for a URL target (authority: its host[:port], the Host unless
 * preserve_host), per RFC 9110 §7.6 as proxy.lua's upstream_request builds
 * it; then the method and how the body is streamed (nil, a length, true for
 * chunked). nil, "upgrade" or nil, "connection" when proxy.lua must take
 * this request itself.
 */
static int l_proxy_request(lua_State *L)
{
    struct mh_req *c = to_handle(L, 1, &mh_request_mt_key, "req");
    if (!c)
        return lua_path(L, "stand-in");
    size_t alen, plen;
    const char *authority = luaL_checklstring(L, 2, &alen);
    const char *prefix = luaL_checklstring(L, 3, &plen);
    bool opts = !lua_isnil(L, 4); /* nil: no options (proxy.lua's NO_OPTS), none to read */
    if (opts)
        luaL_checktype(L, 4, LUA_TTABLE);
    lua_settop(L, 4);
    const struct mh_request *r = &c->head;
    const char *base = mh_req_head(c);
    struct mh_hop hop = {0};
    for (uint32_t i = 0; i < r->nheaders; i++) {
        const struct mh_header *h = &r->headers[i];
        if (mh_hop_is_connection(base + h->name.off, h->name.len) &&
            !mh_hop_add_connection(&hop, base + h->value.off, h->value.len))
            return lua_path(L, "connection");
    }
    if (r->connect_websocket)
        return lua_path(L, "upgrade");
    bool trust = false, forwarded = false, preserve = false, xfwd = true;
    size_t vialen = 0;
    const char *via = NULL;
    if (opts) {
        trust = opt_true(L, 4, "trust_forwarded");
        forwarded = opt_true(L, 4, "forwarded");
        preserve = opt_true(L, 4, "preserve_host");
        lua_getfield(L, 4, "x_forwarded");
        xfwd = !(lua_isboolean(L, -1) && !lua_toboolean(L, -1));
        lua_getfield(L, 4, "via"); /* at 6 */
        via = via_text(L, 6, &vialen);
    }

    const char *method = mh_req_method(c);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, method);
    luaL_addchar(&b, ' ');
    size_t before = luaL_bufflen(&b);
    luaL_addlstring(&b, prefix, plen);
    luaL_addlstring(&b, base + r->path.off, r->path.len);
    if (r->query.len) {
        luaL_addchar(&b, '?');
        luaL_addlstring(&b, base + r->query.off, r->query.len);
    }
    /* http.fetch's rule for an empty path or one that starts with the query */
    if (luaL_bufflen(&b) == before || luaL_buffaddr(&b)[before] == '?') {
        luaL_addchar(&b, '/');
        char *p = luaL_buffaddr(&b);
        memmove(p + before + 1, p + before, luaL_bufflen(&b) - before - 1);
        p[before] = '/';
    }
    luaL_addstring(&b, " HTTP/1.1\r\nHost: ");
    const char *host = base + r->host.off;
    if (preserve && r->host.len)
        luaL_addlstring(&b, host, r->host.len);
    else
        luaL_addlstring(&b, authority, alen);
    luaL_addlstring(&b, "\r\n", 2);

    struct walk w = {0};
    pass_fields(&b, c, &hop, trust, &w);
    if (w.upgrade)
        return lua_path(L, "upgrade");
    char addr[64];
    const char *ip;
    size_t iplen = client_ip(c, addr, sizeof addr, &ip);
    const struct mh_transport *tr = c->ops->transport ? c->ops->transport(c) : NULL;
    struct mh_tls_info info;
    const char *proto = tr && mh_tls_info(tr, &info) ? "https" : "http";
    if (xfwd) {
        add_xff(&b, c, &w, ip, iplen);
        if (!w.has_xfp)
            add_field(&b, "X-Forwarded-Proto", 17, proto, strlen(proto));
        if (!w.has_xfh && r->host.len)
            add_field(&b, "X-Forwarded-Host", 16, host, r->host.len);
    } else if (w.xff) {
        /* trusted and not extended: passed on as they came, joined as proxy.lua's add() does */
        const struct mh_header *first = &r->headers[w.xff1];
        for (uint32_t i = (uint32_t)w.xff1; i < r->nheaders; i++) {
            const struct mh_header *h = &r->headers[i];
            if (forwarding(base + h->name.off, h->name.len) == FWD_FOR)
                add_field(&b, base + first->name.off, first->name.len, base + h->value.off,
                          h->value.len);
        }
    }
    if (forwarded) /* under a trusted Forwarded's spelling, as the others */
        add_forwarded(&b,
                      trust ? first_spelling_up(c, &hop, r->nheaders, "Forwarded", 9) : "Forwarded",
                      ip, iplen, proto, host, r->host.len);
    if (via) {
        const char *v = r->http_major == 2 ? "2" : r->http_minor ? "1.1" : "1.0";
        luaL_addlstring(&b, first_spelling_up(c, &hop, r->nheaders, "Via", 3), 3);
        luaL_addstring(&b, ": ");
        luaL_addstring(&b, v);
        luaL_addchar(&b, ' ');
        luaL_addlstring(&b, via, vialen);
        luaL_addlstring(&b, "\r\n", 2);
    }
    lua_Integer body = body_length(&w);
    add_framing(&b, &w, body, method);
    luaL_pushresult(&b);
    lua_pushstring(L, method);
    if (body == -2)
        lua_pushnil(L);
    else if (body == -1)
        lua_pushboolean(L, 1);
    else
        lua_pushinteger(L, body);
    return 3;
}

/* proxy.lua's send_head without a response hook: see core.proxy_response below. */
static bool keep_down(const struct mh_hop *hop, const char *n, size_t nl, bool trailers_ok)
{
    if (name_is(n, nl, "date", 4) || name_is(n, nl, "server", 6))
        return false; /* the front server's own (as nginx does) */
    if (!mh_hop_drops(hop, n, nl))
        return true;
    /* Trailer is end-to-end in RFC 9110: it goes down unless Connection names it */
    return trailers_ok && name_is(n, nl, "trailer", 7) && !mh_hop_named(hop, "trailer", 7);
}

/* The first field before p[0..end) named n (any case), or NULL: its spelling is the one kept. */
static const char *first_spelling(const char *head, const char *stop, const char *n, size_t nl,
                                  const struct mh_hop *hop, bool trailers_ok)
{
    const char *p = head;
    while (p < stop) {
        size_t l = strlen(p);
        const char *v = p + l + 1;
        if (l == nl && strncasecmp(p, n, nl) == 0 && keep_down(hop, p, l, trailers_ok))
            return p;
        p = v + strlen(v) + 1;
    }
    return NULL;
}

static void set_field(lua_State *L, struct mh_req *c, const char *n, size_t nl, const char *v,
                      size_t vl, bool replace)
{
    const char *err = mh_response_header(&c->res, n, nl, v, vl, replace);
    if (err)
        luaL_error(L, "header %s: %s", n, err);
}

/*
 * core.proxy_response(res, resp, req, via): the upstream response's status
 * and fields to res, hop-by-hop ones and its Date and Server dropped, in the
 * upstream's order and spelling (a name that repeats in another case is added
 * under its first spelling); Trailer kept for a client that can get
 * trailers; "Via: <version> <via>" added when via is set. Returns true, or
 * nil, "connection" (proxy.lua's send_head then does it).
 */
static int l_proxy_response(lua_State *L)
{
    struct mh_req *c = to_handle(L, 1, &mh_response_mt_key, "res");
    struct mh_req *front = to_handle(L, 3, &mh_request_mt_key, "req");
    if (!c || !front)
        return lua_path(L, "stand-in");
    const struct mh_client_req *q = mh_lua_client_exchange(L, 2);
    size_t vialen = 0;
    const char *via = via_text(L, 4, &vialen);
    /* a status res:status refuses: proxy.lua's path raises as it always did */
    if (!q || q->status < 102 || q->status > 999)
        return lua_path(L, "status");
    size_t len = 0;
    const char *head = mh_client_head(q, &len), *end = head + len;
    struct mh_hop hop = {0};
    for (const char *p = head; p < end;) {
        size_t l = strlen(p);
        const char *v = p + l + 1;
        if (mh_hop_is_connection(p, l) && !mh_hop_add_connection(&hop, v, strlen(v)))
            return lua_path(L, "connection");
        p = v + strlen(v) + 1;
    }
    if (c->res.written)
        return luaL_error(L, "res:status: the response has started (res:write was called); set "
                             "the status and headers before writing");
    c->res.status = q->status;
    bool trailers_ok = !(front->head.http_major == 1 && front->head.http_minor == 0);
    const char *via_name = "Via";
    size_t via_nlen = 3;
    bool via_seen = false;
    for (const char *p = head; p < end;) {
        size_t l = strlen(p);
        const char *v = p + l + 1;
        size_t vl = strlen(v);
        if (keep_down(&hop, p, l, trailers_ok)) {
            const char *first = first_spelling(head, p, p, l, &hop, trailers_ok);
            set_field(L, c, first ? first : p, l, v, vl, first == NULL);
            if (!via_seen && name_is(p, l, "via", 3)) {
                via_seen = true;
                via_name = first ? first : p;
            }
        }
        p = v + vl + 1;
    }
    if (via) {
        char value[32];
        int n = snprintf(value, sizeof value, "%d.%d ", q->http_major, q->http_minor);
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        luaL_addlstring(&b, value, (size_t)n);
        luaL_addlstring(&b, via, vialen);
        luaL_pushresult(&b);
        size_t bl;
        const char *bv = lua_tolstring(L, -1, &bl);
        set_field(L, c, via_name, via_nlen, bv, bl, !via_seen);
    }
    lua_pushboolean(L, 1);
    return 1;
}

void mh_lua_proxy_open(lua_State *L)
{
    lua_pushcfunction(L, l_proxy_request);
    lua_setfield(L, -2, "proxy_request");
    lua_pushcfunction(L, l_proxy_response);
    lua_setfield(L, -2, "proxy_response");
    /* hop.lua's NAMES: the one list of hop-by-hop names is hop.c's */
    lua_createtable(L, 0, (int)mh_hop_nstandard);
    for (size_t i = 0; i < mh_hop_nstandard; i++) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, mh_hop_standard[i].name);
    }
    lua_setfield(L, -2, "hop_names");
}
