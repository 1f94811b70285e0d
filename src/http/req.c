#include "req.h"

#include "codec.h"

#include <llhttp.h>
#include <string.h>
#include <sys/random.h>

const char mh_req_err_head_sent[] = "the response has started";
const char mh_req_err_closed[] = "connection closed";
const char mh_req_err_nomem[] = "out of memory";

const char *mh_req_header(const struct mh_req *r, const char *name, size_t nlen, size_t *vlen)
{
    const char *base = mh_req_head(r);
    int i = mh_request_find_header(&r->head, base, name, nlen, 0);
    if (i < 0)
        return NULL;
    *vlen = r->head.headers[i].value.len;
    return base + r->head.headers[i].value.off;
}

/* llhttp's method names by number, with their lengths: no call and no strlen per request. */
static const struct {
    const char *name;
    uint8_t len;
} method_names[] = {
#define METHOD_ROW(num, name, string) [num] = {#string, sizeof #string - 1},
    HTTP_ALL_METHOD_MAP(METHOD_ROW)
#undef METHOD_ROW
};

const char *mh_req_method_len(const struct mh_req *r, size_t *len)
{
    uint8_t m = r->head.method;
    if (m < sizeof method_names / sizeof method_names[0] && method_names[m].name) {
        *len = method_names[m].len;
        return method_names[m].name;
    }
    /* MH_METHOD_OTHER: the client's own token */
    *len = strlen(r->head.method_name);
    return r->head.method_name;
}

const char *mh_req_method(const struct mh_req *r)
{
    size_t len;
    return mh_req_method_len(r, &len);
}

void mh_req_reset(struct mh_req *r)
{
    mh_request_reset(&r->head);
    r->routed.route = NULL;
    r->routed.handler_id = -1;
    r->routed.path = NULL;
    r->routed.path_len = 0;
    r->routed.ncaptures = 0;
    r->routed.allow = NULL;
    r->routed.allow_len = 0;
    r->routed.cleaned.len = 0;
    mh_response_reset(&r->res);
    r->body_state = MH_BODY_NONE;
    r->body.len = 0;
    r->body_received = 0;
    r->body_asked = false;
    r->closed = r->peer_closed = false;
    r->handler = NULL;
    r->handler_data = NULL;
    r->on_end = NULL;
    r->owner = NULL;
    r->_filters = NULL;
    r->_filters_headed = false;
    r->_id_len = 0;
}

static bool id_char(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("._:/+=@-", ch));
}

const char *mh_req_id(const struct mh_req *cr, const char *trusted, size_t *len)
{
    struct mh_req *r = (struct mh_req *)cr; /* only the cache below changes */
    if (r->_id_len == 0 && trusted) {
        size_t vlen;
        const char *v = mh_req_header(r, trusted, strlen(trusted), &vlen);
        bool ok = v && vlen > 0 && vlen <= MH_REQ_ID_MAX;
        for (size_t i = 0; ok && i < vlen; i++)
            ok = id_char((unsigned char)v[i]);
        if (ok) {
            memcpy(r->_id, v, vlen);
            r->_id_len = (uint8_t)vlen;
        }
    }
    if (r->_id_len == 0) {
        /* getrandom of 16 bytes does not fail once the pool is up; if it did, an id
         * unique enough for logs still comes from the request's address and start time. */
        unsigned char raw[16] = {0};
        if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw) {
            uintptr_t p = (uintptr_t)r;
            memcpy(raw, &p, sizeof p);
            memcpy(raw + 8, &r->started, sizeof r->started);
        }
        mh_hex_encode(raw, sizeof raw, r->_id);
        r->_id_len = 2 * sizeof raw;
    }
    r->_id[r->_id_len] = 0;
    *len = r->_id_len;
    return r->_id;
}

void mh_req_free(struct mh_req *r)
{
    mh_request_free(&r->head);
    mh_buf_free(&r->routed.cleaned);
    mh_response_free(&r->res);
    mh_outq_free(&r->_filtered);
    mh_buf_free(&r->body);
}

bool mh_req_set_status(struct mh_req *r, int status)
{
    if (r->res.head_sent)
        return false;
    r->res.status = status;
    return true;
}

const char *mh_req_set_header(struct mh_req *r, const char *name, size_t nlen, const char *value,
                              size_t vlen, bool replace)
{
    if (r->res.head_sent)
        return mh_req_err_head_sent;
    return mh_response_header(&r->res, name, nlen, value, vlen, replace);
}

