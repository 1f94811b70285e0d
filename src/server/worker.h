#ifndef MH_WORKER_H
#define MH_WORKER_H
/*
 * One worker: an event loop, its listeners, its connections and the Lua
 * generation that serves them. The worker hands each module below it the
 * narrow thing it needs (the HTTP limits and connection context, an
 * acceptor for the listeners, a host for the Lua generations); nothing
 * below server/ includes this header. Nothing is process-global but the
 * signal flag.
 */
#include <ev.h>
#include <stdbool.h>
#include <time.h>

#include "acme_certs.h"
#include "acme_challenge.h"
#include "buf.h"
#include "channel.h"
#include "config.h"
#include "conn.h"
#include "listener.h"
#include "lua_handler.h"
#include "lua_vm.h"
#include "metrics.h"

/* Exit status of a worker whose loop ended without its stopping (EX_SOFTWARE). */
#define MH_EXIT_LOOP_ENDED 70

struct mh_req;
struct mh_gen;
struct mh_deps;
struct mh_devwatch;
struct mh_access_log;
struct mh_metrics;
struct mh_heartbeat;
struct mh_notify;

struct mh_worker {
    struct ev_loop *loop;
    struct mh_config *config;
    struct mh_gen *gen; /* newest generation: new requests go here */

    struct mh_listener listeners[MH_MAX_LISTEN];
    size_t nlisteners;
    bool accept_paused;
    bool awaiting_once;  /* not accepting until its once on_start functions ran (worker.c) */
    ev_timer once_timer; /* once_start_timeout */
    int ready_fd;        /* the master's pipe: this pid is written once serving; -1: none */
    struct mh_acceptor acceptor;         /* shared by the listeners */
    struct mh_listener metrics_listener; /* fd -1: none */

    struct mh_http_limits limits; /* from config, for the connections */
    struct mh_http_ctx http;      /* the connections */
    struct mh_buf_pool bufs;
    size_t conns_peak;       /* the most connections open since memory was last given back */
    ev_timer trim_timer;     /* gives memory back after a drop (worker.c, after_drop) */
    struct mh_lua_app app;   /* root handler of the listeners: newest generation */
    struct mh_gen_host host; /* what the generations see of the worker */
    struct mh_metrics_handler metrics_handler;
    struct mh_acme_challenge acme_challenge; /* HTTP-01 in front of app on plain listeners */
    struct mh_acme_certs acme_certs;         /* installed by core.acme.install */

    ev_prepare prepare; /* flushes pending writes, frees closed connections */
    ev_signal sigterm, sigint, sighup, sigusr2, sigretire;
    ev_timer shutdown_timer;
    ev_timer delay_timer; /* shutdown_delay */
    ev_timer idle_close_timer;
    bool stopping;             /* a stop was asked for: http.stopping() is true */
    unsigned background_tasks; /* light threads, timer callbacks, on_start: a stop waits for them */
    bool shutting_down;        /* not accepting; finishing what is in flight */
    bool draining;             /* ...replaced by a reload: its long-lived requests drain */
    bool graceful_stop;        /* SIGTERM's stop began (mh_worker_shutdown) */
    bool sigterm_seen;         /* a second SIGTERM stops at once */
    bool script_done;          /* `run`: the script's task ended; leave once nothing else runs */
    bool leaving;              /* the worker ended its loop itself (see run_loop in worker.c) */
    int exit_code;

    struct mh_reload_stats *reload_stats; /* shared with the master once ops are set */
    struct mh_reload_stats _own_reload_stats;
    struct mh_devwatch *devwatch; /* --dev only */
    /* Per-request observers; `observe` is their one test on the hot path. */
    bool observe;
    bool log_requests; /* --dev: one info line per request */
    bool inherited;    /* serves sockets of a master */
    struct mh_access_log *access_log;
    struct mh_metrics *metrics;     /* shared counters; NULL until ops are set */
    struct mh_shm_dicts *shared;    /* shared dicts; NULL until ops are set */
    bool record_metrics;            /* a metrics listener or http.metrics_handler() exists */
    ev_timer metrics_timer;         /* publishes this worker's connection gauges */
    struct mh_heartbeat *heartbeat; /* slot in the master's table, or NULL (no master) */
    struct mh_chan_endpoint channels; /* this process's side of http.channel() */
    uint32_t once_epoch;              /* the start or reload it serves, for { once = true } jobs */
    struct mh_notify *notify;       /* systemd's socket, when this is the whole server */
    ev_timer watchdog_timer;        /* WATCHDOG=1 while the loop turns (no master) */
};

