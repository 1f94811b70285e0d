#include "dispatch.h"

#include "req.h"

#include <llhttp.h>
#include <stdio.h>
#include <string.h>

const char mh_dispatch_not_found_text[] = "404 page not found\n";
const char mh_dispatch_not_allowed_text[] = "Method Not Allowed\n";

static void redirect(struct mh_req *r, const struct mh_site *site, const struct mh_route_match *m)
{
    /* Location is the cleaned path plus the query as sent (redirects are rare: a heap copy). */
    size_t qlen;
    const char *q = mh_req_slice(r, r->head.query, &qlen);
    struct mh_buf loc = {0};
    if (mh_buf_append(&loc, m->location, m->location_len) < 0 ||
        (qlen && (mh_buf_append(&loc, "?", 1) < 0 || mh_buf_append(&loc, q, qlen) < 0))) {
        mh_buf_free(&loc);
        mh_req_respond(r, 500, "500 Internal Server Error\n");
        return;
    }
    r->res.status = site->redirect_code;
    mh_response_header(&r->res, "Location", 8, loc.data, loc.len, true);
    mh_buf_free(&loc);
    mh_req_finish(r);
}

/* The built-in 404 and 405 answers: status and headers are set, a short text body. */
static void finish_text(struct mh_req *r, const char *text)
{
    mh_req_write(r, text, strlen(text));
    mh_req_finish(r);
}

static void start(struct mh_req *r, const struct mh_site *site, const struct mh_handler *h)
{
    if (site->prepare)
        site->prepare(site->prepare_ud, r);
    mh_req_start(r, h);
}

void mh_dispatch(struct mh_req *r, const struct mh_site *site)
{
    struct mh_request *q = &r->head;
    const char *base = mh_req_head(r);
    size_t mlen;
    const char *method = mh_req_method_len(r, &mlen);
    /* "OPTIONS * HTTP/1.1" asks about the server, not a resource: 200, as Go answers it. */
    if (q->method == HTTP_OPTIONS && q->path.len == 1 && base[q->path.off] == '*') {
        mh_req_respond(r, 200, NULL);
        return;
    }
    struct mh_req_route *rt = &r->routed;
    struct mh_route_match m;
    if (rt->cleaned.cap - rt->cleaned.len < q->path.len + 2 &&
        mh_buf_reserve(&rt->cleaned, q->path.len + 2) < 0) {
        mh_req_respond(r, 500, "500 Internal Server Error\n");
        return;
    }
    enum mh_route_status st = mh_router_lookup(site->router, method, mlen, base + q->host.off,
                                               q->host.len, base + q->path.off, q->path.len,
                                               site->clean, rt->cleaned.data, rt->cleaned.cap, &m);
    switch (st) {
    case MH_ROUTE_FOUND: {
        rt->route = m.route;
        rt->handler_id = m.handler_id;
        rt->path = m.path;
        rt->path_len = (uint32_t)m.path_len;
        rt->ncaptures = m.ncaptures;
        if (m.ncaptures) /* most routes have none: no call for an empty copy */
            memcpy(rt->captures, m.captures, m.ncaptures * sizeof m.captures[0]);
        const struct mh_handler *h = mh_handler_table_get(site->handlers, m.handler_id);
        if (!h) {
            mh_req_respond(r, 500, "500 Internal Server Error\n");
            return;
        }
        start(r, site, h);
        return;
    }
    case MH_ROUTE_REDIRECT:
        redirect(r, site, &m);
        return;
    case MH_ROUTE_METHOD_NOT_ALLOWED:
        memcpy(rt->_allow, m.allow, m.allow_len);
        rt->allow = rt->_allow;
        rt->allow_len = m.allow_len;
        r->res.status = 405;
        mh_response_header(&r->res, "Allow", 5, rt->allow, rt->allow_len, true);
        if (site->method_not_allowed)
            start(r, site, site->method_not_allowed);
        else
            finish_text(r, mh_dispatch_not_allowed_text);
        return;
    case MH_ROUTE_NOT_FOUND:
        r->res.status = 404;
        if (site->not_found)
            start(r, site, site->not_found);
        else
            finish_text(r, mh_dispatch_not_found_text);
        return;
    }
}
