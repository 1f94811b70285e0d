#include "h2_conn.h"

#include "h2_impl.h"
#include "log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Frames are serialized while the wire queue holds less than this: bounded memory per connection.
 */
#define OUT_HIGH (64 * 1024)
/* Reads per readable event, so one busy connection does not starve the others. */
#define READS_PER_EVENT 4
#define READ_CHUNK      16384

static struct mh_h2_stream *stream_get(nghttp2_session *session, int32_t id)
{
    return nghttp2_session_get_stream_user_data(session, id);
}

/*
 * A frame that does no work for the server costs a token (h2_policy.h). A
 * client past the budget (a PING or SETTINGS flood, Rapid Reset:
 * CVE-2023-44487, streams opened past the limit in a loop) gets GOAWAY
 * ENHANCE_YOUR_CALM.
 */
static int flood_cost(struct mh_h2 *h)
{
    uint32_t budget = h->c->h->limits->h2_flood_budget;
    if (mh_h2_flood_take(&h->flood, budget, ev_now(h->c->h->loop)))
        return 0;
    if (!h->failed) {
        mh_log(MH_LOG_WARN, "fd %d: HTTP/2 flood (frames that do no work past %u): GOAWAY",
               h->c->fd, budget);
        h->failed = true;
        nghttp2_session_terminate_session(h->session, NGHTTP2_ENHANCE_YOUR_CALM);
    }
    return 0;
}

/* ---- nghttp2 callbacks ----------------------------------------------------- */

/*
 * HEADERS or DATA on a closed stream (RFC 9113 §5.1 "closed", §6.1). The
 * session keeps no closed streams (options()), and needs none to tell:
 * client stream IDs only grow (§5.1.1), so an odd ID at or below the
 * highest one opened that nghttp2 no longer holds is closed. A stream it
 * still holds half-closed is nghttp2's to judge (STREAM_CLOSED too). A
 * higher ID is idle: DATA there is nghttp2's connection error
 * PROTOCOL_ERROR. nghttp2 alone would ignore both frames: it still decodes
 * the HEADERS block, so HPACK stays in step, and still counts the DATA
 * against the connection window (§6.9), so both go on to it.
 *
 * A frame after the client's own END_STREAM on that stream (h->ended) is a
 * connection error STREAM_CLOSED: nothing of the client's can have been in
 * flight. Any other closed stream was reset, or closed too long ago to
 * know: a stream error STREAM_CLOSED, since the client's frames may have
 * been on their way when the server reset it (a response that ended a
 * stream whose body was still coming); so one RST_STREAM answers a run of
 * frames on the same stream (a cut-short upload's DATA in flight), while
 * each frame costs a flood token. WINDOW_UPDATE and RST_STREAM on a closed
 * stream stay ignored: §5.1 allows them, after END_STREAM or RST_STREAM
 * went out.
 */
static void closed_stream(struct mh_h2 *h, int32_t id, const char *frame)
{
    if (nghttp2_session_find_stream(h->session, id) != NULL)
        return;
    if (mh_h2_ended_has(&h->ended, id)) {
        mh_log(MH_LOG_DEBUG, "fd %d: HTTP/2 %s on stream %d after its END_STREAM: GOAWAY", h->c->fd,
               frame, id);
        h->failed = true;
        nghttp2_session_terminate_session(h->session, NGHTTP2_STREAM_CLOSED);
        return;
    }
    if (id != h->closed_answered) {
        mh_log(MH_LOG_DEBUG, "fd %d: HTTP/2 %s on closed stream %d: RST_STREAM STREAM_CLOSED",
               h->c->fd, frame, id);
        nghttp2_submit_rst_stream(h->session, NGHTTP2_FLAG_NONE, id, NGHTTP2_STREAM_CLOSED);
        h->closed_answered = id;
    }
    flood_cost(h);
}

/*
 * A whole frame header, before nghttp2 reads it (mh_h2_acks_next): DATA on
 * a client stream at or below the highest opened. nghttp2 1.52 drops DATA
 * for a stream it no longer holds before any callback (on_begin_frame
 * included), so this is the one place it can be seen.
 */
