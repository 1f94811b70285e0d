/*
 * http.proxy's header rules, the one copy (lua/moonhttp/proxy.lua holds the
 * policy: targets, hooks, errors; lua_proxy_body.c moves the bodies). The
 * upstream request's fields (hop-by-hop ones and those Connection names dropped through hop.c,
 * the forwarding headers per trust, Via, the framing) and the response's
 * going down (the same drops, the server's own Date and Server, Trailer,
 * Via) are chosen here for both of proxy.lua's paths:
 *
 * - the plain path (a URL target, no hook): the upstream head's text built
 *   from the request's parsed fields in one call, the upstream response's
 *   head copied from the client's parser into the response's header list in
 *   another: no Lua table, no string per field;
 * - with a hook, a group target, an upgrade or moonhttp.cache's stand-in req
 *   or res: the same fields as a header list, which proxy.lua turns into the
 *   hook's tables and http.fetch's headers.
 *
 *   core.proxy_request(req, authority, prefix, opts|nil [, as_list])
 *   core.proxy_response(res, resp, req, via [, as_list])
 *
 * spec/proxy_paths_spec.lua sends the same requests both ways.
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

struct slice {
    const char *p;
    size_t len;
};

/* A peer address's host part: without its port, an IPv6 one without brackets. */
static struct slice address_ip(const char *a)
{
    size_t n = strlen(a);
    if (n && a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (close && close[1] == ':')
            return (struct slice){a + 1, (size_t)(close - a - 1)};
    }
    const char *colon = strrchr(a, ':');
    if (colon && colon[1]) {
        for (const char *d = colon + 1; *d; d++)
            if (*d < '0' || *d > '9')
                return (struct slice){a, n};
        return (struct slice){a, (size_t)(colon - a)};
    }
    return (struct slice){a, n};
}

/* CR, LF or NUL: what would end a field early or split it in two on the way up. */
static bool bad_text(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= '\r' && (ch == '\r' || ch == '\n' || ch == '\0'))
            return true;
    }
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

/*
 * The request an upstream head is built from: a moonhttp.Request's parsed
 * head (c), or a stand-in table (moonhttp.cache's; c NULL) whose fields are
 * read through Lua once, its header_list() kept at stack index `list`. The
 * rules below see no difference.
 */
struct src {
    const struct mh_req *c;
    lua_State *L;
    int list;
    uint32_t n; /* fields */
    struct slice method, path, query, host, ip;
    const char *proto;   /* the client's scheme: "https" or "http" */
    const char *version; /* the client's HTTP version as Via writes it */
    char addr[64];
};

static void standin_field(const struct src *s, uint32_t i, struct slice *n, struct slice *v)
{
    lua_State *L = s->L;
    /* the list holds the strings: they outlive the pop */
    if (lua_rawgeti(L, s->list, (lua_Integer)i * 2 + 1) != LUA_TSTRING ||
        lua_rawgeti(L, s->list, (lua_Integer)i * 2 + 2) != LUA_TSTRING)
        luaL_error(L, "http.proxy: req:header_list() must hold strings");
    n->p = lua_tolstring(L, -2, &n->len);
    v->p = lua_tolstring(L, -1, &v->len);
    lua_pop(L, 2);
}

/* Field i's name and value (inline: the request's own fields are a hot loop). */
static inline void src_field(const struct src *s, uint32_t i, struct slice *n, struct slice *v)
{
    if (!s->c) {
        standin_field(s, i, n, v);
        return;
    }
    const struct mh_header *h = &s->c->head.headers[i];
    const char *base = mh_req_head(s->c);
    *n = (struct slice){base + h->name.off, h->name.len};
    *v = (struct slice){base + h->value.off, h->value.len};
}

static void src_of_request(struct src *s, lua_State *L, const struct mh_req *c)
{
    const struct mh_request *r = &c->head;
    const char *base = mh_req_head(c);
    s->c = c;
    s->L = L;
    s->n = r->nheaders;
    const char *method = mh_req_method(c);
    s->method = (struct slice){method, strlen(method)};
    s->path = (struct slice){base + r->path.off, r->path.len};
    s->query = (struct slice){base + r->query.off, r->query.len};
    s->host = (struct slice){base + r->host.off, r->host.len};
    s->ip = address_ip(c->ops->remote_addr((struct mh_req *)c, s->addr, sizeof s->addr));
    const struct mh_transport *tr = c->ops->transport ? c->ops->transport((struct mh_req *)c) : NULL;
    struct mh_tls_info info;
    s->proto = tr && mh_tls_info(tr, &info) ? "https" : "http";
    s->version = r->http_major == 2 ? "2" : r->http_minor ? "1.1" : "1.0";
}

