#ifndef MH_H2_CONN_H
#define MH_H2_CONN_H
/*
 * HTTP/2 on a neutral connection (RFC 9113), with nghttp2 for framing,
 * HPACK and flow control: the protocol table conn.c calls once it saw a
 * connection preface on a plain listener (h2c with prior knowledge) or ALPN
 * chose "h2" on TLS. The connection (conn_impl.h) keeps owning the socket,
 * the transport, the wire queue, the timer, the idle/active lists, the
 * lingering close and the deferred free; the session (struct mh_h2,
 * h2_impl.h) hangs off it as its protocol state.
 *
 * Each stream is a struct mh_req served by the connection's root handler
 * (h2_stream.c implements the request ops), so a Lua task, the metrics
 * handler or static files serve it as they serve HTTP/1. Many streams run at
 * once; their responses interleave under nghttp2's flow control.
 *
 * Rules kept from the neutral connection: handler callbacks are never called
 * from inside nghttp2 (streams are started and woken after a batch of input
 * was processed, writable streams after a batch of output was serialized),
 * and nothing is freed inside a callback (streams are swept afterwards).
 */
#include "conn_impl.h"

extern const struct mh_conn_proto mh_h2_proto;

#endif
