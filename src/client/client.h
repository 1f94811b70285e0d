#ifndef MH_CLIENT_H
#define MH_CLIENT_H
/*
 * Outbound HTTP/1.1: one exchange (struct mh_client_req) runs on one pooled
 * connection (struct mh_client_conn) of a pool (struct mh_client_pool).
 * client.c drives a connection through a dial (net/dialer.h: resolve →
 * connect → TLS handshake) → write → head → body; client_pool.c owns idle
 * connections, reuse and the background drain of unread bodies. The pool sits below the exchange: it
 * calls client.c back only through the mh_client_conn_ops a connection was
 * allocated with. Nothing here blocks the loop and
 * nothing calls into Lua: an exchange reports through its on_event callback,
 * which must not re-enter this module (lua_client.c only arms a timer).
 *
 * Errors are the constants of client_err.h (compare by identity or print them).
 */
#include <ev.h>
#include <llhttp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "buf.h"
#include "client_err.h"
#include "dialer.h"
#include "idle_pool.h"
#include "transport.h"

struct mh_client_pool;
struct mh_client_host;
struct mh_client_conn;
struct mh_client_req;

enum mh_client_event {
    MH_CLIENT_HEAD, /* the response head arrived (or err is set) */
    MH_CLIENT_BODY, /* body bytes, the end of the body, or an error */
    MH_CLIENT_SEND, /* a streamed body's piece is written (or err is set) */
};
typedef void (*mh_client_cb)(struct mh_client_req *r, enum mh_client_event ev);

/* Settings of one client; the defaults are DESIGN.md §3's. */
struct mh_client_settings {
    size_t max_idle;          /* 256 */
    size_t max_idle_per_host; /* 32 */
    double idle_timeout;      /* 90 s */
    size_t drain_bytes;       /* 256 KiB; 0 turns draining off */
    double drain_timeout;     /* 50 ms */
    double connect_timeout;   /* 10 s, capped by the request timeout */
    double tls_timeout;       /* 10 s, handshake */
    double drain_wait;        /* 2 ms: how long a request waits for a draining connection */
    bool tls_verify;          /* true */
    bool tls_resume;          /* true: offer the host's last session again */
    bool tls13_only;          /* false; tls.min_version = "1.3": no TLS 1.2 */
    char *tls_ca;             /* PEM file (owned, malloc'd) or NULL: the system bundle */
    char *tls_cert, *tls_key; /* client certificate and key files (owned) or NULL: none */
};

struct mh_client_stats {
    unsigned long dials, reuses, retries;
    unsigned long drains_sync;      /* finished inside close() from buffered bytes */
    unsigned long drains_done;      /* finished in the background */
    unsigned long drains_abandoned; /* a drain that hit drain_bytes/drain_timeout or failed */
    unsigned long closes_no_drain;  /* closed unread: Connection: close, too big, or off */
    unsigned long tls_resumed;
};

/*
 * One request/response exchange. The caller owns the memory (lua_client.c
 * keeps it inside the response userdata, so it costs no malloc) and must
 * call mh_client_req_finish once, even after an error.
 */
struct mh_client_req {
    /* Set by the caller before mh_client_start. */
    struct mh_client_pool *pool;
    bool tls;
    char host[256]; /* name or numeric address, without brackets */
    uint16_t port;
    const char *data; /* the whole request (head and body), valid until finish */
    size_t len;
    /*
     * A streamed body: data/len is the head only, and the body follows in
     * pieces handed to mh_client_send (framed by the caller: chunked, or
     * bytes of a declared length). Such a request is never retried.
     */
    bool stream;
    bool idempotent; /* may be retried once on a fresh connection */
    bool is_head;    /* HEAD: the response has no body */
    double timeout;  /* total seconds, 0 = none */
    /*
     * Phase limits as nginx splits them, 0 = none (connect: the pool's):
     * connect_timeout bounds the TCP connect; send_timeout the wait between
     * two writes of the request; read_timeout the wait between two reads of
     * the response, so a body that keeps coming is never cut by it, a stall
     * is. A reader that stops asking for body bytes stops the read clock.
     */
    double connect_timeout, send_timeout, read_timeout;
    mh_client_cb on_event;
    void *ud;