/* req[k] as a string ("" for nil), left on the stack to keep it alive. */
static struct slice standin_text(lua_State *L, int req, const char *k)
{
    lua_getfield(L, req, k);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushliteral(L, "");
    }
    struct slice out;
    out.p = lua_tolstring(L, -1, &out.len);
    if (!out.p)
        luaL_error(L, "http.proxy: req.%s must be a string", k);
    return out;
}

/* Calls req:<k>() with one result, left on the stack. */
static void standin_call(lua_State *L, int req, const char *k)
{
    lua_getfield(L, req, k);
    lua_pushvalue(L, req);
    lua_call(L, 1, 1);
}

static void src_of_standin(struct src *s, lua_State *L, int req)
{
    s->c = NULL;
    s->L = L;
    luaL_checkstack(L, 12, NULL);
    standin_call(L, req, "header_list");
    luaL_checktype(L, -1, LUA_TTABLE);
    s->list = lua_gettop(L);
    s->n = (uint32_t)(lua_rawlen(L, s->list) / 2);
    s->method = standin_text(L, req, "method");
    s->path = standin_text(L, req, "raw_path");
    s->query = standin_text(L, req, "query");
    s->host = standin_text(L, req, "host");
    s->ip = address_ip(standin_text(L, req, "remote_addr").p);
    standin_call(L, req, "tls");
    s->proto = lua_toboolean(L, -1) ? "https" : "http";
    struct slice proto = standin_text(L, req, "proto");
    s->version = proto.len == 8 && !strcmp(proto.p, "HTTP/1.0") ? "1.0"
                 : proto.len == 8 && !strcmp(proto.p, "HTTP/1.1") ? "1.1"
                                                                   : "2";
}

/*
 * The Connection fields of a message (n fields, field(i) gives each) into
 * hop. Past MH_HOP_MAX_CONNECTION of them, their values are joined with
 * commas into one string left on L's stack, the same tokens.
 */
static void connection_fields(lua_State *L, struct mh_hop *hop, const struct src *s)
{
    struct slice n, v;
    for (uint32_t i = 0; i < s->n; i++) {
        src_field(s, i, &n, &v);
        if (mh_hop_is_connection(n.p, n.len) && !mh_hop_add_connection(hop, v.p, v.len))
            goto many;
    }
    return;
many:
    hop->n = 0;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (uint32_t i = 0; i < s->n; i++) {
        src_field(s, i, &n, &v);
        if (mh_hop_is_connection(n.p, n.len)) {
            luaL_addlstring(&b, v.p, v.len);
            luaL_addchar(&b, ',');
        }
    }
    luaL_pushresult(&b);
    size_t len;
    const char *all = lua_tolstring(L, -1, &len);
    mh_hop_add_connection(hop, all, len);
}

/*
 * Where the fields go: the upstream head's text (b), or a header list
 * { name, value, ... } at stack index `list` for proxy.lua's hooks and
 * http.fetch. A value may be written in pieces between field_begin and
 * field_end (value_buf).
 */
struct out {
    lua_State *L;
    luaL_Buffer *b;
    int list;
    lua_Integer n;
    luaL_Buffer vb;
};

static void field_begin(struct out *o, const char *n, size_t nl)
{
    if (o->b) {
        luaL_addlstring(o->b, n, nl);
        luaL_addlstring(o->b, ": ", 2);
        return;
    }
    lua_pushlstring(o->L, n, nl);
    lua_rawseti(o->L, o->list, ++o->n);
    luaL_buffinit(o->L, &o->vb);
}

static luaL_Buffer *value_buf(struct out *o)
{
    return o->b ? o->b : &o->vb;
}

static void field_end(struct out *o)
{
    if (o->b) {
        luaL_addlstring(o->b, "\r\n", 2);
        return;
    }
    luaL_pushresult(&o->vb);
    lua_rawseti(o->L, o->list, ++o->n);
}

