#ifndef MH_CONN_IMPL_H
#define MH_CONN_IMPL_H
/*
 * The neutral connection's fields and the protocol table: for conn.c and the
 * protocol modules (h1/, h2/), which run their protocol on top of it. The
 * layers above see only conn.h and the request ops.
 *
 * conn.c owns the socket, the transport, the wire queue and its writes, the
 * one timer, the idle/active lists, the lingering close and the deferred
 * free. It reads a new connection's first bytes, decides its protocol once
 * (ALPN through the transport; on plain TCP, the HTTP/2 connection preface
 * when h2c is on) and from then calls the protocol through its table. A
 * protocol keeps its own state (struct mh_h1, struct mh_h2) in `proto_state`:
 * the neutral struct has no field of either.
 */
#include "conn.h"
#include "outq.h"
#include "transport.h"

/* The client's first bytes on HTTP/2: the connection preface (RFC 9113 §3.4). */
#define MH_H2_PREFACE     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define MH_H2_PREFACE_LEN 24

/*
 * What a protocol does for the neutral connection. Every op but `flushed`
 * is required. None is called on a closed connection, except `recycle` and
 * `destroy`; none is called while the connection lingers (it then belongs
 * to conn.c alone).
 */
struct mh_conn_proto {
    const char *name;
    /*
     * Takes the connection: `bytes` (n > 0) are its first input, already
     * read. The protocol's state from a previous connection on this object
     * may be in c->proto_state (it allocates one otherwise). -1: out of
     * memory (the caller closes).
     */
    int (*start)(struct mh_conn *c, const char *bytes, size_t n);
    /* The socket is readable (or the transport holds input). */
    void (*read)(struct mh_conn *c);
    /* Output may be written (the pending list, EV_WRITE): writes through mh_conn_flush. */
    void (*writable)(struct mh_conn *c);
    /* Optional: mh_conn_flush wrote everything queued. */
    void (*flushed)(struct mh_conn *c);
    /* c->deadline passed (now >= it); the protocol may move it later instead. */
    void (*timeout)(struct mh_conn *c);
    /* Graceful stop of an idle connection: close it now, or begin to (HTTP/2's GOAWAY). */
    void (*stop)(struct mh_conn *c);
    /* The socket was closed: requests in flight are closed and their handlers told. */
    void (*close)(struct mh_conn *c);
    /*
     * The connection object goes back to the pool: release what the next
     * connection should not inherit (buffers, per-connection memory). The
     * protocol may keep c->proto_state for the next connection that speaks
     * it, or free it and set c->proto_state to NULL.
     */
    void (*recycle)(struct mh_conn *c);
    /* Frees a state `recycle` kept (the pool is going, or another protocol takes the object). */
    void (*destroy)(void *state);
    /* Calls fn for every request whose handler is running. */
    void (*each_request)(struct mh_conn *c, void (*fn)(struct mh_req *r, void *ud), void *ud);
};

struct mh_conn {
    struct mh_http_ctx *h;
    const struct mh_handler *root;
    const struct mh_conn_proto *proto;       /* NULL until the first bytes decide */
    void *proto_state;                       /* the protocol's own struct (see recycle) */
    const struct mh_conn_proto *state_proto; /* which protocol proto_state belongs to */
    int fd;
    struct mh_transport tp; /* all socket I/O goes through it: plain TCP or TLS */
    ev_io io;
    ev_timer timer;
    ev_tstamp deadline;      /* the protocol's (or lingering's) deadline, 0 = none */
    ev_tstamp send_deadline; /* output blocked: progress due by then (send_timeout; 0 = none) */
    ev_tstamp timer_at;      /* when the armed timer fires */
    int io_events;           /* events the io watcher is armed for */
    bool io_lazy;            /* EV_READ kept armed though no longer wanted (mh_conn_update_io) */

    /* output: the wire queue */
    struct mh_outq out;
    struct mh_buf wbuf; /* transports without writev (TLS): bytes taken from `out`, being written */
    size_t wbuf_sent;

