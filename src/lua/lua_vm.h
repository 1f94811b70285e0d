#ifndef MH_LUA_VM_H
#define MH_LUA_VM_H
/*
 * Lua states and generations, the bottom of lua/. A generation is one load
 * of the app script: its Lua state, the router built from its
 * registrations, and its pool of request coroutines. Requests pin the
 * generation they started on, so a reload can install a new one while old
 * requests finish on the old; a generation is closed when its last
 * reference goes.
 *
 * This file knows no scheduler and no binding: lua_load.h fills a
 * generation (the moonhttp module, the script, the router) from the top of
 * lua/, and what the layers above keep in it is freed through the
 * mh_gen_ops they hand to mh_gen_alloc.
 */
#include <ev.h>
#include <lua.h>
#include <stdbool.h>
#include <stdint.h>

#include "compress_filter.h"
#include "settings.h"
#include "dispatch.h"
#include "handler.h"
#include "lua_guard.h"
#include "router.h"
#include "shm_dict.h"

struct mh_task;
struct mh_lua_route;
struct mh_gen;

/*
 * What the serving process gives a generation: its loop and the few things
 * of the server Lua may see. Set by the worker (server/), read here; no
 * worker type is known below server/.
 */
struct mh_metrics;
struct mh_workpool;
struct mh_chan_endpoint;
struct mh_shm_once;
struct mh_req;
struct mh_gen_host {
    struct ev_loop *loop;
    struct mh_reload_stats *const *reload_stats; /* --dev: the last reload error, for a header */
    const struct mh_handler *metrics; /* what http.metrics_handler() serves; NULL: none */
    struct mh_metrics *metrics_table; /* task error counters; NULL: none */
    struct mh_workpool *workpool;     /* threads for C work off the loop (thread_pool); NULL: none */
    struct mh_chan_endpoint *channels; /* http.channel(); NULL: none */
    struct mh_shm_once *once;          /* leases of { once = true } jobs; NULL: each worker runs them */
    const uint32_t *once_epoch;        /* the start or reload this worker serves (shm_once.h) */
    int worker_id; /* http.worker_id(): the worker's slot, 1..workers (1 for a lone worker) */
    /* Every { once = true } on_start of g has ended here (lua_timer.c); NULL: nobody asks. */
    void (*once_started)(const struct mh_gen_host *h, struct mh_gen *g);
    /*
     * A timer callback, light thread, on_start function or `run` script
     * began (+1) or ended (-1): a stop waits for them. NULL: nobody counts.
     */
    void (*tasks_running)(const struct mh_gen_host *h, int delta);
    /* Calls fn for every request open in the serving process (a stop hook's walk). */
    void (*each_request)(const struct mh_gen_host *h, void (*fn)(struct mh_req *r, void *ud),
                         void *ud);
    /*
     * core.acme.install: cert/key (PEM files) become what new handshakes on
     * listener `index` (0-based in the listen list, an ACME one) get; open
     * connections keep theirs. 0, or -1 with err. NULL: no listeners here.
     */
    int (*tls_install)(const struct mh_gen_host *h, size_t index, const char *cert,
                       const char *key, char *err, size_t errlen);
};

/*
 * How far a generation has stopped (mh_gen_stop), a set of flags that are
 * only ever added:
 *
 * - ASKED: a stop was asked for; it still serves (shutdown_delay), but
 *   http.stopping() is true, so health checks fail and balancers move away.
 *   A drain under way ends within shutdown_timeout, as the stop's own.
 * - RETIRED: a reload in place replaced it; new requests go to the newer one.
 * - DRAINING: retired or stopped gracefully with a drain window
 *   (mh_gen_drain): its WebSockets, streams and streaming responses go on
 *   until they end or the window passes, and are then stopped one by one
 *   over the spread; http.draining() is true in it and each WebSocket's
 *   on_drain callback runs.
 * - STOPPING: it serves nothing new: streaming handlers, channel receives
 *   and background tasks hear "stopping", WebSockets close with 1001.
 *
 * Background tasks (timer callbacks, light threads, on_start) of a retired
 * generation hear "stopping" at once, drain or not: the new code runs its own.
 * Those of a generation a graceful stop drains run on (they may feed the
 * draining connections) until it stops.
 */