    /* Results. */
    const char *err; /* NULL, or why the exchange failed */
    int status;
    int http_major, http_minor;
    bool head_done, body_done;
    /*
     * The server answered before the request was all written (a 413 or 401
     * during an upload): sending stopped, the exchange goes on with that
     * response, and the connection is not reused. mh_client_send returns
     * false from then on.
     */
    bool early;
    struct mh_client_conn *conn; /* while the exchange holds one */

    double _deadline;
    bool _retried;
    const char *_chunk; /* the streamed piece being written, or NULL */
    size_t _chunk_len, _chunk_off;
    bool _chunk_last, _sent_last, _awaiting; /* awaiting: head written, no piece to write */
    int _want;                               /* 0, or the event asked for + 1 */
    bool _want_all;
};

/* Starts the exchange; completion (or failure) arrives as MH_CLIENT_HEAD. */
void mh_client_start(struct mh_client_req *r);

/*
 * Header pairs of the response head, valid until finish: "name\0value\0"...
 * Returns the bytes and their length through len.
 */
const char *mh_client_head(const struct mh_client_req *r, size_t *len);

/*
 * The trailer fields of a chunked response, once its body is complete
 * (body_done), in the same "name\0value\0" form; empty before, and when
 * there are none. Valid until finish.
 */
const char *mh_client_trailers(const struct mh_client_req *r, size_t *len);

/*
 * Streaming: hands the next piece of the request body, which must stay valid
 * until it is written; `last` ends the body. One piece at a time: that is
 * the back-pressure, and the bound on memory. Returns true if the piece is
 * being written (an MH_CLIENT_SEND event comes when it is, on error, or
 * when the server answered early), false if it was written at once, err is
 * set, or `early` is (the piece is dropped: the caller reads the response).
 */
bool mh_client_send(struct mh_client_req *r, const char *data, size_t len, bool last);

/* Asks for MH_CLIENT_HEAD (after a streamed body); false if head or error is already there. */
bool mh_client_head_want(struct mh_client_req *r);

/* Buffered body bytes not consumed yet. */
const char *mh_client_body(const struct mh_client_req *r, size_t *len);
void mh_client_body_consume(struct mh_client_req *r, size_t n);

/*
 * Asks for an MH_CLIENT_BODY event: when any body bytes are buffered (or all
 * of them, with `all`), at the end of the body, or on error. Returns false if
 * the answer is already there (nothing will be sent).
 */
bool mh_client_body_want(struct mh_client_req *r, bool all);

/*
 * Ends the exchange, never blocking: a finished body parks the connection
 * idle; an unread one is drained (bytes already buffered at once, the rest in
 * the background within the drain limits) or the connection is closed.
 */
void mh_client_req_finish(struct mh_client_req *r);

/* ---- pools (client_pool.c) ---------------------------------------------- */

void mh_client_settings_init(struct mh_client_settings *s);

/* A new pool with a reference held by the caller; takes ownership of s->tls_ca. */
struct mh_client_pool *mh_client_pool_new(struct ev_loop *loop, const struct mh_client_settings *s);
void mh_client_pool_ref(struct mh_client_pool *p);
/* The last reference closes every connection and frees the pool. */
void mh_client_pool_unref(struct mh_client_pool *p);
/* Closes the idle connections (draining ones finish on their own). */
void mh_client_pool_close_idle(struct mh_client_pool *p);
const struct mh_client_stats *mh_client_pool_stats(const struct mh_client_pool *p, size_t *idle,
                                                   size_t *open);

/* ---- shared by client.c and client_pool.c (not for other callers) -------- */

enum mh_cconn_state {
    MH_CC_WAIT_DRAIN, /* placeholder: its request waits for a drain to finish, then dials */
    MH_CC_DIALING, /* the dial runs (its own watchers): resolve, connect, TLS handshake */
    MH_CC_WRITING,
    MH_CC_HEAD,
    MH_CC_BODY,
    MH_CC_DRAINING,
    MH_CC_IDLE,
    MH_CC_CLOSED,
};

/*
 * The exchange's side of a connection (client.c), which the pool below it
 * calls back: to run a waiting request on a connection a drain freed
 * (begin), to read a draining body (pump: 1 progress, 0 would block, -1
 * error or EOF), and to close it (close). Given to mh_client_conn_alloc.
 */
