#ifndef MH_METRICS_H
#define MH_METRICS_H
/*
 * Metrics in the Prometheus text format: requests by route pattern and
 * status class, a latency histogram per pattern, open and idle connections,
 * workers, reloads and the last reload error; then the app's own
 * (app_metrics.h).
 *
 * The counters live in one shared anonymous mapping created before any fork,
 * so every worker adds to the same table with relaxed atomics and any worker
 * can answer a scrape with the whole server's numbers (a scrape lands on one
 * worker; per-worker tables would make the counters jump between scrapes).
 * Patterns get slots in an open-addressed table claimed with compare-and-swap;
 * when it is full, further patterns count under pattern="(other)".
 * Connection gauges are published by each worker into its own slot twice a
 * second, so they may be up to half a second old for the other workers.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "handler.h"

struct mh_http_ctx;

/* Reloads of the app code, for logs and metrics. A worker forked by the master starts with a copy
 * of the master's. */
struct mh_reload_stats {
    unsigned long reloads;  /* successful */
    unsigned long failures; /* failed: the previous code kept serving */
    bool last_failed;
    char last_error[512]; /* first line of the last failure, "" if none */
};

/* Failed reload: counts it and keeps the first line of err for metrics. */
void mh_reload_stats_failed(struct mh_reload_stats *st, const char *err);

struct mh_metrics;

/* Maps the shared table; NULL on failure. Call before forking workers. */
struct mh_metrics *mh_metrics_new(void);
void mh_metrics_free(struct mh_metrics *m);

/* The app's own metrics (app_metrics.h), mapped with these and rendered after them. */
struct mh_app_metrics *mh_metrics_app(struct mh_metrics *m);

/* Reload counters, kept in the shared mapping so workers forked later see the master's. */
struct mh_reload_stats *mh_metrics_reload_stats(struct mh_metrics *m);

/* Tasks other than handlers whose function failed (lua_sched.c), by kind. */
enum mh_metrics_task {
    MH_METRICS_TIMER,
    MH_METRICS_ON_START,
    MH_METRICS_THREAD,
    MH_METRICS_TASK_KINDS
};
void mh_metrics_count_task_error(struct mh_metrics *m, enum mh_metrics_task kind);

/* Counts one finished request. pattern NULL: no route matched. */
void mh_metrics_record(struct mh_metrics *m, const char *pattern, int status, double seconds);

/* Requests by protocol version (moonhttp_requests_by_protocol_total). */
enum mh_metrics_proto {
    MH_METRICS_HTTP10,
    MH_METRICS_HTTP11,
    MH_METRICS_HTTP2,
    MH_METRICS_NPROTOS
};
void mh_metrics_count_proto(struct mh_metrics *m, enum mh_metrics_proto proto);

/* What a guard stopped (lua_guard.h, master.c), counted in moonhttp_guard_events_total. */
enum mh_metrics_guard {
    MH_METRICS_CPU_LIMIT,    /* a task got "cpu limit exceeded" */
    MH_METRICS_MEMORY_LIMIT, /* a task failed on lua_memory_limit */
    MH_METRICS_STALL,        /* the master killed a stalled worker */
    MH_METRICS_LOOP_BLOCKED, /* a task held its loop past loop_block_warn */
    MH_METRICS_NGUARDS
};
void mh_metrics_count_guard(struct mh_metrics *m, enum mh_metrics_guard what);

/*
 * A worker's connection gauges; a worker that exited is forgotten by its
 * master (its gauges and its shares of the app's per_worker gauges go).
 */
void mh_metrics_publish_conns(struct mh_metrics *m, pid_t pid, size_t open, size_t idle);
void mh_metrics_forget_worker(struct mh_metrics *m, pid_t pid);

/*
 * Connections a worker keeps open for code a reload replaced (drain_timeout),
 * by that code's generation (0: the start, then one per reload): at most
 * MH_METRICS_DRAIN_GENS generations per worker, the gauge
 * moonhttp_connections_draining{generation}.
 */
#define MH_METRICS_DRAIN_GENS 4
struct mh_metrics_draining {
    uint64_t generation;
    uint64_t conns;
};
void mh_metrics_publish_draining(struct mh_metrics *m, pid_t pid,
                                 const struct mh_metrics_draining *d, size_t n);

/*
 * Appends the exposition text to out, publishing the calling worker's own
 * connection gauges first (so a scrape sees them fresh). -1 on OOM.
 */
int mh_metrics_render(struct mh_metrics *m, size_t own_open, size_t own_idle, struct mh_buf *out);

/*
 * The metrics endpoint as an ordinary C handler, served by the ordinary
 * connection code: the metrics listener's root handler, and what
 * http.metrics_handler() mounts on a route. GET and HEAD get the exposition,
 * other methods 405. http (may be NULL) gives this worker's gauges.
 */
struct mh_metrics_handler {
    struct mh_handler base;
    struct mh_metrics *m;
    const struct mh_http_ctx *http;
};
void mh_metrics_handler_init(struct mh_metrics_handler *h, struct mh_metrics *m,
                             const struct mh_http_ctx *http);

#endif