static void frame_header(struct mh_h2 *h, const uint8_t hdr[9])
{
    int32_t id = (int32_t)(((uint32_t)hdr[5] << 24 | (uint32_t)hdr[6] << 16 |
                            (uint32_t)hdr[7] << 8 | hdr[8]) &
                           0x7fffffff);
    if (hdr[3] == NGHTTP2_DATA && (id & 1) && id <= h->ids.last && !h->failed)
        closed_stream(h, id, "DATA");
}

/*
 * HEADERS on a client stream, before nghttp2 judges it: on an ID the
 * client skipped, PROTOCOL_ERROR (h2_policy.h, mh_h2_ids); on a closed
 * one, STREAM_CLOSED.
 */
static int on_begin_frame(nghttp2_session *session, const nghttp2_frame_hd *hd, void *ud)
{
    struct mh_h2 *h = ud;
    if (hd->type != NGHTTP2_HEADERS || !(hd->stream_id & 1) || h->failed)
        return 0;
    bool opened_before = hd->stream_id <= h->ids.last; /* not a new stream */
    if (!mh_h2_ids_headers(&h->ids, hd->stream_id)) {
        mh_log(MH_LOG_DEBUG, "fd %d: HTTP/2 HEADERS on stream %d, skipped before: GOAWAY", h->c->fd,
               hd->stream_id);
        h->failed = true;
        nghttp2_session_terminate_session(session, NGHTTP2_PROTOCOL_ERROR);
        return 0;
    }
    if (opened_before)
        closed_stream(h, hd->stream_id, "HEADERS");
    return 0;
}

/*
 * nghttp2 refused a frame with a stream error (a stream past
 * max_concurrent_streams: REFUSED_STREAM; a malformed request:
 * PROTOCOL_ERROR): the connection goes on, but each costs a token, so a
 * loop of them ends as a flood does.
 */
static int on_invalid_frame(nghttp2_session *session, const nghttp2_frame *frame, int code,
                            void *ud)
{
    (void)session;
    (void)frame;
    (void)code;
    flood_cost(ud);
    return 0;
}

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct mh_h2 *h = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    struct mh_h2_stream *s = mh_h2_stream_new(h, frame->hd.stream_id);
    if (!s)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM INTERNAL_ERROR */
    s->header_deadline = mh_conn_after(h->c, h->c->h->limits->read_header_timeout);
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, s);
    mh_conn_set_idle(h->c, false);
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t nlen, const uint8_t *value, size_t vlen, uint8_t flags, void *ud)
{
    (void)flags;
    (void)ud;
    if (frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    struct mh_h2_stream *s = stream_get(session, frame->hd.stream_id);
    if (!s || s->head_done)
        return 0; /* trailers: nghttp2 checked them, we do not keep them */
    return mh_h2_stream_header(s, name, nlen, value, vlen);
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct mh_h2 *h = ud;
    bool end_stream = frame->hd.flags & NGHTTP2_FLAG_END_STREAM;
    struct mh_h2_stream *s;
    switch (frame->hd.type) {
    case NGHTTP2_HEADERS:
        if (!(s = stream_get(session, frame->hd.stream_id)))
            break;
        if (!s->head_done)
            mh_h2_stream_head_done(s, end_stream);
        else if (end_stream)
            mh_h2_stream_body_end(s); /* after trailers */
        break;
    case NGHTTP2_DATA:
        if (frame->hd.length == 0 && !end_stream)
            flood_cost(h);
        if (end_stream && (s = stream_get(session, frame->hd.stream_id)))
            mh_h2_stream_body_end(s);
        break;
    case NGHTTP2_PING:
    case NGHTTP2_SETTINGS:
        if (!(frame->hd.flags & NGHTTP2_FLAG_ACK))
            flood_cost(h);
        break;
    case NGHTTP2_PRIORITY:
    case NGHTTP2_RST_STREAM:
        flood_cost(h);
        break;
    default:
        break;
    }
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    (void)ud;
    struct mh_h2_stream *s = stream_get(session, id);
    if (!s) {
        nghttp2_session_consume_connection(session, len);
        return 0;
    }
    mh_h2_stream_data(s, data, len);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t id, uint32_t error_code, void *ud)
{
    struct mh_h2 *h = ud;
    if ((id & 1) && nghttp2_session_get_stream_remote_close(session, id) == 1)
        mh_h2_ended_add(&h->ended, id);
    struct mh_h2_stream *s = stream_get(session, id);
    if (s) {
        nghttp2_session_set_stream_user_data(session, id, NULL);
        mh_h2_stream_closed(s, error_code);
    }
    return 0;
}

/*
 * The response went out complete while the client is still sending its
 * body, or after its body stalled (body_timeout): RST_STREAM NO_ERROR asks
 * it to stop (RFC 9113 §8.1) and closes the stream, which is then freed.
 * Sent after the END_STREAM frame, never before: a reset queued earlier
 * would discard it.
 */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    (void)ud;
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM) ||
        (frame->hd.type != NGHTTP2_DATA && frame->hd.type != NGHTTP2_HEADERS))
        return 0;
    struct mh_h2_stream *s = stream_get(session, frame->hd.stream_id);
    if (s && (s->req.body_state == MH_BODY_MORE || s->req.body_state == MH_BODY_STALLED))
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_NO_ERROR);
    return 0;
}

