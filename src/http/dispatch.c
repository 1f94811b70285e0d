#include "dispatch.h"

#include "conn.h"
#include "lua_sched.h"
#include "lua_vm.h"

#include <lauxlib.h>
#include "router.h"
#include "worker.h"

#include <stdio.h>
#include <string.h>

static void redirect(struct mh_conn *c, const struct mh_route_match *m)
{
    const char *base = mh_conn_head(c);
    struct mh_buf *h = &c->res.headers;
    mh_buf_append(h, "Location: ", 10);
    mh_buf_append(h, m->location, m->location_len);
    if (c->req.query.len) {
        mh_buf_append(h, "?", 1);
        mh_buf_append(h, base + c->req.query.off, c->req.query.len);
    }
    mh_buf_append(h, "\r\n", 2);
    mh_conn_respond_simple(c, (int)c->worker->config->redirect_code, NULL, NULL);
}

void mh_dispatch_dev_headers(struct mh_conn *c)
{
    const struct mh_reload_stats *st = c->worker->reload_stats;
    if (!c->worker->config->dev || !st || !st->last_failed)
        return;
    /* The first line of the load error, made a valid header value. */
    char v[sizeof st->last_error];
    size_t n = 0;
    for (const char *p = st->last_error; *p && n < 400; p++)
        v[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? ' ' : *p;
    mh_response_header(&c->res, "X-Moonhttp-Reload-Error", 23, v, n, true);
}

void mh_dispatch(struct mh_conn *c)
{
    mh_dispatch_dev_headers(c);
    struct mh_gen *g = c->gen;
    struct mh_request *r = &c->req;
    const char *base = mh_conn_head(c);
    const char *method = llhttp_method_name((llhttp_method_t)r->method);
    enum mh_clean_mode clean = strcmp(c->worker->config->clean_path, "rewrite") == 0
                                   ? MH_CLEAN_REWRITE
                                   : MH_CLEAN_REDIRECT;
    struct mh_route_match m;
    if (mh_buf_reserve(&r->cleaned, r->path.len + 2) < 0) {
        mh_conn_respond_simple(c, 500, NULL, "500 Internal Server Error\n");
        return;
    }
    enum mh_route_status st = mh_router_lookup(
        g->router, method, strlen(method), base + r->host.off, r->host.len, base + r->path.off,
        r->path.len, clean, r->cleaned.data, r->cleaned.cap, &m);
    switch (st) {
    case MH_ROUTE_FOUND:
        r->route = m.route;
        r->handler_id = m.handler_id;
        r->route_path = m.path;
        r->route_path_len = (uint32_t)m.path_len;
        r->ncaptures = m.ncaptures;
        memcpy(r->captures, m.captures, m.ncaptures * sizeof m.captures[0]);
        mh_task_start_handler(g, c, m.handler_id, NULL, 0);
        return;
    case MH_ROUTE_REDIRECT:
        redirect(c, &m);
        return;
    case MH_ROUTE_METHOD_NOT_ALLOWED: {
        char allow[256];
        snprintf(allow, sizeof allow, "Allow: %.*s\r\n", (int)m.allow_len, m.allow);
        mh_buf_append_str(&c->res.headers, allow);
        c->res.status = 405;
        if (g->method_not_allowed_ref != LUA_NOREF)
            mh_task_start_handler(g, c, g->method_not_allowed_ref, m.allow, m.allow_len);
        else
            mh_conn_respond_simple(c, 405, NULL, "Method Not Allowed\n");
        return;
    }
    case MH_ROUTE_NOT_FOUND:
        c->res.status = 404;
        if (g->not_found_ref != LUA_NOREF)
            mh_task_start_handler(g, c, g->not_found_ref, NULL, 0);
        else
            mh_conn_respond_simple(c, 404, NULL, "404 page not found\n");
        return;
    }
}