/* What main sets up once per process tree (before any fork) for every worker. */
struct mh_ops {
    int access_log_fd;           /* -1: no access log */
    int access_log_format;       /* enum mh_access_format */
    struct mh_metrics *metrics;  /* shared counters and reload stats */
    int metrics_fd;              /* listening socket for http.server{metrics=...}, or -1 */
    bool metrics_on;             /* record per-request metrics */
    struct mh_shm_dicts *shared; /* http.server{ shared = ... } zones, mapped before any fork */
    struct mh_shm_chan *channels; /* http.channel()'s zone, mapped before any fork; NULL: none */
    struct mh_shm_once *once;     /* leases of { once = true } jobs, mapped before any fork */
    struct mh_notify *notify;    /* systemd notify socket (the master's, or a lone worker's) */
};

/* Attaches the access log, shared metrics and the metrics listener to a worker. */
void mh_worker_set_ops(struct mh_worker *w, const struct mh_ops *ops);

/*
 * Sets up a worker on `loop` with generation `gen` (the worker takes a
 * reference) and opens the configured listeners. Returns 0 or -1 with err.
 */
int mh_worker_init(struct mh_worker *w, struct ev_loop *loop, struct mh_config *config,
                   struct mh_gen *gen, char *err, size_t errlen);
/*
 * Like mh_worker_init, but serves the already listening sockets `fds` (one per
 * config->listen entry, inherited from the master) instead of opening its own;
 * the worker closes its copies when it stops. SIGHUP is left to the master.
 */
int mh_worker_init_inherited(struct mh_worker *w, struct ev_loop *loop, struct mh_config *config,
                             struct mh_gen *gen, const int *fds, char *err, size_t errlen);

/* --dev: reloads when a file of deps (those of the first load) is saved. */
void mh_worker_watch(struct mh_worker *w, const struct mh_deps *deps);

/*
 * Loads the script again into a new generation and, if that works, makes it
 * the one new requests use; requests in flight finish on the old one, freed
 * with its last request. A failed load (syntax or load-time error, route
 * conflict) is logged with file:line and changes nothing. Returns 0 or -1.
 */
int mh_worker_reload(struct mh_worker *w, const char *why);

/*
 * Runs the loop until a graceful stop completes; returns the exit code.
 * Serving, it runs under the guards of lua_guard.h (CPU limit, forced end of
 * a stop, heartbeat). It accepts, and reports ready (ready_fd, systemd),
 * only once every { once = true } on_start function of its generation has
 * ended here, that is, the job ran in this worker or another one (or failed
 * there), or after once_start_timeout.
 */
int mh_worker_run(struct mh_worker *w);
/*
 * `moonhttp run`: runs the generation's script as a task; the loop ends once
 * it and every task it started have ended. Returns the script's exit status.
 */
int mh_worker_run_script(struct mh_worker *w);
void mh_worker_destroy(struct mh_worker *w);

/*
 * Begins a graceful stop (SIGTERM, after shutdown_delay in which it still
 * serves with http.stopping() true; SIGUSR2, the master's death, without
 * the delay): listeners close, idle connections go, requests in flight
 * finish, and long-lived ones (WebSockets, SSE, streaming responses) drain
 * as at a reload, within shutdown_timeout (mh_stop_drain_spread): they go
 * on with http.draining() true and ws:on_drain told, then close over
 * drain_spread, each at its own moment. A reload's drain under way in this
 * worker ends within the same time. It all ends within
 * mh_worker_stop_seconds().
 */
void mh_worker_shutdown(struct mh_worker *w);

/*
 * SIGINT, or a second SIGTERM: a stop at once, no delay, no drain.
 * WebSockets close with 1001, streams and waits hear "stopping", requests
 * in flight get shutdown_timeout.
 */
void mh_worker_stop_now(struct mh_worker *w);

/* Seconds the closing handshakes of a stop's last connections get before they are cut. */
#define MH_STOP_CLOSE_GRACE 0.5

/* The longest a graceful stop takes once it began (after shutdown_delay): see above. */
static inline double mh_worker_stop_seconds(const struct mh_config *c)
{
    return c->shutdown_timeout + MH_STOP_CLOSE_GRACE;
}

/*
 * A reload replaced this worker (the master's MH_SIGNAL_RETIRE): it stops
 * accepting, and its code drains (mh_gen_drain: WebSockets and streams go
 * on for drain_timeout, then close over drain_spread); it leaves when its
 * last connection has ended. A stop meanwhile ends the drain.
 */
void mh_worker_retire(struct mh_worker *w);

void mh_worker_pause_accept(struct mh_worker *w);
/* Resumes accepting if it was paused and there is room again. */
void mh_worker_maybe_resume_accept(struct mh_worker *w);

#endif