static int on_error(nghttp2_session *session, int code, const char *msg, size_t len, void *ud)
{
    (void)session;
    struct mh_h2 *h = ud;
    mh_log(MH_LOG_DEBUG, "fd %d: HTTP/2: %.*s (%s)", h->c->fd, (int)len, msg,
           nghttp2_strerror(code));
    return 0;
}

/* ---- after a batch: start, wake, sweep ------------------------------------- */

static void h2_shutdown(struct mh_conn *c);

static void enter(struct mh_h2 *h)
{
    h->depth++;
}

/*
 * Streams whose head completed in the batch just processed start now, those
 * whose body arrived hear it: outside nghttp2's callbacks, so a handler that
 * answers at once submits its response to a session that is not inside
 * mem_recv. Then finished streams are freed and the deadline recomputed.
 */
static void run_streams(struct mh_h2 *h)
{
    for (struct mh_h2_stream *s = h->streams; s && !h->c->closed; s = s->next) {
        if (s->ready) {
            s->ready = false;
            mh_h2_stream_start(s);
        }
        if (s->wake_body && s->in_handler) {
            s->wake_body = false;
            if (s->req.handler->ops->on_body)
                s->req.handler->ops->on_body(&s->req);
        }
        if (s->wake_writable && s->in_handler) {
            s->wake_writable = false;
            if (s->req.handler->ops->on_writable)
                s->req.handler->ops->on_writable(&s->req);
        }
    }
}

static void sweep(struct mh_h2 *h)
{
    struct mh_h2_stream **pp = &h->streams;
    bool had = h->streams != NULL;
    while (*pp) {
        struct mh_h2_stream *s = *pp;
        if (s->closed && s->ended && !s->in_handler) {
            *pp = s->next;
            if (s->next)
                s->next->prev = s->prev;
            mh_h2_stream_free(s);
        } else {
            pp = &s->next;
        }
    }
    if (had && !h->streams) {
        h->idle_at = mh_conn_after(h->c, h->c->h->limits->idle_timeout);
        mh_conn_set_idle(h->c, true);
    }
}

static void leave(struct mh_h2 *h)
{
    if (--h->depth > 0)
        return;
    struct mh_conn *c = h->c;
    if (c->closed || !h->session)
        return;
    run_streams(h);
    if (c->closed)
        return;
    sweep(h);
    if (c->h->shutting_down)
        h2_shutdown(c);
    mh_h2_update_deadline(h);
    mh_h2_want_write(h);
}

/* ---- the connection -------------------------------------------------------- */