struct mh_client_conn_ops {
    void (*begin)(struct mh_client_conn *c, struct mh_client_req *r);
    int (*pump)(struct mh_client_conn *c);
    void (*close)(struct mh_client_conn *c);
};

struct mh_client_conn {
    struct mh_client_pool *pool;
    const struct mh_client_conn_ops *exchange;
    struct mh_client_host *host;
    struct mh_client_req *req; /* NULL while idle or draining */
    enum mh_cconn_state state;
    int fd;
    int io_events;
    bool io_fd_set; /* io has been ev_io_set to this fd (client_pool.c, mh_client_conn_set_io) */
    ev_io io;
    ev_timer timer;
    struct mh_transport tp; /* the byte stream once connected: plain TCP or TLS */
    llhttp_t parser;
    struct mh_buf head; /* "name\0value\0" pairs: the head's, then the trailers' */
    size_t head_end;    /* where the final head's pairs end in `head` (trailers follow) */
    struct mh_buf body; /* parsed body bytes not consumed */
    size_t out_off;
    size_t drained;
    bool reused, got_byte, keep_alive, msg_done, extra_bytes;
    bool head_overflow;
    bool interim; /* parsing a 1xx response, which is absorbed */
    struct mh_dial dial;
    struct mh_idle_conn idle;             /* parked: its host's and the pool's idle lists */
    struct mh_client_conn *aprev, *anext; /* every open connection of the pool */
};

struct mh_client_host {
    struct mh_client_host *next;
    bool tls;
    uint16_t port;
    char name[256];
    struct mh_idle_key idle;
    size_t ndraining;
    struct mh_client_conn *drain_waiter; /* a placeholder in MH_CC_WAIT_DRAIN, or NULL */
};

struct mh_client_pool {
    struct ev_loop *loop;
    struct mh_client_settings s;
    struct mh_client_stats stats;
    struct mh_client_host *hosts;
    struct mh_idle_pool idle;
    size_t nopen;
    struct mh_client_conn *open;
    struct mh_client_conn *free_conns;
    struct mh_dialer *dialer; /* resolver, TLS configuration, saved sessions per host */
    int refs;
};

struct mh_client_host *mh_client_pool_host(struct mh_client_pool *p, const struct mh_client_req *r);
/* An idle connection that still looks alive, taken out of the idle lists, or NULL. */
struct mh_client_conn *mh_client_pool_take(struct mh_client_pool *p, struct mh_client_host *h);
/* A fresh connection object (pooled), on the open list, not connected, run by `exchange`. */
struct mh_client_conn *mh_client_conn_alloc(struct mh_client_pool *p, struct mh_client_host *h,
                                            const struct mh_client_conn_ops *exchange);
/* The connection's watchers (0: stopped); they do not decide how long the loop runs. */
void mh_client_conn_set_io(struct mh_client_conn *c, int events);
void mh_client_conn_set_timer(struct mh_client_conn *c, double seconds);
/* Parks a connection whose exchange completed cleanly. */
void mh_client_pool_park(struct mh_client_conn *c);
/* Starts or continues a background drain; called from client.c on input. */
void mh_client_drain_progress(struct mh_client_conn *c);

/* client.c: the exchange's ops (client_pool.c reaches them through mh_client_conn_ops only) */
/* Runs r on c, an idle or just-drained connection taken out of the pool. */
void mh_client_conn_begin(struct mh_client_conn *c, struct mh_client_req *r);
/* Closes the socket and returns the object to the pool's free list (ends any drain or idle state).
 */
void mh_client_conn_close(struct mh_client_conn *c);
/*
 * Bytes (or an end) came on an idle connection: reads them through its
 * transport. A TLS 1.3 server may send session tickets at any time; TLS
 * consumes those and leaves nothing, and the connection stays usable (true).
 * Any application byte or an end means it is done (false).
 */
bool mh_client_conn_idle_input(struct mh_client_conn *c);
/* Reads and parses what the socket has now. Returns 1 progress, 0 would block, -1 error/EOF. */
int mh_client_conn_pump(struct mh_client_conn *c);

#endif
