#ifndef MH_CONN_H
#define MH_CONN_H
/*
 * A client connection and its state machine:
 *
 *   IDLE --first byte--> HEAD --head parsed--> HANDLER --response done-->
 *     DRAIN (discard unread request body) --> IDLE / HEAD (next pipelined)
 *   any state --close--> LINGER (output flushed, write side shut, reading
 *     until EOF so the client sees the response instead of a reset)
 *
 * Requests already in the read buffer are handled back to back and their
 * responses leave in one write. A connection is never freed inside its own
 * callback: mh_conn_close marks it closed, and the worker frees it from its
 * prepare watcher once no handler holds a reference.
 */
#include <ev.h>
#include <llhttp.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "buf.h"
#include "request.h"
#include "response.h"
#include "transport.h"

struct mh_worker;
struct mh_listener;
struct mh_task;
struct mh_gen;

enum mh_conn_state {
    MH_CONN_IDLE,    /* between requests (or new), nothing of a head yet */
    MH_CONN_HEAD,    /* reading a request head */
    MH_CONN_HANDLER, /* the request is being answered */
    MH_CONN_DRAIN,   /* response done; discarding the rest of the request body */
    MH_CONN_LINGER,  /* closing: draining input after the last response */
};

enum mh_body_state {
    MH_BODY_NONE, /* no body, or all of it parsed */
    MH_BODY_MORE, /* more body bytes to come */
    MH_BODY_TOO_LARGE,
    MH_BODY_BAD,     /* malformed framing, or the peer went away */
    MH_BODY_TIMEOUT, /* read_timeout passed while the body was still coming */
};

struct mh_conn {
    struct mh_worker *worker;
    int fd;
    struct mh_transport tp; /* all socket I/O goes through it: plain TCP or TLS */
    enum mh_conn_state state;
    ev_io io;
    ev_timer timer;
    ev_tstamp deadline;       /* when the current state times out (0 = never) */
    ev_tstamp read_deadline;  /* whole request incl. body (read_timeout; 0 = none) */
    ev_tstamp write_deadline; /* end of head to end of response (write_timeout; 0 = none) */
    ev_tstamp send_deadline;  /* output blocked: progress due by then (send_timeout; 0 = none) */
    ev_tstamp timer_at;       /* when the armed timer fires */
    int io_events;            /* events the io watcher is armed for */

    /* input */
    struct mh_buf in;
    size_t req_start; /* offset in `in` of the current request */
    size_t head_len;  /* bytes of the head, once parsed */
    size_t parse_pos; /* bytes of `in` given to the parser */
    llhttp_t parser;
    int pause; /* why the parser paused: MH_PAUSE_* */
    bool last_was_value;
    bool url_done;

    /* the request being answered */
    struct mh_request req;
    struct mh_response res;
    struct mh_gen *gen;   /* generation serving this request */
    struct mh_task *task; /* its handler, while it runs */
    unsigned long requests;
    ev_tstamp started; /* loop time the current request's head was parsed */

    /* request body */
    enum mh_body_state body_state;
    struct mh_buf body; /* decoded body bytes not yet read by the handler */
    uint64_t body_received;
    uint64_t max_body;  /* this request's body limit: max_body_bytes or req:set_max_body */
    bool body_asked;    /* the handler asked for body bytes: the limit is fixed */
    bool body_wanted;   /* a handler waits for body bytes */
    bool body_want_all; /* ...for all of them (req:body) rather than some */
    bool continue_sent; /* "100 Continue" went out */
    bool draining;      /* on_body discards */

    /* output */
    struct mh_buf out;
    size_t out_sent;

    bool closed;      /* socket closed; object waits to be freed */
    bool close_after; /* close once the current response is written */
    bool peer_closed; /* read side saw EOF */
    bool in_pending;  /* on the worker's pending-write list */
    bool want_write;  /* the socket was full: wait for EV_WRITE */
    bool on_idle_list;
    bool processing; /* inside the input loop (guards re-entry) */
    unsigned refs;

    struct sockaddr_storage peer;
    socklen_t peer_len;

    struct mh_conn *prev, *next;  /* idle/active list */
    struct mh_conn *next_pending; /* pending writes */
    struct mh_conn *next_closed;
};

/* Takes ownership of fd; returns NULL (fd not closed) on OOM. */
struct mh_conn *mh_conn_accept(struct mh_worker *w, struct mh_listener *l, int fd,
                               const struct sockaddr_storage *peer, socklen_t plen);

/* Closes the socket now; the object lives until the last reference is dropped. */
void mh_conn_close(struct mh_conn *c);
void mh_conn_ref(struct mh_conn *c);
void mh_conn_unref(struct mh_conn *c);

/* The first byte of the current request head, for resolving its slices. */
static inline const char *mh_conn_head(const struct mh_conn *c)
{
    return c->in.data + c->req_start;
}

/* Head-building context for the current request. */
void mh_conn_head_ctx(struct mh_conn *c, struct mh_head_ctx *ctx, bool complete);

/*
 * Moves staged response bytes to the output and schedules a write. Called
 * when a handler waits for something after writing, so clients see them.
 */
void mh_conn_flush_response(struct mh_conn *c);

/*
 * The handler is done: completes the response (head with Content-Length,
 * chunked terminator), decides keep-alive, and goes on with the next request.
 */
void mh_conn_finish_response(struct mh_conn *c);

/* Answers the current request with a complete short response. */
void mh_conn_respond_simple(struct mh_conn *c, int status, const char *extra, const char *body);

/*
 * Parses buffered body bytes for a handler that wants some of them, or all
 * (req:body). Sends "100 Continue" first when the client waits for it. Returns 1 when satisfied (or
 * the body ended or failed: see body_state), 0 when the handler must wait: the connection then
 * reads and calls mh_task_on_body when satisfied.
 */
int mh_conn_want_body(struct mh_conn *c, bool all);

/*
 * Sets this request's body limit (over it: "body too large", and 413 when
 * the response has not started). Only before the handler first asks for the
 * body: returns -1 after that. A declared Content-Length is checked against
 * the limit when the body is first asked for, so a route may raise it.
 */
int mh_conn_set_max_body(struct mh_conn *c, uint64_t bytes);

/*
 * Moves the read or write deadline of the current request to `seconds` from
 * now (0 = no deadline), as Go's ResponseController does for a handler.
 */
void mh_conn_set_read_timeout(struct mh_conn *c, double seconds);
void mh_conn_set_write_timeout(struct mh_conn *c, double seconds);

/* Bytes queued for the client and not yet written. */
static inline size_t mh_conn_pending_output(const struct mh_conn *c)
{
    return c->out.len - c->out_sent + c->res.body.len;
}

/* Queues the connection for a write before the loop sleeps. */
void mh_conn_schedule_write(struct mh_conn *c);
/* Writes pending output now (from the worker's prepare watcher). */
void mh_conn_flush(struct mh_conn *c);
/* Frees a closed, unreferenced connection object (back to the pool). */
void mh_conn_destroy(struct mh_conn *c);

/* Closes an idle connection on graceful stop; returns true if it did. */
bool mh_conn_close_if_idle(struct mh_conn *c);

/* Formats the peer address as "ip:port" into buf. */
const char *mh_conn_remote_addr(const struct mh_conn *c, char *buf, size_t len);

#endif
