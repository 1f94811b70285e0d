#ifndef MH_RELAY_H
#define MH_RELAY_H
/*
 * A byte relay between a request that switched protocols (mh_req_upgrade,
 * its 101 or RFC 8441 200 sent) and a connected outbound socket: the
 * pass-through of a WebSocket or any other upgrade behind a proxy. Nothing
 * is parsed: bytes move both ways as they come, in C, with no Lua per chunk.
 *
 *   client -> upstream: r->body (every byte after the head) is written with
 *   mh_socket_write on the socket's write side. The client is read again
 *   only while fewer than max_buffer bytes wait for the upstream, so a slow
 *   upstream holds the client back through TCP (or HTTP/2 flow control).
 *
 *   upstream -> client: mh_socket_fill on the read side, staged with
 *   mh_req_write and sent with mh_req_flush; the upstream is not read while
 *   mh_req_output_high (the response high-water mark), so a slow client
 *   holds the upstream back.
 *
 * One idle timer, re-armed from the last byte in either direction. Ends:
 * - "upstream closed": the upstream's EOF or a read/write error; the bytes
 *   already read are staged for the client, and finishing the request
 *   writes them and then closes the client's stream;
 * - "client closed": the client's stream was aborted (reset, gone);
 *   a client's EOF (half-close) only shuts the upstream's write side down,
 *   and the relay goes on until the upstream closes too (or idle);
 * - "idle": no byte either way for idle_timeout seconds.
 *
 * The relay puts itself in front of the request's handler (r->handler) for
 * the stream's events, as ws.c does; on_abort still reaches the original
 * handler. s's read and write sides are the relay's until it ends (s->ud is
 * borrowed and given back). Nothing here yields or calls into Lua.
 */
#include <ev.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "handler.h"

struct mh_req;
struct mh_socket;

struct mh_relay;
typedef void (*mh_relay_done_fn)(void *ud, const char *why);

extern const char mh_relay_upstream_closed[]; /* "upstream closed" */
extern const char mh_relay_client_closed[];   /* "client closed" */
extern const char mh_relay_idle[];            /* "idle" */

/*
 * Starts relaying between r (switched, head flushed) and s (connected; its
 * input may already hold bytes the upstream sent after its 101: they go to
 * the client first). idle_timeout 0: never. on_done(ud, why) is called
 * once when the relay ends, from a loop callback or even from inside this
 * call (before it returns x). NULL when out of memory.
 */
struct mh_relay *mh_relay_start(struct mh_req *r, struct mh_socket *s, struct ev_loop *loop,
                                double idle_timeout, size_t max_buffer, mh_relay_done_fn on_done,
                                void *ud);

/*
 * The handler behind a relay running on r (the one that started it), or NULL
 * when r is not relayed: a graceful stop looks past the relay to tell that
 * handler's task, which then frees the relay.
 */
const struct mh_handler *mh_relay_inner(const struct mh_req *r);

/* Bytes moved so far: client -> upstream, upstream -> client. */
void mh_relay_counts(const struct mh_relay *x, size_t *up, size_t *down);

/*
 * Ends the relay if it still runs (without on_done), gives the request and
 * the socket back to their owners, and frees x. The socket stays connected
 * (the caller closes it); the request is left for its handler to finish.
 */
void mh_relay_free(struct mh_relay *x);

#endif
