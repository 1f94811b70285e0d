#ifndef MH_HANDLER_H
#define MH_HANDLER_H
/*
 * The handler interface: what answers a request, above the protocol. A Lua
 * route (lua/lua_handler.c: a task running a function), a C handler (the
 * metrics endpoint, static files) and the app's own dispatcher all implement
 * it; the router stores handlers by id in a table of these (struct
 * mh_handler_table), so a route is typed: Lua or C, the router does not care.
 *
 * Life of a request, from the handler's side:
 *
 *   start(h, r)        the head is parsed and routed; answer now or later.
 *                      Set r->handler_data for per-request state.
 *   on_body(r)         after mh_req_want_body() returned 0: body bytes, the
 *                      end of the body or a body error are ready.
 *   on_writable(r)     after the handler stopped writing because
 *                      mh_req_output_high() was true: output drained below
 *                      the low-water mark (or the stream went away: check
 *                      r->closed).
 *   on_abort(r)        the stream is gone (client closed, timeout, server
 *                      stopping): no more output will reach the client. The
 *                      handler stops what it waits for; it must still call
 *                      mh_req_finish(r), at once or later.
 *
 * Rules:
 * - Exactly one mh_req_finish(r) per start, whatever happened; after it the
 *   handler must not touch r. Callbacks are never called after finish.
 * - Callbacks come from the event loop, never from inside a call the handler
 *   made on r (mh_req_flush, mh_req_write...), except on_abort, which may be
 *   called from inside mh_req_flush/finish when the write fails: a handler
 *   must tolerate that (set a flag, resume later).
 * - A callback a handler does not need may be NULL.
 * - Handlers do not yield and do not know the protocol: the same handler
 *   serves an HTTP/1 connection and an HTTP/2 stream.
 */
#include <stddef.h>

struct mh_req;
struct mh_handler;

struct mh_handler_ops {
    const char *name; /* for logs: "lua", "metrics", "files" */
    void (*start)(const struct mh_handler *h, struct mh_req *r);
    void (*on_body)(struct mh_req *r);
    void (*on_writable)(struct mh_req *r);
    void (*on_abort)(struct mh_req *r);
};

/* Embed this first in a handler's own struct; ops is the type. */
struct mh_handler {
    const struct mh_handler_ops *ops;
};

/*
 * The handlers of one app (one router): the router maps a pattern to an
 * index here. Owned by whoever built the router (a Lua generation); entries
 * live as long as the table.
 */
struct mh_handler_table {
    const struct mh_handler **v;
    int n, cap;
};

/* Appends h; returns its id (>= 0) or -1 on OOM. */
int mh_handler_table_add(struct mh_handler_table *t, const struct mh_handler *h);
void mh_handler_table_free(struct mh_handler_table *t);

static inline const struct mh_handler *mh_handler_table_get(const struct mh_handler_table *t,
                                                            int id)
{
    return id >= 0 && id < t->n ? t->v[id] : NULL;
}

#endif