#define MH_GEN_ASKED    1u
#define MH_GEN_RETIRED  2u
#define MH_GEN_STOPPING 4u
#define MH_GEN_DRAINING 8u

/*
 * A binding's part of a stop: called by mh_gen_stop with the flags just
 * added (`added`; g->stop holds them all). Each binding that keeps
 * long-lived things (timers, subscriptions, tasks, requests' streams)
 * registers one when it opens (mh_gen_on_stop), so a stop or a reload
 * reaches them without the worker naming them.
 */
typedef void (*mh_gen_stop_fn)(struct mh_gen *g, unsigned added);
#define MH_GEN_MAX_STOP_HOOKS 8

/* Free lists of small Lua blocks (16..128 bytes, 16-byte classes): see lua_vm.c. */
#define MH_LUA_HEAP_CLASSES 8
struct mh_lua_heap {
    void *free[MH_LUA_HEAP_CLASSES];
    unsigned count[MH_LUA_HEAP_CLASSES];
};

/*
 * What the layers above plug into a generation. How they free what they
 * keep in it, called by mh_gen_free: before_close before lua_close (the
 * scheduler's pooled coroutines, which the Lua state still anchors),
 * after_close after it (the route handlers, which collected Lua values
 * pointed to). task_failed: what a task that raised or was cut by a guard
 * costs (lua_failure.c; the scheduler only reports it). Any may be NULL.
 */
struct mh_gen_ops {
    void (*before_close)(struct mh_gen *g);
    void (*after_close)(struct mh_gen *g);
    void (*task_failed)(struct mh_task *t, const char *trace, enum mh_guard_kind guard);
};

struct mh_gen {
    lua_State *L;
    const struct mh_gen_ops *ops;
    struct mh_lua_heap heap;
    struct mh_router *router;
    struct mh_router_builder *_builder; /* while the script loads */
    struct mh_config *config;
    struct ev_loop *loop;           /* set once serving (NULL: the default loop) */
    const struct mh_gen_host *host; /* set once serving */
    int refs;
    int not_found_ref; /* LUA_NOREF when not set */
    int method_not_allowed_ref;
    struct mh_handler_table handlers; /* the router's handler ids index this */
    struct mh_site site;              /* what dispatch routes on */
    struct mh_handler metrics_proxy;  /* http.metrics_handler(): forwards to host->metrics */
    struct mh_lua_route *_lua_routes;
    int req_mt_ref, res_mt_ref; /* the req and res metatables, by integer reference */
    int settings_ref;           /* http.server{} table */
    char settings_where[256];   /* "file:line:" of that http.server{} call */
    bool started;               /* registration is closed */
    unsigned once_starting;     /* { once = true } on_start tasks still running (lua_timer.c) */
    struct mh_task *free_tasks; /* coroutine pool */
    unsigned ntasks;
    bool wants_metrics;                    /* the script called http.metrics_handler() */
    const struct mh_shm_dicts *shared;     /* the server's shared dicts; NULL until serving */
    struct mh_compress_pool compress_pool; /* gzip filters of this generation's requests */
    /* A route's own compress option, by handler id (NULL: the server's setting). */
    struct mh_compress_conf **route_compress;
    int nroute_compress;         /* slots in route_compress */
    struct mh_task *_background; /* running timer callbacks, threads, on_start (lua_sched.c) */
    unsigned stop;          /* MH_GEN_ASKED | MH_GEN_RETIRED | MH_GEN_STOPPING, as reached */
    uint64_t number;        /* 0: the start's, then the reload that loaded it (metrics) */
    mh_gen_stop_fn _stop_hooks[MH_GEN_MAX_STOP_HOOKS]; /* in the order the bindings opened */
    int _nstop_hooks;
    ev_timer _retire_timer; /* retired: kills what is left of _background */
    /* MH_GEN_DRAINING: the window and spread it was given, and their clock (lua_handler.c). */
    double drain_window, drain_spread;
    double _drain_from, _drain_done; /* the spread began at; stopped up to (loop time) */
    uint64_t _drain_seed;            /* each request's moment in the spread */
    ev_timer _drain_timer;
    /* Tasks woken (mh_task_wake) and due to resume before the loop next blocks (lua_sched.c). */
    struct mh_task *_ready_head, *_ready_tail;
    ev_prepare _ready_prepare; /* resumes them */
    ev_idle _ready_idle;       /* keeps the loop from blocking while any are left */
};

