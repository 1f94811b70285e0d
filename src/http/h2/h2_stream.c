/*
 * An HTTP/2 stream as a request: the second implementation of the request
 * ops (req.h). The head is built from the header block into the stream's
 * own buffer (slices index it as they index an HTTP/1 read buffer); the
 * body comes from DATA frames, given back to flow control as the handler
 * reads it; the response head is HPACK-encoded by nghttp2 from the model's
 * pairs, and the body leaves through a data provider that reads the
 * stream's queue, deferring while it is empty.
 */
#include "h2_impl.h"

#include "log.h"
#include "response.h"

#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct mh_req_ops h2_ops;

static const struct mh_http_limits *limits(const struct mh_h2_stream *s)
{
    return s->h2->c->h->limits;
}

/*
 * body_timeout on a stream is a no-progress timeout on its request body
 * (no END_STREAM yet), counted while the client may send: the clock starts
 * with the handler and again at every DATA frame that carried bytes and
 * every time the handler's reads give window back. A client whose window
 * is shut (stream or connection: the handler does not read, so flow
 * control holds it back) is not late: when the clock runs out then, it
 * starts again (mh_h2_stream_on_timer). A slow but steady upload is never
 * cut. All of a connection's stream clocks share its one timer
 * (mh_h2_update_deadline), so a stalled stream costs no watcher.
 */
static void body_clock(struct mh_h2_stream *s)
{
    s->clock.body = mh_conn_after(s->h2->c, limits(s)->body_timeout);
}

/* Whether flow control lets the client send DATA on s now. */
static bool client_may_send(const struct mh_h2_stream *s)
{
    nghttp2_session *session = s->h2->session;
    return nghttp2_session_get_stream_local_window_size(session, s->id) > 0 &&
           nghttp2_session_get_local_window_size(session) > 0;
}

struct mh_h2_stream *mh_h2_stream_new(struct mh_h2 *h, int32_t id)
{
    struct mh_h2_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    mh_req_reset(&s->req);
    s->req.ops = &h2_ops;
    s->h2 = h;
    s->id = id;
    s->req.max_body = (uint64_t)h->c->h->limits->max_body_bytes;
    s->next = h->streams;
    if (h->streams)
        h->streams->prev = s;
    h->streams = s;
    return s;
}

void mh_h2_stream_free(struct mh_h2_stream *s)
{
    mh_req_free(&s->req);
    mh_outq_free(&s->q);
    mh_buf_free(&s->head);
    mh_buf_free(&s->trailers);
    free(s);
}

/* ---- the head -------------------------------------------------------------- */

static int append(struct mh_h2_stream *s, const void *p, size_t n, struct mh_slice *out)
{
    out->off = (uint32_t)s->head.len;
    out->len = (uint32_t)n;
    return mh_buf_append(&s->head, p, n);
}

