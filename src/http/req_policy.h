#ifndef MH_REQ_POLICY_H
#define MH_REQ_POLICY_H
/*
 * The rules every protocol applies to a request the same way, written once:
 * an HTTP/1 connection (h1/h1_conn.c) and an HTTP/2 stream (h2/h2_stream.c)
 * call these and keep only their framing. Where the protocols differ, the
 * caller passes what its framing knows (whether the body clock runs, a
 * stream id); what it then does (close the connection, reset the stream) is
 * its own. A third protocol calls the same functions.
 *
 * The life of a handled request, from the protocol's side:
 *
 *   mh_policy_start        the head is parsed: start time, write deadline,
 *                          the connection pinned; then the protocol marks
 *                          the request in its handler and calls
 *                          mh_req_start
 *   mh_policy_first_ask    the handler's first want_body: the body limit is
 *                          fixed, a declared length over it refused
 *   mh_policy_due /        the protocol's timer: the earliest deadline, and
 *   mh_policy_late         which one passed
 *   mh_policy_body_late /  what a passed body deadline does to the request
 *   mh_policy_body_stalled
 *   mh_policy_answer       the handler finished: a body failure the client
 *                          must hear about replaces the handler's answer
 *   mh_policy_end          the request is over for the layers above
 */
#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "conn_impl.h"
#include "req.h"

/*
 * A handled request's deadlines, each 0 when off. The protocol keeps one
 * per request (struct mh_h1, struct mh_h2_stream) and arms its timer for
 * mh_policy_due.
 */
struct mh_req_clock {
    ev_tstamp read;  /* read_timeout: the whole request, body included */
    ev_tstamp body;  /* body_timeout: body bytes due by then while the client may send */
    ev_tstamp write; /* write_timeout: the response done by then (from the end of the head) */
};

/*
 * The handler is about to start on r over connection c: the start time, the
 * write deadline (write_timeout from now) and a reference on c that
 * mh_policy_end drops, so the connection object outlives the handler. The
 * protocol then marks the request as in its handler and calls mh_req_start.
 */
void mh_policy_start(struct mh_req *r, struct mh_req_clock *k, struct mh_conn *c);

/*
 * The handler asks for the body for the first time (want_body); later calls
 * do nothing and return false. The body limit is fixed from here
 * (r->body_asked: mh_req_set_max_body refuses), and a body whose declared
 * length (`declared`: HTTP/1 Content-Length, not chunked; an HTTP/2
 * content-length field) is over r->max_body becomes MH_BODY_TOO_LARGE
 * before a byte is read and before "100 Continue" invites it. True when it
 * refused the body that way.
 */
bool mh_policy_first_ask(struct mh_req *r, bool declared);

/*
 * The earliest of k's deadlines that counts now (0 = none): the write
 * deadline always; while the body is owed (MH_BODY_MORE) the read deadline,
 * and the body deadline when `body_clock_runs`: the client may send now
 * (HTTP/1: the handler waits and the connection reads; HTTP/2: the stream's
 * clock runs whenever the handler holds it, flow control is checked when it
 * passes).
 */
static inline ev_tstamp mh_policy_due(const struct mh_req *r, const struct mh_req_clock *k,
                                      bool body_clock_runs)
{
    ev_tstamp at = k->write;
    if (r->body_state == MH_BODY_MORE) {
        at = mh_conn_earliest(at, k->read);
        if (body_clock_runs)
            at = mh_conn_earliest(at, k->body);
    }
    return at;
}

/* Which of a request's deadlines passed, in the order mh_policy_late decides them. */
enum mh_req_late {
    MH_LATE_NONE,         /* none: the deadlines moved later (re-arm for mh_policy_due) */
    MH_LATE_RESPONSE,     /* write_timeout: the response is not done; the stream is cut */
    MH_LATE_BODY,         /* read_timeout with body owed: mh_policy_body_late */
    MH_LATE_BODY_STALLED, /* body_timeout: mh_policy_body_stalled (HTTP/2 first checks that
                           * flow control let the client send; if not, it starts the clock
                           * again) */
};