static inline void put(struct out *o, const char *n, size_t nl, const char *v, size_t vl)
{
    if (o->b) {
        luaL_addlstring(o->b, n, nl);
        luaL_addlstring(o->b, ": ", 2);
        luaL_addlstring(o->b, v, vl);
        luaL_addlstring(o->b, "\r\n", 2);
        return;
    }
    field_begin(o, n, nl);
    luaL_addlstring(value_buf(o), v, vl);
    field_end(o);
}

/* What the walk over the request's fields saw. */
struct walk {
    struct slice cl; /* the first Content-Length (p NULL: none) */
    bool te, upgrade, has_xff, has_xfp, has_xfh;
    struct slice bad; /* a passing field whose name or value has CR, LF or NUL */
};

/*
 * The spelling of the first of the request's fields before index `upto` named
 * n (any case), or n itself. Whether a field passes depends on its name only,
 * so that first one passed too: a name that repeats in another case goes up
 * in its first spelling, as one header list entry.
 */
static const char *first_spelling_up(const struct src *s, const struct mh_hop *hop, uint32_t upto,
                                     const char *n, size_t nl)
{
    struct slice jn, jv;
    for (uint32_t j = 0; j < upto; j++) {
        src_field(s, j, &jn, &jv);
        if (jn.len == nl && strncasecmp(jn.p, n, nl) == 0 && !mh_hop_drops(hop, jn.p, nl))
            return jn.p;
    }
    return n;
}

/*
 * X-Forwarded-For extended in place, at the first one the client sent: its
 * values and those of any later ones joined, then the client's address.
 */
static void put_xff(struct out *o, const struct src *s, uint32_t from, struct slice name)
{
    field_begin(o, name.p, name.len);
    luaL_Buffer *b = value_buf(o);
    struct slice n, v;
    for (uint32_t i = from; i < s->n; i++) {
        src_field(s, i, &n, &v);
        if (forwarding(n.p, n.len) != FWD_FOR)
            continue;
        luaL_addlstring(b, v.p, v.len);
        luaL_addlstring(b, ", ", 2);
    }
    luaL_addlstring(b, s->ip.p, s->ip.len);
    field_end(o);
}

/*
 * Passes the request's fields (hop-by-hop ones, those the proxy sets itself
 * and, unless trusted, the forwarding ones dropped), in the client's order,
 * each name in its first spelling. With x_forwarded, a trusted
 * X-Forwarded-For is extended where it stands.
 */
static void pass_fields(struct out *o, const struct src *s, const struct mh_hop *hop, bool trust,
                        bool xfwd, struct walk *w)
{
    struct slice n, v;
    for (uint32_t i = 0; i < s->n; i++) {
        src_field(s, i, &n, &v);
        enum fwd f = forwarding(n.p, n.len);
        if (mh_hop_drops(hop, n.p, n.len) || own_up(n.p, n.len) || (f != FWD_NONE && !trust)) {
            if (name_is(n.p, n.len, "content-length", 14)) {
                if (!w->cl.p)
                    w->cl = v;
            } else if (name_is(n.p, n.len, "transfer-encoding", 17)) {
                w->te = true;
            } else if (name_is(n.p, n.len, "upgrade", 7)) {
                w->upgrade = true;
            }
            continue;
        }
        if (!w->bad.p && (bad_text(v.p, v.len) || bad_text(n.p, n.len)))
            w->bad = n;
        if (f == FWD_FOR && xfwd) {
            if (!w->has_xff)
                put_xff(o, s, i, n);
            w->has_xff = true;
            continue;
        }
        w->has_xfp |= f == FWD_PROTO;
        w->has_xfh |= f == FWD_HOST;
        put(o, first_spelling_up(s, hop, i, n.p, n.len), n.len, v.p, v.len);
    }
}