int mh_h2_stream_header(struct mh_h2_stream *s, const uint8_t *name, size_t nlen,
                        const uint8_t *value, size_t vlen)
{
    /* RFC 9113 §6.5.2: a field costs its name, its value and 32 bytes. */
    s->header_bytes += nlen + vlen + 32;
    if (s->header_bytes > (size_t)limits(s)->max_header_bytes) {
        s->bad_status = 431; /* decoding goes on (HPACK state), the fields are dropped */
        return 0;
    }
    struct mh_request *r = &s->req.head;
    struct mh_slice v;
    if (nlen > 0 && name[0] == ':') {
        /* nghttp2 checked the set, the order and duplicates (RFC 9113 §8.3) */
        struct mh_slice *dst = NULL;
        if (nlen == 7 && !memcmp(name, ":method", 7))
            dst = &s->method;
        else if (nlen == 5 && !memcmp(name, ":path", 5))
            dst = &r->target;
        else if (nlen == 10 && !memcmp(name, ":authority", 10))
            dst = &r->host;
        else if (nlen == 9 && !memcmp(name, ":protocol", 9))
            dst = &s->protocol; /* nghttp2 allows it on CONNECT only (RFC 8441 §4) */
        else
            return 0; /* :scheme */
        return append(s, value, vlen, dst) < 0 ? NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE : 0;
    }
    struct mh_slice n;
    if (append(s, name, nlen, &n) < 0 || append(s, value, vlen, &v) < 0 ||
        mh_request_add_header(r, n.off, n.len) < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    r->headers[r->nheaders - 1].value = v;
    if (nlen == 6 && !memcmp(name, "cookie", 6))
        s->ncookies++;
    else if (nlen == 14 && !memcmp(name, "content-length", 14)) {
        s->has_length = true;
        r->content_length = strtoull((const char *)value, NULL, 10); /* nghttp2 checked digits */
    }
    return 0;
}

/*
 * The method as HTTP/1 would have it: llhttp's number for a method it
 * knows, else MH_METHOD_OTHER with the name copied (nghttp2 checked it is
 * a token). -1: a name too long to keep (501, as on HTTP/1).
 */
static int set_method(struct mh_request *r, const char *m, size_t len)
{
#define MH_H2_METHOD(num, name, string)                                                            \
    if (len == sizeof #string - 1 && !memcmp(m, #string, len)) {                                   \
        r->method = (uint8_t)(num);                                                                \
        return 0;                                                                                  \
    }
    HTTP_METHOD_MAP(MH_H2_METHOD)
#undef MH_H2_METHOD
    if (len == 0 || len > MH_METHOD_NAME_MAX)
        return -1;
    r->method = MH_METHOD_OTHER;
    memcpy(r->method_name, m, len);
    r->method_name[len] = '\0';
    return 0;
}

/*
 * RFC 9113 §8.2.3: cookie fields may be split; joined with "; " into one
 * before the request reaches an HTTP/1-style consumer. The joined value is
 * copied from s->head to its end, so the room is reserved first: a
 * reallocation while copying would leave the source behind.
 */
static int join_cookies(struct mh_h2_stream *s)
{
    struct mh_request *r = &s->req.head;
    uint32_t first = UINT32_MAX, out = 0;
    size_t start = s->head.len, joined = 0;
    for (uint32_t i = 0; i < r->nheaders; i++) {
        struct mh_header *h = &r->headers[i];
        if (h->name.len == 6 && !memcmp(s->head.data + h->name.off, "cookie", 6))
            joined += h->value.len + 2;
    }
    if (mh_buf_reserve(&s->head, joined) < 0)
        return -1;
    for (uint32_t i = 0; i < r->nheaders; i++) {
        struct mh_header *h = &r->headers[i];
        bool cookie = h->name.len == 6 && !memcmp(s->head.data + h->name.off, "cookie", 6);
        if (cookie) {
            if (first != UINT32_MAX && mh_buf_append(&s->head, "; ", 2) < 0)
                return -1;
            if (mh_buf_append(&s->head, s->head.data + h->value.off, h->value.len) < 0)
                return -1;
            if (first != UINT32_MAX)
                continue; /* dropped: joined into the first */
            first = out;
        }
        r->headers[out++] = *h;
    }
    r->nheaders = out;
    r->headers[first].value.off = (uint32_t)start;
    r->headers[first].value.len = (uint32_t)(s->head.len - start);
    return 0;
}

void mh_h2_stream_head_done(struct mh_h2_stream *s, bool end_stream)
{
    struct mh_request *r = &s->req.head;
    s->head_done = true;
    s->ready = true;
    s->header_deadline = 0;
    r->http_major = 2;
    r->http_minor = 0;
    r->keep_alive = true;
    r->has_body = !end_stream;
    s->req.body_state = end_stream ? MH_BODY_NONE : MH_BODY_MORE;
    if (s->bad_status)
        return;
    if (set_method(r, s->head.data + s->method.off, s->method.len) < 0) {
        s->bad_status = 501;
        return;
    }
    /*
     * CONNECT (RFC 9113 §8.5) asks for a tunnel: this server does not make
     * them. The extended CONNECT of RFC 8441 opens a WebSocket: it stands
     * for RFC 6455's GET, so it is routed and served as one (a route
     * "GET /chat" with req:websocket serves both protocols).
     */
    if (r->method == HTTP_CONNECT) {
        if (!mh_strieq(s->head.data + s->protocol.off, s->protocol.len, "websocket", 9)) {
            s->bad_status = 501;
            return;
        }
        r->method = HTTP_GET;
        r->connect_websocket = true;
    }
    if (r->target.len == 0) {
        s->bad_status = 400;
        return;
    }
    if (s->ncookies > 1 && join_cookies(s) < 0) {
        s->bad_status = 500;
        return;
    }
    /* :authority takes Host's place; handlers that read the Host header still find it. */
    int host = mh_request_find_header(r, s->head.data, "host", 4, 0);
    if (r->host.len == 0 && host >= 0) {
        r->host = r->headers[host].value;
    } else if (r->host.len > 0 && host < 0) {
        struct mh_slice n, v = r->host;
        if (append(s, "host", 4, &n) < 0 || mh_request_add_header(r, n.off, n.len) < 0) {
            s->bad_status = 500;
            return;
        }
        r->headers[r->nheaders - 1].value = v;
    }
    if (!mh_authority_valid(s->head.data + r->host.off, r->host.len)) {
        s->bad_status = 400;
        return;
    }
    mh_request_split_target(r, s->head.data);
}

/* ---- the handler's side ---------------------------------------------------- */

/* The request is over for everyone above (mh_policy_end); its unread body goes. */
static void end_request(struct mh_h2_stream *s)
{
    mh_policy_end(&s->req, s->h2->c);
    s->clock = (struct mh_req_clock){0}; /* the stream's own deadlines (header, send) go on */
    s->in_handler = false;
    s->ended = true;
    /* body bytes nobody will read: give the window back */
    if (s->h2->session && !s->closed && s->unacked)
        nghttp2_session_consume(s->h2->session, s->id, s->unacked);
    s->unacked = 0;
}

/* Answers without a handler (a bad head). */
static void respond_bad(struct mh_h2_stream *s)
{
    char body[64];
    s->in_handler = true;
    mh_req_respond(&s->req, s->bad_status, mh_policy_status_body(s->bad_status, body, sizeof body));
}

void mh_h2_stream_start(struct mh_h2_stream *s)
{
    struct mh_conn *c = s->h2->c;
    if (s->closed) {
        s->ended = true;
        return;
    }
    mh_policy_start(&s->req, &s->clock, c);
    if (s->req.body_state == MH_BODY_MORE) {
        s->clock.read = mh_conn_after(c, limits(s)->read_timeout);
        body_clock(s);
    }
    if (s->bad_status) {
        respond_bad(s);
        return;
    }
    s->in_handler = true;
    mh_req_start(&s->req, c->root);
}

static void wake_body(struct mh_h2_stream *s)
{
    if (!s->body_wanted)
        return;
    struct mh_req *r = &s->req;
    if (r->body_state != MH_BODY_MORE || (!s->body_want_all && r->body.len > 0)) {
        s->body_wanted = false;
        s->wake_body = true;
    }
}

void mh_h2_stream_data(struct mh_h2_stream *s, const uint8_t *data, size_t len)
{
    struct mh_req *r = &s->req;
    nghttp2_session *session = s->h2->session;
    r->body_received += len;
    if (len > 0)
        body_clock(s);
    if (s->ended || r->closed || r->body_state != MH_BODY_MORE) {
        nghttp2_session_consume(session, s->id, len);
        return;
    }
    if (r->body_received > s->req.max_body) {
        r->body_state = MH_BODY_TOO_LARGE;
        nghttp2_session_consume(session, s->id, len + s->unacked);
        s->unacked = 0;
        r->body.len = 0;
        wake_body(s);
        return;
    }
    if (mh_buf_append(&r->body, data, len) < 0) {
        r->body_state = MH_BODY_CLOSED;
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
        nghttp2_session_consume(session, s->id, len);
        wake_body(s);
        return;
    }
    if (s->body_want_all) /* req:body(): bounded by max_body, not by the window */
        nghttp2_session_consume(session, s->id, len);
    else
        s->unacked += len;
    wake_body(s);
}

void mh_h2_stream_body_end(struct mh_h2_stream *s)
{
    struct mh_req *r = &s->req;
    if (r->body_state == MH_BODY_MORE) {
        r->body_state = MH_BODY_NONE;
        s->clock.read = s->clock.body = 0;
    }
    wake_body(s);
}

void mh_h2_stream_abort(struct mh_h2_stream *s)
{
    struct mh_req *r = &s->req;
    s->closed = true;
    s->ready = false;
    if (!s->in_handler) {
        s->ended = true;
        return;
    }
    if (r->closed)
        return;
    r->closed = true;
    if (r->body_state == MH_BODY_MORE)
        r->body_state = MH_BODY_CLOSED;
    mh_outq_clear(&s->q); /* releases referenced strings and files now */
    if (r->handler->ops->on_abort)
        r->handler->ops->on_abort(r);
}

void mh_h2_stream_closed(struct mh_h2_stream *s, uint32_t error_code)
{
    if (error_code != NGHTTP2_NO_ERROR)
        mh_log(MH_LOG_DEBUG, "fd %d: stream %d reset: %s", s->h2->c->fd, s->id,
               nghttp2_http2_strerror(error_code));
    /* A handler still answering loses its stream; one that is done (complete) is not told. */
    if (s->in_handler && !s->complete)
        mh_h2_stream_abort(s);
    s->closed = true;
    s->ready = false;
    if (!s->in_handler)
        s->ended = true;
    mh_outq_clear(&s->q);
}

/* ---- response -------------------------------------------------------------- */

/*
 * The trailer fields as a HEADERS frame with END_STREAM (RFC 9113 §8.1),
 * submitted from the data source at its EOF, as nghttp2 documents. Names are
 * lowercased in place (the stream's own copy); nghttp2 copies the fields.
 */
static int submit_trailers(nghttp2_session *session, struct mh_h2_stream *s)
{
    nghttp2_nv stack[16] = {{0}}; /* zeroed: GCC -O2 cannot see n counts written entries */
    size_t cap = 0;
    for (size_t i = 0; i < s->trailers.len; i++)
        cap += s->trailers.data[i] == '\n';
    nghttp2_nv *nv = cap <= 16 ? stack : malloc(cap * sizeof *nv);
    if (!nv)
        return -1;
    size_t n = 0;
    char *p = s->trailers.data, *end = p + s->trailers.len;
    while (p < end && n < cap) {
        char *colon = memchr(p, ':', (size_t)(end - p));
        char *eol = colon ? memchr(colon, '\r', (size_t)(end - colon)) : NULL;
        if (!eol)
            break;
        for (char *c = p; c < colon; c++)
            *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
        nv[n++] = (nghttp2_nv){(uint8_t *)p, (uint8_t *)colon + 2, (size_t)(colon - p),
                               (size_t)(eol - colon - 2), NGHTTP2_NV_FLAG_NONE};
        p = eol + 2;
    }
    int rv = nghttp2_submit_trailer(session, s->id, nv, n);
    if (nv != stack)
        free(nv);
    return rv == 0 ? 0 : -1;
}

static ssize_t read_body(nghttp2_session *session, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *source, void *ud)
{
    (void)session;
    (void)id;
    (void)ud;
    struct mh_h2_stream *s = source->ptr;
    ssize_t n = mh_outq_read_front(&s->q, buf, length);
    if (n < 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* a file read failed: RST this stream */
    if (n > 0)
        s->send_deadline = mh_conn_after(s->h2->c, limits(s)->send_timeout);
    if (s->high && s->q.bytes + s->req.res.body.bytes <= MH_REQ_LOW_WATER) {
        s->high = false;
        s->wake_writable = true;
    }
    if (mh_outq_empty(&s->q)) {
        if (s->cut && n == 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* nghttp2 sends RST_STREAM */
        if (s->complete) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            s->send_deadline = 0;
            if (s->trailers.len && submit_trailers(session, s) == 0)
                *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM; /* the trailers' HEADERS ends it */
            return n;
        }
        if (n == 0) {
            /* waiting for the handler, not for the client: send_timeout is not running */
            s->send_deadline = 0;
            s->deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
    }
    return n;
}

static bool skipped_header(const char *name, size_t len)
{
    /* connection-specific fields have no place in HTTP/2 (RFC 9113 §8.2.2) */
    return (len == 10 && mh_strieq(name, len, "connection", 10)) ||
           (len == 10 && mh_strieq(name, len, "keep-alive", 10)) ||
           (len == 16 && mh_strieq(name, len, "proxy-connection", 16)) ||
           (len == 7 && mh_strieq(name, len, "upgrade", 7));
}

#define NV(n, v, vl)                                                                               \
    ((nghttp2_nv){(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, (vl), NGHTTP2_NV_FLAG_NONE})

/*
 * Submits the head: :status, the server's fields (mh_response_fields: the
 * same choice as HTTP/1's; a HEAD answer keeps the Content-Length its body
 * would have had) and the model's pairs (names lowercased). staged: the
 * body bytes the handler produced so far (dropped already for HEAD).
 */
static int submit_head(struct mh_h2_stream *s, bool complete, uint64_t staged)
{
    struct mh_response *res = &s->req.res;
    struct mh_h2 *h = s->h2;
    size_t cap = res->npairs + 6;
    nghttp2_nv stack[32];
    nghttp2_nv *nv = cap <= 32 ? stack : malloc(cap * sizeof *nv);
    if (!nv)
        return -1;
    size_t n = 0;
    char status[8], length[24];
    snprintf(status, sizeof status, "%03d", res->status % 1000);
    nv[n++] = NV(":status", status, 3);
    /* lowercased names, in one scratch buffer sized first so pointers into it stay valid */
    size_t need = 0;
    uint32_t i = 0;
    const char *name, *value;
    size_t nlen, vlen;
    while (mh_response_pair(res, &i, &name, &nlen, &value, &vlen))
        need += nlen;
    h->scratch.len = 0;
    if (mh_buf_reserve(&h->scratch, need + 1) < 0) {
        if (nv != stack)
            free(nv);
        return -1;
    }
    if (mh_response_adds_server(res))
        nv[n++] = NV("server", MH_SERVER_NAME, sizeof MH_SERVER_NAME - 1);
    size_t dlen;
    const char *date = mh_http_date(h->c->h, &dlen); /* "Date: ...\r\n" */
    nv[n++] =
        (nghttp2_nv){(uint8_t *)"date", (uint8_t *)date + 6, 4, dlen - 8, NGHTTP2_NV_FLAG_NONE};
    /* not on a switched stream's 200 (RFC 8441): raw bytes follow */
    if (mh_response_adds_type(res, staged, complete, s->switched))
        nv[n++] = NV("content-type", MH_DEFAULT_TYPE, sizeof MH_DEFAULT_TYPE - 1);
    i = 0;
    while (mh_response_pair(res, &i, &name, &nlen, &value, &vlen)) {
        if (skipped_header(name, nlen))
            continue;
        char *lower = h->scratch.data + h->scratch.len;
        for (size_t k = 0; k < nlen; k++)
            lower[k] = (char)(name[k] >= 'A' && name[k] <= 'Z' ? name[k] + 32 : name[k]);
        h->scratch.len += nlen;
        nv[n++] =
            (nghttp2_nv){(uint8_t *)lower, (uint8_t *)value, nlen, vlen, NGHTTP2_NV_FLAG_NONE};
    }
    if (mh_response_adds_length(res, complete, false)) {
        uint64_t len = mh_response_length(res, staged);
        int l = snprintf(length, sizeof length, "%llu", (unsigned long long)len);
        nv[n++] = NV("content-length", length, (size_t)l);
    }
    nghttp2_data_provider prd = {.source.ptr = s, .read_callback = read_body};
    bool no_data = complete && mh_outq_empty(&s->q) && !s->trailers.len;
    int rv = nghttp2_submit_response(h->session, s->id, nv, n, no_data ? NULL : &prd);
    if (nv != stack)
        free(nv);
    return rv == 0 ? 0 : -1;
}

static void h2_send(struct mh_req *r, bool complete)
{
    struct mh_h2_stream *s = mh_h2_stream_of(r);
    struct mh_response *res = &r->res;
    if (r->closed || s->closed || !s->h2->session) {
        if (complete) {
            mh_policy_drop_response(r);
            end_request(s);
        }
        return;
    }
    if (complete)
        mh_policy_answer(r);
    if (mh_req_run_filters(r, complete) < 0)
        goto reset;
    uint64_t staged = res->body.bytes;
    if (r->head.method == HTTP_HEAD || mh_status_bodyless(res->status))
        mh_outq_clear(&res->body); /* no DATA: END_STREAM rides on the head or an empty frame */
    res->body_sent += res->body.bytes;
    if (mh_outq_move(&s->q, &res->body) < 0)
        goto reset;
    if (s->q.bytes + res->body.bytes > MH_REQ_HIGH_WATER)
        s->high = true;
    if (complete) {
        s->complete = true;
        /* the HTTP/2 stream always has room for trailers (HEAD and bodyless answers too) */
        if (res->trailers.len &&
            mh_buf_append(&s->trailers, res->trailers.data, res->trailers.len) < 0)
            goto reset;
    }
    if (!res->head_sent) {
        res->head_sent = true;
        if (submit_head(s, complete, staged) < 0)
            goto reset;
    } else if (s->deferred) {
        s->deferred = false;
        nghttp2_session_resume_data(s->h2->session, s->id);
    }
    /* output waits for the client (its windows) from now: send_timeout runs until progress */
    if (!mh_outq_empty(&s->q) && !s->send_deadline)
        s->send_deadline = mh_conn_after(s->h2->c, limits(s)->send_timeout);
    if (complete)
        end_request(s);
    mh_h2_want_write(s->h2);
    return;
reset:
    nghttp2_submit_rst_stream(s->h2->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    mh_outq_clear(&s->q);
    if (complete)
        end_request(s);
    mh_h2_want_write(s->h2);
}

/*
 * The response is cut off (a handler error after the head): what was
 * flushed still goes out, then RST_STREAM INTERNAL_ERROR (the data provider
 * fails once the queue is empty), so the client sees the head and knows the
 * body is torn. Other streams of the connection go on.
 */
static void h2_abort(struct mh_req *r)
{
    struct mh_h2_stream *s = mh_h2_stream_of(r);
    r->closed = true;
    if (!s->h2->session || s->closed)
        return;
    if (r->res.head_sent && !s->complete) {
        s->cut = true;
        if (s->deferred) {
            s->deferred = false;
            nghttp2_session_resume_data(s->h2->session, s->id);
        }
    } else {
        mh_outq_clear(&s->q);
        nghttp2_submit_rst_stream(s->h2->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_INTERNAL_ERROR);
    }
    mh_h2_want_write(s->h2);
}

/* ---- request body ---------------------------------------------------------- */

static int h2_want_body(struct mh_req *r, bool all)
{
    struct mh_h2_stream *s = mh_h2_stream_of(r);
    if (r->closed)
        return 1;
    /* what the handler took since the last call goes back to the client's window */
    if (s->unacked > r->body.len && s->h2->session) {
        nghttp2_session_consume(s->h2->session, s->id, s->unacked - r->body.len);
        s->unacked = r->body.len;
        body_clock(s); /* the window may have opened: the client's clock starts again */
        mh_h2_want_write(s->h2);
    }
    mh_policy_first_ask(r, s->has_length);
    if (all && !s->body_want_all && s->unacked && s->h2->session) {
        nghttp2_session_consume(s->h2->session, s->id, s->unacked);
        s->unacked = 0;
        body_clock(s);
        mh_h2_want_write(s->h2);
    }
    s->body_want_all = all;
    /* a switched stream (RFC 8441) is satisfied only by bytes that come after the call */
    if (r->body_state != MH_BODY_MORE || (!all && r->body.len > 0 && !s->switched))
        return 1;
    s->body_wanted = true;
    return 0;
}

/*
 * RFC 8441: the stream becomes the WebSocket's. Its DATA already reaches
 * r->body and its output already goes out as DATA under flow control; what
 * changes is that the body has no limit and no read or write deadline (the
 * WebSocket layer bounds messages and watches for silence; send_timeout
 * still cuts a client that stopped reading).
 */
static int h2_upgrade(struct mh_req *r)
{
    struct mh_h2_stream *s = mh_h2_stream_of(r);
    if (!r->head.connect_websocket || r->closed || r->res.head_sent || s->closed ||
        !s->h2->session || r->body_state != MH_BODY_MORE)
        return -1;
    r->max_body = UINT64_MAX;
    r->body_asked = true;
    s->switched = true;
    s->clock.read = s->clock.write = s->clock.body = 0;
    mh_h2_update_deadline(s->h2);
    return 0;
}

/* ---- the rest of the ops --------------------------------------------------- */

static const char *h2_head(const struct mh_req *r)
{
    return mh_h2_stream_of(r)->head.data;
}

static uint64_t h2_pending(const struct mh_req *r)
{
    return mh_h2_stream_of(r)->q.bytes;
}

static void h2_set_read_timeout(struct mh_req *r, double seconds)
{
    struct mh_h2_stream *s = mh_h2_stream_of(r);
    s->clock.read = mh_conn_after(s->h2->c, seconds);
    mh_h2_update_deadline(s->h2);
}

static void h2_set_write_timeout(struct mh_req *r, double seconds)
{
    struct mh_h2_stream *s = mh_h2_stream_of(r);
    s->clock.write = mh_conn_after(s->h2->c, seconds);
    mh_h2_update_deadline(s->h2);
}

static const char *h2_remote_addr(const struct mh_req *r, char *buf, size_t len)
{
    return mh_conn_peer_addr(mh_h2_stream_of(r)->h2->c, buf, len);
}

static const struct mh_transport *h2_transport(const struct mh_req *r)
{
    return mh_conn_transport(mh_h2_stream_of(r)->h2->c);
}

ev_tstamp mh_h2_stream_deadline(const struct mh_h2_stream *s)
{
    if (s->closed)
        return 0;
    ev_tstamp at = mh_conn_earliest(s->header_deadline, s->send_deadline);
    return mh_conn_earliest(at, mh_policy_due(&s->req, &s->clock, true));
}

/*
 * No DATA for body_timeout while the client could send (body_clock). A
 * handler waiting for the body with nothing sent yet hears "timeout" and
 * its answer becomes 408 (h2_send), after which on_frame_send resets the
 * stream the client left open. Otherwise (the response is under way, or
 * the handler is busy elsewhere) the stream is reset now: the handler
 * hears on_abort, its body reads "timeout". Either way the stream closes
 * and is freed once its handler is done; the connection's other streams
 * go on.
 */
static void body_stalled(struct mh_h2_stream *s)
{
    if (mh_policy_body_stalled(&s->req, &s->clock, s->h2->c, s->id, s->body_wanted))
        wake_body(s);
    else
        nghttp2_submit_rst_stream(s->h2->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
}

void mh_h2_stream_on_timer(struct mh_h2_stream *s, ev_tstamp now)
{
    switch (mh_policy_late(&s->req, &s->clock, true, now)) {
    case MH_LATE_BODY_STALLED:
        if (client_may_send(s)) {
            body_stalled(s);
            return;
        }
        body_clock(s); /* flow control holds the client back: not late */
        ev_tstamp d = mh_h2_stream_deadline(s);
        if (!d || now < d)
            return;
        break; /* the head's or the output's deadline passed too */
    case MH_LATE_BODY:
        /* the body is late: the handler hears "timeout" and may still answer */
        mh_policy_body_late(&s->req, &s->clock);
        wake_body(s);
        return;
    case MH_LATE_RESPONSE:
    case MH_LATE_NONE: /* the head's deadline or the output's (send_timeout) */
        break;
    }
    mh_log(MH_LOG_DEBUG, "fd %d: stream %d: %s timed out", s->h2->c->fd, s->id,
           s->head_done ? "response" : "request head");
    s->header_deadline = s->send_deadline = 0;
    s->clock.write = s->clock.read = 0;
    nghttp2_submit_rst_stream(s->h2->session, NGHTTP2_FLAG_NONE, s->id, NGHTTP2_CANCEL);
}

static const struct mh_req_ops h2_ops = {
    .proto = "HTTP/2.0",
    .head = h2_head,
    .send = h2_send,
    .want_body = h2_want_body,
    .pending = h2_pending,
    .set_read_timeout = h2_set_read_timeout,
    .set_write_timeout = h2_set_write_timeout,
    .abort = h2_abort,
    .remote_addr = h2_remote_addr,
    .transport = h2_transport,
    .upgrade = h2_upgrade,
};