static nghttp2_session_callbacks *callbacks(void)
{
    static nghttp2_session_callbacks *cbs;
    if (cbs || nghttp2_session_callbacks_new(&cbs) != 0)
        return cbs;
    nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, on_begin_frame);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(cbs, on_invalid_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
    nghttp2_session_callbacks_set_error_callback2(cbs, on_error);
    return cbs;
}

/* The session options (made again when the limits they come from change: a reload). */
static nghttp2_option *options(const struct mh_http_limits *lim)
{
    static nghttp2_option *opt;
    static uint32_t table_size;
    if (opt && table_size == lim->h2_header_table_size)
        return opt;
    nghttp2_option_del(opt);
    opt = NULL;
    if (nghttp2_option_new(&opt) != 0)
        return NULL;
    table_size = lim->h2_header_table_size;
    /* The response encoder's HPACK table: h2_header_table_size bounds it as SETTINGS bounds the
     * request decoder's, whatever table size the client advertises. */
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, table_size);
    /* Window updates follow what the handler read, so an unread body is bounded by the window. */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    /* Queued SETTINGS/PING acknowledgements (a client that floods and does not read). */
    nghttp2_option_set_max_outbound_ack(opt, 100);
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_option_set_max_continuations(opt, 8);
    /*
     * Closed streams are not kept for the RFC 7540 priority tree: nghttp2 would keep up to
     * max_concurrent_streams of them per connection, 55.6 → 32.3 kB per connection idle after
     * 100 requests (bench/h2.sh). Frames on a stream it forgot are ignored (RFC 9113 5.1).
     */
    nghttp2_option_set_no_closed_streams(opt, 1);
    return opt;
}

static void finish_session(struct mh_h2 *h);

/*
 * nghttp2 gave up on the session (a fatal error: no GOAWAY of its own). A
 * flood it caught (queued acknowledgements, CONTINUATION frames past
 * max_continuations) still deserves a reason: GOAWAY ENHANCE_YOUR_CALM,
 * written by hand after what was already serialized, then the close. So
 * does an invalid connection preface (RFC 9113 §3.4: PROTOCOL_ERROR; conn.c
 * sends the reserved PRI method here on a cleartext listener): GOAWAY after
 * an empty SETTINGS, since the server's preface must come first.
 */
static void fail_session(struct mh_h2 *h, int rv)
{
    struct mh_conn *c = h->c;
    bool flood = rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS;
    bool magic = rv == NGHTTP2_ERR_BAD_CLIENT_MAGIC; /* RFC 9113 §3.4: PROTOCOL_ERROR */
    mh_log(flood ? MH_LOG_WARN : MH_LOG_DEBUG, "fd %d: HTTP/2 input: %s%s", c->fd,
           nghttp2_strerror(rv), flood || magic ? ": GOAWAY" : "");
    if (!flood && !magic) {
        mh_conn_close(c);
        return;
    }
    uint32_t last = (uint32_t)nghttp2_session_get_last_proc_stream_id(h->session);
    uint32_t code = flood ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR;
    const uint8_t frame[17] = {0,
                               0,
                               8,
                               NGHTTP2_GOAWAY,
                               0,
                               0,
                               0,
                               0,
                               0,
                               (uint8_t)(last >> 24),
                               (uint8_t)(last >> 16),
                               (uint8_t)(last >> 8),
                               (uint8_t)last,
                               (uint8_t)(code >> 24),
                               (uint8_t)(code >> 16),
                               (uint8_t)(code >> 8),
                               (uint8_t)code};
    static const uint8_t settings[9] = {0, 0, 0, NGHTTP2_SETTINGS, 0, 0, 0, 0, 0};
    if (mh_outq_acquire(&c->out, c->h->bufs) < 0 ||
        (magic && mh_outq_append(&c->out, settings, sizeof settings) < 0) ||
        mh_outq_append(&c->out, frame, sizeof frame) < 0) {
        mh_conn_close(c);
        return;
    }
    finish_session(h);
}