void mh_req_set_length(struct mh_req *r, uint64_t len)
{
    r->res.has_length = true;
    r->res.declared_length = len;
}

const char *mh_req_write_ref(struct mh_req *r, const char *p, size_t n, mh_chunk_release_fn release,
                             void *ud, uintptr_t token)
{
    if (r->closed) {
        if (release)
            release(ud, token);
        return mh_req_err_closed;
    }
    r->res.written = true;
    return mh_outq_append_ref(&r->res.body, p, n, release, ud, token) < 0 ? mh_req_err_nomem : NULL;
}

const char *mh_req_write_file(struct mh_req *r, int fd, off_t off, uint64_t len,
                              mh_chunk_release_fn release, void *ud, uintptr_t token)
{
    if (r->closed) {
        if (release)
            release(ud, token);
        return mh_req_err_closed;
    }
    r->res.written = true;
    return mh_outq_append_file(&r->res.body, fd, off, len, release, ud, token) < 0
               ? mh_req_err_nomem
               : NULL;
}

void mh_req_flush(struct mh_req *r)
{
    if (r->closed || (r->res.head_sent && mh_outq_empty(&r->res.body)))
        return;
    r->res.written = true;
    r->ops->send(r, false);
}

void mh_req_finish(struct mh_req *r)
{
    r->ops->send(r, true);
}

void mh_req_respond(struct mh_req *r, int status, const char *body)
{
    if (!r->res.head_sent) {
        mh_response_reset(&r->res);
        r->res.status = status;
        if (body)
            mh_outq_append(&r->res.body, body, strlen(body));
    }
    mh_req_finish(r);
}

void mh_req_abort(struct mh_req *r)
{
    if (!r->closed)
        r->ops->abort(r);
}

const char *mh_req_body_error(const struct mh_req *r)
{
    /* the cause, not its consequence: a stalled body closes its stream */
    if (r->body_state == MH_BODY_STALLED)
        return "timeout";
    if (r->closed)
        return "connection closed";
    switch (r->body_state) {
    case MH_BODY_NONE:
    case MH_BODY_MORE:
        return NULL;
    case MH_BODY_TOO_LARGE:
        return "body too large";
    case MH_BODY_TIMEOUT:
    case MH_BODY_STALLED:
        return "timeout";
    case MH_BODY_CLOSED:
        return "connection closed";
    case MH_BODY_BAD:
        break;
    }
    return r->peer_closed ? "connection closed" : "malformed body";
}

/* ---- output filters ------------------------------------------------------ */

void mh_req_add_filter(struct mh_req *r, struct mh_ofilter *f)
{
    struct mh_ofilter **p = &r->_filters;
    while (*p)
        p = &(*p)->_next;
    f->_next = NULL;
    *p = f;
}

static void filters_done(struct mh_req *r)
{
    while (r->_filters) {
        struct mh_ofilter *f = r->_filters;
        r->_filters = f->_next;
        f->ops->done(f, r);
    }
}

int mh_req_upgrade(struct mh_req *r)
{
    if (!r->ops->upgrade || r->closed || r->ops->upgrade(r) < 0)
        return -1;
    filters_done(r);
    return 0;
}

/*
 * Each filter reads the body queue and writes into the scratch queue, which
 * then becomes the body queue for the next filter: two queues swapped, so a
 * chain costs no allocation per piece.
 */
int mh_req_filter_body(struct mh_req *r, bool complete)
{
    bool bodyless = r->head.method == HTTP_HEAD || mh_status_bodyless(r->res.status);
    if (!r->_filters_headed) {
        r->_filters_headed = true;
        struct mh_ofilter **p = &r->_filters;
        while (*p) {
            struct mh_ofilter *f = *p;
            if (bodyless || !f->ops->on_head(f, r)) {
                *p = f->_next;
                f->ops->done(f, r);
            } else {
                p = &f->_next;
            }
        }
    }
    int rc = 0;
    for (struct mh_ofilter *f = r->_filters; f && rc == 0; f = f->_next) {
        rc = f->ops->on_data(f, r, &r->res.body, &r->_filtered, complete);
        mh_outq_clear(&r->res.body); /* anything left unread is dropped (released) */
        struct mh_outq t = r->res.body;
        r->res.body = r->_filtered;
        r->_filtered = t;
    }
    if (complete || rc < 0) {
        filters_done(r);
        mh_outq_clear(&r->_filtered);
    }
    return rc;
}