/* Forwarded: for=<node>;proto=<proto>[;host="<host without \ and ">"] (RFC 7239). */
static void put_forwarded(struct out *o, const char *name, const struct src *s)
{
    field_begin(o, name, 9);
    luaL_Buffer *b = value_buf(o);
    luaL_addstring(b, "for=");
    bool v6 = memchr(s->ip.p, ':', s->ip.len) != NULL;
    if (v6)
        luaL_addlstring(b, "\"[", 2);
    luaL_addlstring(b, s->ip.p, s->ip.len);
    if (v6)
        luaL_addlstring(b, "]\"", 2);
    luaL_addstring(b, ";proto=");
    luaL_addstring(b, s->proto);
    if (s->host.len) {
        luaL_addstring(b, ";host=\"");
        for (size_t i = 0; i < s->host.len; i++)
            if (s->host.p[i] != '\\' && s->host.p[i] != '"')
                luaL_addchar(b, s->host.p[i]);
        luaL_addchar(b, '"');
    }
    field_end(o);
}

/*
 * How the body goes up, as http.fetch with `body = req` sends it: -2 none (no
 * Content-Length, or "0"), -1 chunked (Transfer-Encoding, or a length that is
 * not a number), else the declared length.
 */
static lua_Integer body_length(const struct walk *w)
{
    if (!w->te && (!w->cl.p || (w->cl.len == 1 && w->cl.p[0] == '0')))
        return -2;
    if (w->te || w->cl.len == 0 || w->cl.len > 18)
        return -1;
    lua_Integer len = 0;
    for (size_t i = 0; i < w->cl.len; i++) {
        if (w->cl.p[i] < '0' || w->cl.p[i] > '9')
            return -1;
        len = len * 10 + (w->cl.p[i] - '0');
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
    } else if (w->cl.p || !strcmp(m, "POST") || !strcmp(m, "PUT") || !strcmp(m, "PATCH")) {
        luaL_addstring(b, "Content-Length: 0\r\n\r\n");
    } else {
        luaL_addlstring(b, "\r\n", 2);
    }
}

/* The options of a head: opts at index idx (none when nil). */
struct head_opts {
    bool trust, forwarded, preserve, xfwd;
    const char *via;
    size_t vialen;
};

