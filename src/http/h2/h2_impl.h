#ifndef MH_H2_IMPL_H
#define MH_H2_IMPL_H
/*
 * The HTTP/2 session and stream fields: private to h2_conn.c (the session,
 * nghttp2's callbacks) and h2_stream.c (the request ops of a stream). The
 * session is the neutral connection's protocol state (c->proto_state).
 */
#include <nghttp2/nghttp2.h>

#include "conn_impl.h"
#include "h2_policy.h"
#include "outq.h"
#include "req.h"
#include "req_policy.h"

struct mh_h2;

struct mh_h2_stream {
    struct mh_req req; /* first: the ops find the stream from it */
    struct mh_h2 *h2;
    int32_t id;
    struct mh_buf head;     /* the bytes the head's slices index: :path, header names and values */
    struct mh_outq q;       /* body handed over by send, not yet framed into DATA */
    struct mh_buf trailers; /* the response's trailer lines, taken when it completes */
    uint64_t unacked;       /* body bytes in req.body not yet given back to flow control */
    size_t header_bytes;    /* header list size so far (max_header_bytes budget) */
    ev_tstamp header_deadline; /* the header block complete by then (0 = none) */
    /* the request's deadlines (req_policy.h); the body deadline: DATA due by then while the
     * client may send (h2_stream.c, body_clock) */
    struct mh_req_clock clock;
    int bad_status;   /* the head deserves this answer from the server (431, 400...) */
    bool head_done;   /* the header block is complete */
    bool ready;       /* head done, handler to be started after this input batch */
    bool in_handler;  /* a handler holds req (start .. finish) */
    bool ended;       /* the handler finished (or never started) */
    bool complete;    /* the response is complete: EOF after q */
    bool deferred;    /* the data provider waits for q (NGHTTP2_ERR_DEFERRED) */
    bool cut;         /* aborted after the head: RST_STREAM once q is out */
    bool closed;      /* nghttp2 closed the stream */
    bool body_wanted; /* the handler waits for body */
    bool body_want_all;
    bool wake_body;     /* on_body is due after this batch */
    bool wake_writable; /* on_writable is due after this batch of output */
    bool high;          /* q was above the low-water mark: on_writable when it falls below */
    bool has_length;    /* the request declared Content-Length */
    bool switched;      /* a WebSocket's stream (RFC 8441): see h2_upgrade */
    uint32_t ncookies;  /* cookie fields (joined into one at the end of the head) */
    struct mh_slice method;
    struct mh_slice protocol; /* :protocol (RFC 8441 extended CONNECT) */
    /* send_timeout: output waiting for the client must make progress (a DATA frame) by
     * then; 0 = none (nothing waits, or the handler is the slow one). A zero flow-control
     * window (slow read) is cut here, as a full socket is on HTTP/1. */
    ev_tstamp send_deadline;
    struct mh_h2_stream *prev, *next; /* the session's streams */
};

struct mh_h2 {
    struct mh_conn *c;
    nghttp2_session *session;
    struct mh_h2_stream *streams; /* every stream not yet freed */
    struct mh_h2_flood flood;     /* frames doing no work the client may still send */
    struct mh_h2_ids ids;         /* the client's stream IDs: opened and skipped */
    struct mh_h2_acks acks;       /* input frame by frame; the stream limit's ACK cut */
    struct mh_h2_ended ended;     /* the latest streams closed after the client's END_STREAM */
    int32_t closed_answered;      /* the closed stream last answered STREAM_CLOSED; 0 = none */
    ev_tstamp idle_at;            /* no streams: GOAWAY then (idle_timeout; 0 = never) */
    int depth;                    /* inside our own entry points (nghttp2, handlers) */
    bool goaway;                  /* graceful GOAWAY sent: no new streams */
    bool failed;                  /* a fatal error: close once the output is out */
    struct mh_buf scratch;        /* lowercased response header names */
};

/* Deadlines: mh_conn_earliest and mh_conn_after (conn_impl.h), over h->c. */

static inline struct mh_h2_stream *mh_h2_stream_of(const struct mh_req *r)
{
    return (struct mh_h2_stream *)r;
}

/* h2_stream.c: a stream for a new request, NULL on OOM. */
struct mh_h2_stream *mh_h2_stream_new(struct mh_h2 *h, int32_t id);
void mh_h2_stream_free(struct mh_h2_stream *s);
/* One header field (pseudo or regular) from the header block; 0, or a nghttp2 error. */
int mh_h2_stream_header(struct mh_h2_stream *s, const uint8_t *name, size_t nlen,
                        const uint8_t *value, size_t vlen);
/* The header block is complete: validates it and builds the head. */
void mh_h2_stream_head_done(struct mh_h2_stream *s, bool end_stream);
/* Starts the handler (or answers bad_status). */
void mh_h2_stream_start(struct mh_h2_stream *s);
/* DATA payload bytes for the stream. */
void mh_h2_stream_data(struct mh_h2_stream *s, const uint8_t *data, size_t len);
/* The request body ended (END_STREAM). */
void mh_h2_stream_body_end(struct mh_h2_stream *s);
/* nghttp2 closed the stream (error_code: why, NO_ERROR after a normal end). */
void mh_h2_stream_closed(struct mh_h2_stream *s, uint32_t error_code);
/* The connection closed: the request is closed and the handler told. */
void mh_h2_stream_abort(struct mh_h2_stream *s);
/* A stream deadline passed (now >= it): body timeout or RST_STREAM. */
void mh_h2_stream_on_timer(struct mh_h2_stream *s, ev_tstamp now);
/* The earliest deadline of s, 0 = none. */
ev_tstamp mh_h2_stream_deadline(const struct mh_h2_stream *s);

/*
 * Inline, not h2_conn.c's, so the streams call nothing of the session file
 * (no h2_conn.c <-> h2_stream.c cycle). Output to write, or a session that is over: nghttp2 wants
 * no more input once a GOAWAY went either way and no stream is left (the client's GOAWAY with
 * nothing in flight, or its last stream just ended). h2_pump then writes what is queued (a PING's
 * ACK) and closes, at once rather than at idle_timeout (RFC 9113 §6.8: PINGs are answered while
 * streams finish).
 */
static inline void mh_h2_want_write(struct mh_h2 *h)
{
    if (!h->c->closed && h->session &&
        (nghttp2_session_want_write(h->session) || !mh_outq_empty(&h->c->out) ||
         !nghttp2_session_want_read(h->session)))
        mh_conn_schedule_write(h->c);
}

/* Recomputes the connection deadline from its streams. */
static inline void mh_h2_update_deadline(struct mh_h2 *h)
{
    if (h->c->closed || !h->session)
        return;
    ev_tstamp at = h->streams ? 0 : h->idle_at;
    for (struct mh_h2_stream *s = h->streams; s; s = s->next)
        at = mh_conn_earliest(at, mh_h2_stream_deadline(s));
    mh_conn_set_deadline(h->c, at);
}

#endif