static int process(struct mh_h2 *h, const char *data, size_t n)
{
    enter(h);
    const uint8_t *in = (const uint8_t *)data, *seg;
    size_t len;
    ssize_t rv = 0;
    /* frame by frame: the stream limit's ACK is kept from nghttp2, and each
     * frame header is looked at before nghttp2 reads it (h2_policy.h) */
    while (rv >= 0 && mh_h2_acks_next(&h->acks, &in, &n, &seg, &len)) {
        if (seg == h->acks.hdr)
            frame_header(h, seg);
        rv = nghttp2_session_mem_recv(h->session, seg, len);
    }
    if (rv < 0) {
        h->depth--;
        fail_session(h, (int)rv);
        return -1;
    }
    leave(h);
    return 0;
}

static int h2_start(struct mh_conn *c, const char *bytes, size_t n)
{
    const struct mh_http_limits *lim = c->h->limits;
    struct mh_h2 *h = calloc(1, sizeof *h);
    nghttp2_session_callbacks *cbs = callbacks();
    nghttp2_option *opt = options(lim);
    if (!h || !cbs || !opt || nghttp2_session_server_new2(&h->session, cbs, h, opt) != 0) {
        free(h);
        return -1;
    }
    h->c = c;
    c->proto_state = h;
    mh_h2_flood_init(&h->flood, lim->h2_flood_budget, ev_now(c->h->loop));
    mh_h2_acks_init(&h->acks);
    /* the preface is in: idle (idle_timeout) until a stream opens */
    h->idle_at = mh_conn_after(h->c, lim->idle_timeout);
    nghttp2_settings_entry iv[MH_H2_SETTINGS_MAX];
    size_t niv = mh_h2_settings(lim, iv);
    nghttp2_settings_entry streams = mh_h2_settings_streams(lim);
    /* two frames, the stream limit last: its ACK is the one kept from nghttp2 (h2_policy.h) */
    if (nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, iv, niv) != 0 ||
        nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, &streams, 1) != 0 ||
        nghttp2_session_set_local_window_size(h->session, NGHTTP2_FLAG_NONE, 0,
                                              mh_h2_conn_window(lim)) != 0) {
        nghttp2_session_del(h->session);
        free(h);
        c->proto_state = NULL;
        return -1;
    }
    mh_conn_set_deadline(c, h->idle_at);
    process(h, bytes, n); /* a failure there closes the connection itself */
    return 0;
}

static void h2_read(struct mh_conn *c)
{
    struct mh_h2 *h = c->proto_state;
    char buf[READ_CHUNK];
    for (int i = 0; i < READS_PER_EVENT && !c->closed; i++) {
        ssize_t n = mh_transport_read(&c->tp, buf, sizeof buf);
        if (n < 0)
            return mh_conn_read_failed(c);
        if (n == 0) {
            c->peer_closed = true;
            mh_conn_close(c); /* streams in flight hear on_abort */
            return;
        }
        if (process(h, buf, (size_t)n) < 0)
            return;
        if ((size_t)n < sizeof buf && !mh_transport_pending(&c->tp))
            return;
    }
}

/* Nothing more to read or write at nghttp2 (GOAWAY sent, streams done): close after the output. */
static void finish_session(struct mh_h2 *h)
{
    struct mh_conn *c = h->c;
    for (struct mh_h2_stream *s = h->streams; s; s = s->next)
        mh_h2_stream_abort(s);
    nghttp2_session_del(h->session);
    h->session = NULL;
    mh_conn_linger(c);
}

static void h2_pump(struct mh_conn *c)
{
    struct mh_h2 *h = c->proto_state;
    if (!h->session)
        return;
    enter(h);
    while (c->out.bytes < OUT_HIGH) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(h->session, &data);
        if (n < 0) {
            mh_log(MH_LOG_DEBUG, "fd %d: HTTP/2 output: %s", c->fd, nghttp2_strerror((int)n));
            h->depth--;
            mh_conn_close(c);
            return;
        }
        if (n == 0)
            break;
        if (mh_outq_acquire(&c->out, c->h->bufs) < 0 ||
            mh_outq_append(&c->out, data, (size_t)n) < 0) {
            mh_log(MH_LOG_ERROR, "fd %d: out of memory writing HTTP/2 frames; closing", c->fd);
            h->depth--;
            mh_conn_close(c);
            return;
        }
    }
    if (!nghttp2_session_want_read(h->session) && !nghttp2_session_want_write(h->session)) {
        h->depth--;
        finish_session(h);
        return;
    }
    leave(h);
}

