#ifndef MH_H2_CONN_H
#define MH_H2_CONN_H
/*
 * HTTP/2 on a connection (RFC 9113), with nghttp2 for framing, HPACK and
 * flow control. The connection object stays conn.c's struct mh_conn: it
 * keeps owning the socket, the transport, the wire queue, the timer, the
 * idle/active lists and the deferred free. What changes is the protocol
 * above the bytes: after conn.c saw a connection preface on a plain listener
 * (h2c with prior knowledge) or ALPN chose "h2" on TLS, it calls
 * mh_h2_start, and from then on hands input, output and timers here.
 *
 * Each stream is a struct mh_req served by the connection's root handler
 * (h2_stream.c implements the request ops), so a Lua task, the metrics
 * handler or static files serve it as they serve HTTP/1. Many streams run at
 * once; their responses interleave under nghttp2's flow control.
 *
 * Rules kept from conn.c: handler callbacks are never called from inside
 * nghttp2 (streams are started and woken after a batch of input was
 * processed, writable streams after a batch of output was serialized), and
 * nothing is freed inside a callback (streams are swept afterwards).
 * Only conn.c calls these.
 */
#include <stdbool.h>
#include <stddef.h>

#include "conn_impl.h"

/* The client's first bytes: the connection preface (RFC 9113 §3.4). */
#define MH_H2_PREFACE     "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
#define MH_H2_PREFACE_LEN 24

/*
 * Switches c to HTTP/2 and processes `n` bytes already read (the preface
 * and whatever followed). -1 on OOM (the caller closes).
 */
int mh_h2_start(struct mh_conn *c, const char *bytes, size_t n);

/* The socket is readable: reads and processes what is there. */
void mh_h2_read(struct mh_conn *c);

/* Serializes pending frames into c->out (a bounded amount per call); wakes writable streams. */
void mh_h2_pump(struct mh_conn *c);

/* The connection's timer fired (deadline or stream deadlines due). */
void mh_h2_on_timer(struct mh_conn *c);

/*
 * Graceful stop: GOAWAY with the last stream ID, streams in flight finish,
 * the connection closes when none is left. Idempotent.
 */
void mh_h2_shutdown(struct mh_conn *c);

/* The socket closed: every stream's request is closed (on_abort), the session is deleted. */
void mh_h2_close(struct mh_conn *c);

/* Frees what mh_h2_start allocated (once nothing references the connection). */
void mh_h2_free(struct mh_conn *c);

/* Calls fn for every stream whose handler is running. */
void mh_h2_each_request(struct mh_conn *c, void (*fn)(struct mh_req *r, void *ud), void *ud);

#endif
