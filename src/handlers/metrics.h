#ifndef MH_METRICS_H
#define MH_METRICS_H
/*
 * Metrics in the Prometheus text format: requests by route pattern and
 * status class, a latency histogram per pattern, open and idle connections,
 * workers, reloads and the last reload error.
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
#include <sys/types.h>

#include "buf.h"

struct mh_worker;
struct mh_reload_stats;

struct mh_metrics;

/* Maps the shared table; NULL on failure. Call before forking workers. */
struct mh_metrics *mh_metrics_new(void);
void mh_metrics_free(struct mh_metrics *m);

/* Reload counters, kept in the shared mapping so workers forked later see the master's. */
struct mh_reload_stats *mh_metrics_reload_stats(struct mh_metrics *m);

/* Counts one finished request. pattern NULL: no route matched. */
void mh_metrics_record(struct mh_metrics *m, const char *pattern, int status, double seconds);

/* What a guard stopped (lua_guard.h, master.c), counted in moonhttp_guard_events_total. */
enum mh_metrics_guard {
    MH_METRICS_CPU_LIMIT,    /* a task got "cpu limit exceeded" */
    MH_METRICS_MEMORY_LIMIT, /* a task failed on lua_memory_limit */
    MH_METRICS_STALL,        /* the master killed a stalled worker */
    MH_METRICS_NGUARDS
};
void mh_metrics_count_guard(struct mh_metrics *m, enum mh_metrics_guard what);

/* A worker's connection gauges; a worker that exited is forgotten by its master. */
void mh_metrics_publish_conns(struct mh_metrics *m, pid_t pid, size_t open, size_t idle);
void mh_metrics_forget_worker(struct mh_metrics *m, pid_t pid);

/* Appends the exposition text to out (publishing w's own gauges first). -1 on OOM. */
int mh_metrics_render(struct mh_metrics *m, struct mh_worker *w, struct mh_buf *out);

/*
 * Serves the metrics on an extra listening socket of worker w: any GET gets
 * the exposition, then the connection closes. Takes fd (shared by workers).
 */
struct mh_metrics_server *mh_metrics_server_start(struct mh_worker *w, int fd);
/* Stops accepting (graceful stop); scrapes in progress finish. */
void mh_metrics_server_close_listener(struct mh_metrics_server *s);
void mh_metrics_server_free(struct mh_metrics_server *s);

#endif
