#ifndef MH_CONN_H
#define MH_CONN_H
/*
 * Connections, whatever protocol they speak: the API the server uses
 * (accept, the per-loop context, graceful stop) over a neutral connection
 * (conn.c) that owns the socket, the transport, the output, the timer and
 * the closing, and decides once, from the first bytes, which protocol runs
 * on it: HTTP/1 (h1/) or HTTP/2 (h2/), siblings behind the protocol table
 * of conn_impl.h. Each protocol turns its requests into struct mh_req for
 * the connection's root handler (the app's dispatcher, or a C handler such
 * as the metrics endpoint). It knows no Lua: no generation, no task.
 *
 * Ownership, references, close:
 * - mh_http_accept creates a connection owned by its struct mh_http_ctx.
 * - mh_conn_close closes the socket at once, but never frees: the object is
 *   on the context's closed list and freed by mh_http_prepare once nothing
 *   holds a reference. A protocol holds one while a handler serves one of
 *   its requests (mh_req_start .. mh_req_finish), so a handler's struct
 *   mh_req stays valid after the client is gone (req->closed, and the
 *   handler's on_abort is called).
 * - Nothing is freed inside the connection's own callbacks.
 * - Closing: output is flushed, the write side shut, and input read until
 *   EOF (or 2 s) so the client sees the response instead of a reset.
 */
#include <ev.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include "buf.h"
#include "handler.h"

struct mh_conn;
struct mh_conn_protos;
struct mh_req;
struct mh_tls_server;
struct mh_transport;

/* The limits connections enforce (from the server's settings). Seconds; 0 = none. */
struct mh_http_limits {
    double read_header_timeout; /* first byte of a head to its end; also a new connection's */
    double read_timeout;        /* whole request incl. body */
    double body_timeout;        /* no body bytes while the server waits for them (h1_conn.c) */
    double write_timeout;       /* end of head to end of response */
    double idle_timeout;        /* between requests */
    double send_timeout;        /* output blocked: the client must take some within this */
    long max_header_bytes;
    long max_body_bytes;
    long discard_body_bytes; /* unread body read and dropped (and a closing connection's input) */
    long keepalive_requests; /* requests per connection; 0 = unlimited */
    /* HTTP/2 (h2/h2_conn.c) */
    bool http2; /* TLS: ALPN chose "h2" (the listener offered it) */
    bool h2c;   /* plain: a connection preface starts HTTP/2 */
    uint32_t h2_max_concurrent_streams;
    uint32_t h2_header_table_size; /* HPACK dynamic table, each way (decoder and encoder) */
    uint32_t h2_flood_budget;      /* frames doing no work per burst (refilled over 10 s) */
};

/* An intrusive doubly-linked list of connections (idle or active). */
struct mh_conn_list {
    struct mh_conn *head;
    size_t n;
};

/*
 * What the connections of one event loop share: the worker embeds one.
 * Fields without `_` may be read by the owner; set the hooks before accepting.
 */
struct mh_http_ctx {
    struct ev_loop *loop;
    const struct mh_http_limits *limits;
    struct mh_buf_pool *bufs;
    size_t nconns;            /* open connections */
    struct mh_conn_list idle; /* waiting for a request (first to go on stop) */
    struct mh_conn_list active;
    bool shutting_down; /* finish what is in flight; no keep-alive */

    /* A request ended (response complete or stream gone), before its on_end. NULL: none. */
    void (*observe)(void *ud, const struct mh_req *r);
    /* A connection closed (room for another: resume accepting). NULL: none. */
    void (*on_close)(void *ud);
    void *ud;

    const struct mh_conn_protos *_protos; /* what the first bytes may start */
    struct mh_conn *_free;                /* pool of connection objects */
    struct mh_conn *_pending;             /* output to flush before the loop sleeps */
    unsigned _npending;                   /* ...how many */
    struct mh_conn *_closed;              /* closed, freed when unreferenced */
    time_t _date_sec;
    char _date_line[64];
    size_t _date_len;
};

/* protos: the protocols connections may speak (protocols.h: HTTP/1 and HTTP/2). */
void mh_http_ctx_init(struct mh_http_ctx *h, struct ev_loop *loop,
                      const struct mh_http_limits *limits, struct mh_buf_pool *bufs,
                      const struct mh_conn_protos *protos);
/* Closes every connection and frees the pool (the loop must not run them again). */
void mh_http_ctx_destroy(struct mh_http_ctx *h);

/*
 * Serves a new connection: takes ownership of fd (TLS when tls is set) and
 * hands every request to root. Returns NULL (fd not closed) on failure.
 */
struct mh_conn *mh_http_accept(struct mh_http_ctx *h, const struct mh_handler *root,
                               struct mh_tls_server *tls, int fd,
                               const struct sockaddr_storage *peer, socklen_t plen);

/* The same over a transport the caller made (tests: a scripted one); *tp is copied. */
struct mh_conn *mh_http_accept_transport(struct mh_http_ctx *h, const struct mh_handler *root,
                                         const struct mh_transport *tp,
                                         const struct sockaddr_storage *peer, socklen_t plen);

/* From the loop's prepare watcher: writes pending output, frees closed connections. */
void mh_http_prepare(struct mh_http_ctx *h);
/*
 * Frees the pooled connection objects (with their buffers and protocol
 * state) past the first `keep`: the pool keeps what a spike left otherwise.
 */
void mh_http_trim(struct mh_http_ctx *h, size_t keep);
/* Whether nothing is open or waiting to be freed (a graceful stop may end). */
bool mh_http_drained(const struct mh_http_ctx *h);
/* Connection counts, for metrics and logs. */
struct mh_http_counts {
    size_t open; /* accepted and not closed */
    size_t idle; /* of those, waiting for a request (HTTP/1) or a stream (HTTP/2) */
};
struct mh_http_counts mh_http_counts(const struct mh_http_ctx *h);

/* Closes idle connections (graceful stop, reload); all = active ones too. */
void mh_http_close_idle(struct mh_http_ctx *h);
void mh_http_close_all(struct mh_http_ctx *h);

/* Calls fn for the request of every connection whose handler is running. */
void mh_http_each_request(struct mh_http_ctx *h, void (*fn)(struct mh_req *r, void *ud), void *ud);

/* "Date: <IMF-fixdate>\r\n", regenerated at most once a second. */
const char *mh_http_date(struct mh_http_ctx *h, size_t *len);

/* Closes the socket now; the object lives until the last reference is dropped. */
void mh_conn_close(struct mh_conn *c);
/* Whether c was closed (valid until the next mh_http_prepare frees it). */
bool mh_conn_closed(const struct mh_conn *c);

#endif