/* The loop the generation serves on (the default loop until it serves, and for NULL). */
static inline struct ev_loop *mh_gen_loop(const struct mh_gen *g)
{
    return g && g->loop ? g->loop : EV_DEFAULT;
}

/*
 * A generation with a fresh, empty Lua state (no library opened yet) that
 * knows its generation (mh_gen_of), one reference held by the caller, and
 * an empty router builder. Sets lua_memory_limit from config. NULL when out
 * of memory.
 */
struct mh_gen *mh_gen_alloc(struct mh_config *config, const struct mh_gen_ops *ops);

/*
 * Closes the Lua state and frees the router, whatever the count (the ops'
 * hooks around lua_close): mh_gen_unref's last step.
 */
void mh_gen_free(struct mh_gen *g);

/* Inline: every request takes and drops two references. */
static inline void mh_gen_ref(struct mh_gen *g)
{
    g->refs++;
}

/* Drops a reference; the last one closes the Lua state and frees the router. */
static inline void mh_gen_unref(struct mh_gen *g)
{
    if (--g->refs == 0)
        mh_gen_free(g);
}

/*
 * Reseeds math.random from the kernel. A worker forked with the master's
 * generation would otherwise repeat its siblings' random sequence.
 */
void mh_gen_reseed(struct mh_gen *g);

/* Sets the serving host of g (the worker calls this for every generation it installs). */
void mh_gen_set_host(struct mh_gen *g, const struct mh_gen_host *host);

/*
 * Registers a binding's stop hook for g (once: a second registration of the
 * same function is ignored). Called from a binding's open function.
 */
void mh_gen_on_stop(struct mh_gen *g, mh_gen_stop_fn fn);

/*
 * The one stop entry of a generation: adds `flags` (MH_GEN_*) to g->stop
 * and runs every registered hook with those newly added, in registration
 * order. Flags g has already are not told again, so a stop after a retire
 * is harmless.
 */
void mh_gen_stop(struct mh_gen *g, unsigned flags);

/*
 * g drains (DRAINING, with `flags`: RETIRED by a reload, ASKED by a
 * graceful stop): its long-lived requests go on for `window` seconds, then
 * close one by one at random moments over `spread` seconds; then it stops
 * (STOPPING). 0 and 0: they stop at once.
 */
void mh_gen_drain(struct mh_gen *g, unsigned flags, double window, double spread);

/*
 * A graceful stop's drain fits in shutdown_timeout, so a stop's bound stays
 * what the operator set: the connections close over drain_spread (all of
 * shutdown_timeout when it is shorter) at its end, after a window of the rest.
 */
static inline double mh_stop_drain_spread(const struct mh_config *c)
{
    return c->drain_spread < c->shutdown_timeout ? c->drain_spread : c->shutdown_timeout;
}

/* http.draining(), ws:draining(): a reload or a graceful stop drains this code. */
static inline bool mh_gen_draining(const struct mh_gen *g)
{
    return (g->stop & MH_GEN_DRAINING) != 0;
}

/* http.stopping(): a stop was asked for, or a reload replaced this code. */
static inline bool mh_gen_stop_asked(const struct mh_gen *g)
{
    return g->stop != 0;
}

/* Streams, channel receives and background tasks of g hear "stopping". */
static inline bool mh_gen_stopping(const struct mh_gen *g)
{
    return (g->stop & MH_GEN_STOPPING) != 0;
}

/* The generation a Lua state belongs to (stored in its registry). */
struct mh_gen *mh_gen_of(lua_State *L);

/*
 * Pushes "msg\ntraceback" of coroutine co onto L, for logs.
 */
void mh_lua_traceback(lua_State *L, lua_State *co, const char *msg);

#endif