static void h2_on_timer(struct mh_conn *c)
{
    struct mh_h2 *h = c->proto_state;
    if (!h->session)
        return;
    ev_tstamp now = ev_now(c->h->loop);
    enter(h);
    for (struct mh_h2_stream *s = h->streams; s; s = s->next) {
        ev_tstamp d = mh_h2_stream_deadline(s);
        if (d && now >= d)
            mh_h2_stream_on_timer(s, now);
    }
    if (!h->streams && h->idle_at && now >= h->idle_at && !h->goaway) {
        mh_log(MH_LOG_DEBUG, "fd %d: HTTP/2 connection idle: GOAWAY", c->fd);
        h->idle_at = 0;
        h2_shutdown(c);
    }
    leave(h);
}

static void h2_shutdown(struct mh_conn *c)
{
    struct mh_h2 *h = c->proto_state;
    if (!h || !h->session || h->goaway || c->closed)
        return;
    h->goaway = true;
    nghttp2_submit_goaway(h->session, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(h->session), NGHTTP2_NO_ERROR,
                          NULL, 0);
    mh_h2_want_write(h);
}

static void h2_close(struct mh_conn *c)
{
    struct mh_h2 *h = c->proto_state;
    if (!h)
        return; /* h2_start failed */
    for (struct mh_h2_stream *s = h->streams; s; s = s->next)
        mh_h2_stream_abort(s);
    if (h->session) {
        nghttp2_session_del(h->session);
        h->session = NULL;
    }
}

static void h2_destroy(void *state)
{
    struct mh_h2 *h = state;
    if (h->session)
        nghttp2_session_del(h->session);
    while (h->streams) {
        struct mh_h2_stream *s = h->streams;
        h->streams = s->next;
        mh_h2_stream_free(s);
    }
    mh_buf_free(&h->scratch);
    free(h);
}

/* A session is per connection: nothing of it is kept for the next. */
static void h2_recycle(struct mh_conn *c)
{
    if (c->proto_state)
        h2_destroy(c->proto_state);
    c->proto_state = NULL;
}

static void h2_each_request(struct mh_conn *c, void (*fn)(struct mh_req *r, void *ud), void *ud)
{
    struct mh_h2 *h = c->proto_state;
    for (struct mh_h2_stream *s = h->streams; s; s = s->next)
        if (s->in_handler && !s->req.closed)
            fn(&s->req, ud);
}

/*
 * Output: frames are serialized as the wire queue empties, so it stays
 * bounded, and written as they come. Once all is out, the pooled buffers go
 * back: an idle session pins none.
 */
static void h2_writable(struct mh_conn *c)
{
    while (!c->closed && !c->lingering) {
        if (!mh_conn_out_pending(c)) {
            h2_pump(c);
            if (c->closed || c->lingering || !mh_conn_out_pending(c))
                break;
        }
        mh_conn_flush(c);
        if (c->want_write)
            return; /* the socket is full: EV_WRITE comes back here */
    }
    if (!c->closed && !c->lingering && !mh_conn_out_pending(c)) {
        mh_outq_release(&c->out, c->h->bufs);
        if (c->wbuf.data)
            mh_buf_release(&c->wbuf, c->h->bufs);
    }
}

const struct mh_conn_proto mh_h2_proto = {
    .name = "HTTP/2",
    .start = h2_start,
    .read = h2_read,
    .writable = h2_writable,
    .timeout = h2_on_timer,
    .stop = h2_shutdown,
    .close = h2_close,
    .recycle = h2_recycle,
    .destroy = h2_destroy,
    .each_request = h2_each_request,
};
