#ifndef MH_CONN_IMPL_H
#define MH_CONN_IMPL_H
/*
 * The HTTP/1 connection's fields: private to conn.c and http_parse.c (the
 * llhttp callbacks fill the request head in place). Everything else goes
 * through conn.h and the request ops.
 */
#include <llhttp.h>

#include "conn.h"
#include "outq.h"
#include "req.h"
#include "transport.h"

enum mh_conn_state {
    MH_CONN_IDLE,    /* between requests (or new), nothing of a head yet */
    MH_CONN_HEAD,    /* reading a request head */
    MH_CONN_HANDLER, /* the request is being answered */
    MH_CONN_DRAIN,   /* response done; discarding the rest of the request body */
    MH_CONN_LINGER,  /* closing: draining input after the last response */
    MH_CONN_H2,      /* HTTP/2: h2_conn.c runs the connection's streams */
};

struct mh_h2;

struct mh_conn {
    struct mh_req req; /* the request being answered: the ops find the conn from it */
    struct mh_http_ctx *h;
    const struct mh_handler *root;
    int fd;
    struct mh_transport tp; /* all socket I/O goes through it: plain TCP or TLS */
    enum mh_conn_state state;
    ev_io io;
    ev_timer timer;
    ev_tstamp deadline;       /* when the current state times out (0 = never) */
    ev_tstamp read_deadline;  /* whole request incl. body (read_timeout; 0 = none) */
    ev_tstamp body_deadline;  /* body bytes due by then while the handler waits (body_timeout) */
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
    unsigned long requests;

    /* request body */
    bool body_wanted;   /* a handler waits for body bytes */
    bool body_want_all; /* ...for all of them (req:body) rather than some */
    bool continue_sent; /* "100 Continue" went out */
    bool draining;      /* on_body discards */
    bool tunnel;        /* switched protocols (mh_req_ops.upgrade): raw bytes both ways */
    char *tunnel_head;  /* the head, copied out of `in` (idle tunnels hold no 16 KiB buffer) */
    size_t tunnel_mark; /* body bytes when the handler last asked: it waits for more */
    uint32_t chunk_ext_bytes; /* http_parse.c: extension bytes on this chunk-size line */
    /* http_parse.c: this request's method is not in llhttp's table (MH_METHOD_OTHER) */
    uint32_t other_method_off, other_method_len;

    /* output: the wire queue */
    struct mh_outq out;
    struct mh_buf wbuf; /* transports without writev (TLS): bytes taken from `out`, being written */
    size_t wbuf_sent;

    bool in_handler;  /* a handler holds req (start .. finish) */
    bool closed;      /* socket closed; object waits to be freed */
    bool close_after; /* close once the current response is written */
    bool in_pending;  /* on the pending-write list */
    bool want_write;  /* the socket was full: wait for EV_WRITE */
    bool on_idle_list;
    bool processing;  /* inside the input loop (guards re-entry) */
    struct mh_h2 *h2; /* MH_CONN_H2: the session */
    unsigned refs;

    struct sockaddr_storage peer;
    socklen_t peer_len;

    struct mh_conn *prev, *next;  /* idle/active list */
    struct mh_conn *next_pending; /* pending writes */
    struct mh_conn *next_closed;
};

/* For h2_conn.c: the connection services HTTP/2 runs on. */
void mh_conn_schedule_write(struct mh_conn *c);
void mh_conn_set_deadline(struct mh_conn *c, ev_tstamp at);
void mh_conn_set_idle(struct mh_conn *c, bool idle);
/* Output is flushed, then the write side shut and the connection closed (lingering). */
void mh_conn_linger(struct mh_conn *c);
/* After a read returned -1: EAGAIN/EINTR leave the connection as it is, anything else closes it. */
void mh_conn_read_failed(struct mh_conn *c);
const char *mh_conn_peer_addr(const struct mh_conn *c, char *buf, size_t len);
/* The connection's byte stream (plain TCP or TLS). */
const struct mh_transport *mh_conn_transport(const struct mh_conn *c);

static inline const char *mh_conn_head(const struct mh_conn *c)
{
    return c->in.data + c->req_start;
}

#endif