/*
 * What passed by `now`, the first that applies: the write deadline (the
 * response is late: whatever the body does, the stream is cut); with the
 * body owed, the read deadline, then the body deadline when
 * `body_clock_runs` (as for mh_policy_due).
 */
enum mh_req_late mh_policy_late(const struct mh_req *r, const struct mh_req_clock *k,
                                bool body_clock_runs, ev_tstamp now);

/*
 * read_timeout passed with the body owed: the body is MH_BODY_TIMEOUT (the
 * handler hears "timeout" on its next read and may still answer whatever it
 * likes) and the read and body deadlines are off. The protocol wakes a
 * handler that waits for the body; HTTP/1 also closes after the answer, as
 * the rest of the body will not be read.
 */
void mh_policy_body_late(struct mh_req *r, struct mh_req_clock *k);

/*
 * body_timeout passed while the client could send (mh_policy_late said
 * MH_LATE_BODY_STALLED): the body is MH_BODY_STALLED, the read and body
 * deadlines are off, and one line is logged at info level (the client's
 * doing, as nginx logs it), naming the connection (c->fd) and, for HTTP/2,
 * the stream (`stream` > 0; 0 on HTTP/1). Returns true when the answer can
 * still be a 408: the handler waits for the body (`waiting`) and no head
 * went out; the protocol then wakes the handler, and mh_policy_answer turns
 * its response into the 408. False: the protocol cuts the stream now (HTTP/1
 * closes the connection, HTTP/2 resets the stream); the handler hears
 * on_abort and its body reads "timeout".
 */
bool mh_policy_body_stalled(struct mh_req *r, struct mh_req_clock *k, const struct mh_conn *c,
                            int32_t stream, bool waiting);

/* mh_policy_answer's part for a body that did not end well (out of line). */
bool mh_policy_answer_failed_body(struct mh_req *r);

/*
 * The handler finished (the protocol's send with complete): when the body
 * failed in a way the client must hear about and no head went out yet, the
 * answer is the server's, whatever the handler made of the `nil, err` it
 * got: 413 "request body too large" (MH_BODY_TOO_LARGE), 400 for malformed
 * framing (MH_BODY_BAD; HTTP/1 only, HTTP/2 framing errors are nghttp2's),
 * 408 (MH_BODY_STALLED). The handler's status, headers and staged body are
 * dropped. Returns true when it replaced the response.
 */
static inline bool mh_policy_answer(struct mh_req *r)
{
    /* inline: the common request's body ended well, and this is on every response's path */
    return r->body_state > MH_BODY_MORE && mh_policy_answer_failed_body(r);
}

/*
 * The short text body of a response the server makes itself for `status`
 * (a bad head, a refused request): "431 Request Header Fields Too Large\n",
 * written into buf (64 bytes is enough for every status) and returned.
 */
const char *mh_policy_status_body(int status, char *buf, size_t len);

/*
 * What a listener answers a plain connection it sheds (no descriptor left
 * to serve it: net/listener.c): a whole HTTP/1.1 503 with Retry-After and
 * Connection: close, typed and sized as every body the server writes. The
 * bytes are static, built on the first call; *len gets their length.
 */
const char *mh_policy_shed_response(size_t *len);

/*
 * The stream is gone while the handler finishes (r->closed, or the
 * connection closed): the output filters free their state and the staged
 * body is released now (referenced strings, files); nothing is sent. The
 * protocol then calls mh_policy_end.
 */
void mh_policy_drop_response(struct mh_req *r);

/*
 * The request is over for everyone above: the observers (access log,
 * metrics) see it unless its stream was closed first, then the owner's
 * on_end; the handler is detached and the reference mh_policy_start took
 * on c is dropped. The protocol clears its own "in the handler" mark, turns
 * off the request's deadlines where it still reads them (HTTP/2: the
 * stream outlives the handler) and moves on (the next request, a drain, a
 * close).
 */
void mh_policy_end(struct mh_req *r, struct mh_conn *c);

#endif