static void read_opts(lua_State *L, int idx, struct head_opts *h)
{
    *h = (struct head_opts){.xfwd = true};
    if (lua_isnil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    h->trust = opt_true(L, idx, "trust_forwarded");
    h->forwarded = opt_true(L, idx, "forwarded");
    h->preserve = opt_true(L, idx, "preserve_host");
    lua_getfield(L, idx, "x_forwarded");
    h->xfwd = !(lua_isboolean(L, -1) && !lua_toboolean(L, -1));
    lua_pop(L, 1);
    lua_getfield(L, idx, "via"); /* stays: it anchors h->via */
    h->via = via_text(L, lua_gettop(L), &h->vialen);
}

/* The path going up: prefix, the request's path and query ("/" for an empty path). */
static void add_target(luaL_Buffer *b, const struct src *s, const char *prefix, size_t plen)
{
    size_t before = luaL_bufflen(b);
    luaL_addlstring(b, prefix, plen);
    luaL_addlstring(b, s->path.p, s->path.len);
    if (s->query.len) {
        luaL_addchar(b, '?');
        luaL_addlstring(b, s->query.p, s->query.len);
    }
    /* http.fetch's rule for an empty path or one that starts with the query */
    if (luaL_bufflen(b) == before || luaL_buffaddr(b)[before] == '?') {
        luaL_addchar(b, '/');
        char *p = luaL_buffaddr(b);
        memmove(p + before + 1, p + before, luaL_bufflen(b) - before - 1);
        p[before] = '/';
    }
}

/*
 * The fields after the client's: X-Forwarded-* (unless x_forwarded = false),
 * Forwarded, Via (each under a trusted field's spelling when one passed),
 * Host when preserve_host and the head is a header list.
 */
static void put_added(struct out *o, const struct src *s, const struct mh_hop *hop,
                      const struct head_opts *h, const struct walk *w)
{
    if (h->xfwd) {
        if (!w->has_xff)
            put(o, "X-Forwarded-For", 15, s->ip.p, s->ip.len);
        if (!w->has_xfp)
            put(o, "X-Forwarded-Proto", 17, s->proto, strlen(s->proto));
        if (!w->has_xfh && s->host.len)
            put(o, "X-Forwarded-Host", 16, s->host.p, s->host.len);
    }
    if (h->forwarded)
        put_forwarded(o, h->trust ? first_spelling_up(s, hop, s->n, "Forwarded", 9) : "Forwarded",
                      s);
    if (h->via) {
        field_begin(o, first_spelling_up(s, hop, s->n, "Via", 3), 3);
        luaL_Buffer *b = value_buf(o);
        luaL_addstring(b, s->version);
        luaL_addchar(b, ' ');
        luaL_addlstring(b, h->via, h->vialen);
        field_end(o);
    }
    if (!o->b && h->preserve && s->host.len)
        put(o, "Host", 4, s->host.p, s->host.len);
}

/* nil, "invalid", why: a field that cannot go up as it is (proxy.lua answers 400). */
static int invalid_field(lua_State *L, struct slice name)
{
    lua_pushnil(L);
    lua_pushliteral(L, "invalid");
    lua_pushfstring(L, "header %s: name or value contains CR, LF or NUL",
                    lua_pushlstring(L, name.p, name.len));
    lua_remove(L, -2);
    return 3;
}

/*
 * core.proxy_request(req, authority, prefix, opts|nil [, as_list]): the
 * upstream request per RFC 9110 §7.6, for both of proxy.lua's paths.
 *
 * Without as_list: the head's text for a URL target (authority: its
 * host[:port], the Host unless preserve_host) with its framing, then the
 * method, how the body is streamed (nil, a length, true for chunked) and
 * whether the head lacks its Host: authority false (a group, whose server
 * is picked per attempt) leaves it to core.proxy_fetch, so the head is built
 * once per request. nil, why when proxy.lua must take the request itself
 * ("upgrade", "stand-in": a table in req's place).
 *
 * With as_list (a hook, a group target, an upgrade, a stand-in req): the
 * fields as a header list { name, value, ... } (no Host unless
 * preserve_host, no framing: http.fetch adds them), the path, the first
 * Content-Length (or nil), whether Transfer-Encoding and Upgrade came.
 *
 * Either way nil, "invalid", why for a field with CR, LF or NUL.
 */
static int l_proxy_request(lua_State *L)
{
    bool as_list = lua_toboolean(L, 5);
    size_t alen = 0, plen;
    bool group = !as_list && lua_isboolean(L, 2) && !lua_toboolean(L, 2);
    const char *authority = as_list || group ? NULL : luaL_checklstring(L, 2, &alen);
    const char *prefix = luaL_checklstring(L, 3, &plen);
    lua_settop(L, 4);
    struct mh_req *c = to_handle(L, 1, &mh_request_mt_key, "req");
    struct src s;
    if (c) {
        if (!as_list && c->head.connect_websocket)
            return lua_path(L, "upgrade");
        src_of_request(&s, L, c);
    } else if (as_list) {
        luaL_checktype(L, 1, LUA_TTABLE);
        src_of_standin(&s, L, 1);
    } else {
        return lua_path(L, "stand-in");
    }
    struct head_opts h;
    read_opts(L, 4, &h);
    struct mh_hop hop = {0};
    connection_fields(L, &hop, &s);

    luaL_Buffer b;
    struct out o = {.L = L};
    struct walk w = {0};
    if (as_list) {
        lua_createtable(L, (int)s.n * 2 + 8, 0);
        o.list = lua_gettop(L);
        pass_fields(&o, &s, &hop, h.trust, h.xfwd, &w);
        if (w.bad.p)
            return invalid_field(L, w.bad);
        put_added(&o, &s, &hop, &h, &w);
        luaL_buffinit(L, &b);
        add_target(&b, &s, prefix, plen);
        luaL_pushresult(&b);
        if (w.cl.p)
            lua_pushlstring(L, w.cl.p, w.cl.len);
        else
            lua_pushnil(L);
        lua_pushboolean(L, w.te);
        lua_pushboolean(L, w.upgrade);
        return 5;
    }
    luaL_buffinit(L, &b);
    o.b = &b;
    luaL_addlstring(&b, s.method.p, s.method.len);
    luaL_addchar(&b, ' ');
    add_target(&b, &s, prefix, plen);
    luaL_addstring(&b, " HTTP/1.1\r\n");
    /* a group's server is picked per attempt: core.proxy_fetch writes its Host */
    bool host_later = !authority && !(h.preserve && s.host.len);
    if (!host_later) {
        luaL_addstring(&b, "Host: ");
        if (h.preserve && s.host.len)
            luaL_addlstring(&b, s.host.p, s.host.len);
        else
            luaL_addlstring(&b, authority, alen);
        luaL_addlstring(&b, "\r\n", 2);
    }
    pass_fields(&o, &s, &hop, h.trust, h.xfwd, &w);
    if (w.upgrade)
        return lua_path(L, "upgrade");
    if (w.bad.p)
        return invalid_field(L, w.bad);
    put_added(&o, &s, &hop, &h, &w);
    lua_Integer body = body_length(&w);
    add_framing(&b, &w, body, s.method.p);
    luaL_pushresult(&b);
    lua_pushlstring(L, s.method.p, s.method.len);
    if (body == -2)
        lua_pushnil(L);
    else if (body == -1)
        lua_pushboolean(L, 1);
    else
        lua_pushinteger(L, body);
    lua_pushboolean(L, host_later);
    return 4;
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

/*
 * The Connection fields of a response head (NUL-separated names and values)
 * into hop; past MH_HOP_MAX_CONNECTION, joined into one string on L's stack.
 */
static void head_connection_fields(lua_State *L, struct mh_hop *hop, const char *head,
                                   const char *end)
{
    bool many = false;
    for (const char *p = head; p < end;) {
        size_t l = strlen(p);
        const char *v = p + l + 1;
        if (mh_hop_is_connection(p, l) && !mh_hop_add_connection(hop, v, strlen(v)))
            many = true;
        p = v + strlen(v) + 1;
    }
    if (!many)
        return;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (const char *p = head; p < end;) {
        size_t l = strlen(p);
        const char *v = p + l + 1;
        if (mh_hop_is_connection(p, l)) {
            luaL_addstring(&b, v);
            luaL_addchar(&b, ',');
        }
        p = v + strlen(v) + 1;
    }
    luaL_pushresult(&b);
    size_t len;
    const char *all = lua_tolstring(L, -1, &len);
    hop->n = 0;
    mh_hop_add_connection(hop, all, len);
}

/* Whether the client can get trailers (not HTTP/1.0): from the request, or a stand-in's proto. */
static bool front_takes_trailers(lua_State *L, int idx, const struct mh_req *front)
{
    if (front)
        return !(front->head.http_major == 1 && front->head.http_minor == 0);
    lua_getfield(L, idx, "proto");
    const char *proto = lua_tostring(L, -1);
    bool ok = !(proto && !strcmp(proto, "HTTP/1.0"));
    lua_pop(L, 1);
    return ok;
}

/* A response field to res (c), or to the header list at stack index `list` (c NULL). */
static void down(lua_State *L, struct mh_req *c, int list, lua_Integer *n, const char *name,
                 size_t nl, const char *v, size_t vl, bool first)
{
    if (c) {
        const char *err = mh_response_header(&c->res, name, nl, v, vl, first);
        if (err)
            luaL_error(L, "header %s: %s", name, err);
        return;
    }
    lua_pushlstring(L, name, nl);
    lua_rawseti(L, list, ++*n);
    lua_pushlstring(L, v, vl);
    lua_rawseti(L, list, ++*n);
}

/*
 * core.proxy_response(res, resp, req, via [, as_list]): the upstream
 * response's fields going down, hop-by-hop ones and its Date and Server
 * dropped, in the upstream's order and spelling (a name that repeats in
 * another case goes under its first spelling); Trailer kept for a client
 * that can get trailers; "Via: <version> <via>" added when via is set.
 *
 * Without as_list: status and fields set on res; true, or nil, why when
 * proxy.lua must do it ("stand-in": a table in res's or req's place;
 * "status": one res:status refuses, which proxy.lua lets it raise).
 * With as_list (a response hook, a stand-in): the status and the fields as
 * a header list { name, value, ... }.
 */
static int l_proxy_response(lua_State *L)
{
    bool as_list = lua_toboolean(L, 5);
    lua_settop(L, 4);
    struct mh_req *c = as_list ? NULL : to_handle(L, 1, &mh_response_mt_key, "res");
    struct mh_req *front = to_handle(L, 3, &mh_request_mt_key, "req");
    if (!as_list && (!c || !front))
        return lua_path(L, "stand-in");
    const struct mh_client_req *q = mh_lua_client_exchange(L, 2);
    if (!q)
        return luaL_error(L, "http.proxy: the upstream response is closed");
    size_t vialen = 0;
    const char *via = via_text(L, 4, &vialen);
    /* a status res:status refuses: proxy.lua's path raises as it always did */
    if (!as_list && (q->status < 102 || q->status > 999))
        return lua_path(L, "status");
    size_t len = 0;
    const char *head = mh_client_head(q, &len), *end = head + len;
    struct mh_hop hop = {0};
    head_connection_fields(L, &hop, head, end);
    bool trailers_ok = front_takes_trailers(L, 3, front);
    int list = 0;
    lua_Integer n = 0;
    if (as_list) {
        lua_pushinteger(L, q->status);
        lua_newtable(L);
        list = lua_gettop(L);
    } else {
        if (c->res.written)
            return luaL_error(L, "res:status: the response has started (res:write was called); "
                                 "set the status and headers before writing");
        c->res.status = q->status;
    }
    const char *via_name = "Via";
    bool via_seen = false;
    for (const char *p = head; p < end;) {
        size_t l = strlen(p);
        const char *v = p + l + 1;
        size_t vl = strlen(v);
        if (keep_down(&hop, p, l, trailers_ok)) {
            const char *first = first_spelling(head, p, p, l, &hop, trailers_ok);
            down(L, c, list, &n, first ? first : p, l, v, vl, first == NULL);
            if (!via_seen && name_is(p, l, "via", 3)) {
                via_seen = true;
                via_name = first ? first : p;
            }
        }
        p = v + vl + 1;
    }
    if (via) {
        char value[32];
        int vn = snprintf(value, sizeof value, "%d.%d ", q->http_major, q->http_minor);
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        luaL_addlstring(&b, value, (size_t)vn);
        luaL_addlstring(&b, via, vialen);
        luaL_pushresult(&b);
        size_t bl;
        const char *bv = lua_tolstring(L, -1, &bl);
        down(L, c, list, &n, via_name, 3, bv, bl, !via_seen);
        lua_pop(L, 1);
    }
    if (as_list)
        return 2;
    lua_pushboolean(L, 1);
    return 1;
}

/*
 * core.hop_kept(list [, keep]) → a new header list { name, value, ... }
 * without the hop-by-hop fields and those the list's Connection fields name
 * (hop.c's rules, as both proxy paths apply them), except a field named
 * keep (any case): relay.lua's upgrade requests and answers.
 */
static int l_hop_kept(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    size_t klen = 0;
    const char *keep = luaL_optlstring(L, 2, NULL, &klen);
    lua_settop(L, 2);
    struct src s = {.L = L, .list = 1, .n = (uint32_t)(lua_rawlen(L, 1) / 2)};
    struct mh_hop hop = {0};
    connection_fields(L, &hop, &s);
    lua_createtable(L, (int)s.n * 2, 0);
    int out = lua_gettop(L);
    lua_Integer n = 0;
    struct slice name, value;
    for (uint32_t i = 0; i < s.n; i++) {
        src_field(&s, i, &name, &value);
        if (mh_hop_drops(&hop, name.p, name.len) && !(keep && name_is(name.p, name.len, keep, klen)))
            continue;
        lua_pushlstring(L, name.p, name.len);
        lua_rawseti(L, out, ++n);
        lua_pushlstring(L, value.p, value.len);
        lua_rawseti(L, out, ++n);
    }
    return 1;
}

void mh_lua_proxy_open(lua_State *L)
{
    lua_pushcfunction(L, l_hop_kept);
    lua_setfield(L, -2, "hop_kept");
    lua_pushcfunction(L, l_proxy_request);
    lua_setfield(L, -2, "proxy_request");
    lua_pushcfunction(L, l_proxy_response);
    lua_setfield(L, -2, "proxy_response");
    /* for proxy.lua and relay.lua: the one list of hop-by-hop names is hop.c's */
    lua_createtable(L, 0, (int)mh_hop_nstandard);
    for (size_t i = 0; i < mh_hop_nstandard; i++) {
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, mh_hop_standard[i].name);
    }
    lua_setfield(L, -2, "hop_names");
}
