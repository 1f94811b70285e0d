#ifndef MH_WORKER_H
#define MH_WORKER_H
/*
 * One worker: an event loop, its listeners, its connections and the Lua
 * generation that serves them. Everything a connection or a handler needs is
 * reached from here; nothing is process-global but the signal flag.
 */
#include <ev.h>
#include <stdbool.h>
#include <time.h>

#include "buf.h"
#include "config.h"
#include "listener.h"

struct mh_conn;
struct mh_gen;

/* An intrusive doubly-linked list of connections (idle or active). */
struct mh_conn_list {
    struct mh_conn *head;
    size_t n;
};

struct mh_worker {
    struct ev_loop *loop;
    struct mh_config *config;
    struct mh_gen *gen; /* newest generation: new requests go here */

    struct mh_listener listeners[MH_MAX_LISTEN];
    size_t nlisteners;
    bool accept_paused;
    int reserve_fd; /* spare descriptor given up on EMFILE */

    size_t nconns;                  /* open connections */
    struct mh_conn_list idle;       /* waiting for a request */
    struct mh_conn_list active;     /* reading, handling or writing */
    struct mh_conn *free_conns;     /* pool of closed connection objects */
    struct mh_conn *pending_writes; /* output to flush before the loop sleeps */
    struct mh_conn *closed;         /* closed, freed when unreferenced */
    struct mh_buf_pool bufs;

    ev_prepare prepare; /* flushes pending writes, frees closed connections */
    ev_signal sigterm, sigint;
    ev_timer shutdown_timer;
    bool shutting_down;
    int exit_code;

    time_t date_sec; /* second the cached Date line is for */
    char date_line[64];
    size_t date_len;
};

/*
 * Sets up a worker on `loop` with generation `gen` (the worker takes a
 * reference) and opens the configured listeners. Returns 0 or -1 with err.
 */
int mh_worker_init(struct mh_worker *w, struct ev_loop *loop, struct mh_config *config,
                   struct mh_gen *gen, char *err, size_t errlen);
/* Runs the loop until a graceful stop completes; returns the exit code. */
int mh_worker_run(struct mh_worker *w);
void mh_worker_destroy(struct mh_worker *w);

/* Begins a graceful stop: no new connections, idle ones closed, active ones finish. */
void mh_worker_shutdown(struct mh_worker *w);

void mh_worker_pause_accept(struct mh_worker *w);
/* Resumes accepting if it was paused and there is room again. */
void mh_worker_maybe_resume_accept(struct mh_worker *w);

/* "Date: <IMF-fixdate>\r\n", regenerated at most once a second. */
const char *mh_worker_date(struct mh_worker *w, size_t *len);

#endif