    bool want_read; /* the protocol takes input now (else the client's bytes wait in the socket) */
    bool peer_closed; /* the client ended its side (EOF) */
    bool closed;      /* socket closed; object waits to be freed */
    bool lingering;   /* closing: output flushed, then input drained until EOF */
    long linger_left; /* lingering: input bytes still dropped before it closes anyway */
    bool in_pending;  /* on the pending-write list */
    bool want_write;  /* the socket was full: wait for EV_WRITE */
    bool on_idle_list;
    unsigned char nfirst; /* bytes of a connection preface's prefix in `first` */
    char first[MH_H2_PREFACE_LEN];
    unsigned refs; /* the object is freed once only the closed list holds it */

    struct sockaddr_storage peer;
    socklen_t peer_len;
    char peer_text[64]; /* mh_conn_peer_addr's answer, made on its first call ("" until then) */

    struct mh_conn *prev, *next;  /* idle/active list */
    struct mh_conn *next_pending; /* pending writes */
    struct mh_conn *next_closed;
};

/* The protocols a context can detect (mh_http_ctx_init). */
struct mh_conn_protos {
    const struct mh_conn_proto *http1;
    const struct mh_conn_proto *http2;
};

/* ---- services of the neutral connection, for the protocols ---------------- */

/* Output waits (in c->out, or inside the protocol): `writable` is called before the loop sleeps. */
void mh_conn_schedule_write(struct mh_conn *c);
/* Writes c->out as far as the socket takes it; `flushed` once all is out. */
void mh_conn_flush(struct mh_conn *c);
/* Re-arms the timer for `at` (mh_conn_set_deadline's libev part). */
void mh_conn_rearm_timer(struct mh_conn *c, ev_tstamp at);

/*
 * The protocol's deadline (0 = none): its `timeout` op is called then.
 * One timer per connection: moving a deadline later only stores it; the
 * timer, when it fires early, re-arms for the rest ("be smart about
 * timeouts" in libev's manual), so per-request timer work is a store.
 */
static inline void mh_conn_set_deadline(struct mh_conn *c, ev_tstamp at)
{
    c->deadline = at;
    ev_tstamp due =
        c->send_deadline == 0 || (at != 0 && at < c->send_deadline) ? at : c->send_deadline;
    if (due != 0 && (!ev_is_active(&c->timer) || c->timer_at > due))
        mh_conn_rearm_timer(c, due);
}
/* Idle connections are the first to go on graceful stop and reload. */
void mh_conn_set_idle(struct mh_conn *c, bool idle);
/* Arms the io watcher for c->want_read and c->want_write. */
void mh_conn_update_io(struct mh_conn *c);
/* Output is flushed, then the write side shut and the connection closed (lingering). */
void mh_conn_linger(struct mh_conn *c);
/* After a read returned -1: EAGAIN/EINTR leave the connection as it is, anything else closes it. */
void mh_conn_read_failed(struct mh_conn *c);
/* "ip:port" ("[ip6]:port") of the peer, copied into buf; formatted once per connection. */
const char *mh_conn_peer_addr(struct mh_conn *c, char *buf, size_t len);
/* Whether output is queued or half-written. */
bool mh_conn_out_pending(const struct mh_conn *c);
/* The connection's byte stream (plain TCP or TLS). */
const struct mh_transport *mh_conn_transport(const struct mh_conn *c);

/* `seconds` from now as a deadline; 0 (off) stays 0. */
static inline ev_tstamp mh_conn_after(const struct mh_conn *c, double seconds)
{
    return seconds > 0 ? ev_now(c->h->loop) + seconds : 0;
}

/* The earlier of two deadlines (0 = none). */
static inline ev_tstamp mh_conn_earliest(ev_tstamp a, ev_tstamp b)
{
    if (a == 0)
        return b;
    if (b == 0)
        return a;
    return a < b ? a : b;
}

#endif
