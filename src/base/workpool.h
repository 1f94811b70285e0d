#ifndef MH_WORKPOOL_H
#define MH_WORKPOOL_H
/*
 * A few threads per worker for C work that would block the event loop
 * (password hashing): a job's run() goes on a pool thread, then its done()
 * on the loop, from an ev_async, never inside the caller's own call. The
 * threads start on the first jobs that find none idle (so a process that
 * forks workers starts none of its own) and block every signal, so signals
 * still reach the loop thread.
 *
 * A job is owned by its submitter: it must stay valid until done() has been
 * called. Whoever stops waiting for it (a task that was killed) marks that
 * in the job and lets done() free it; the pool never frees a job.
 */
#include <ev.h>
#include <stdbool.h>

struct mh_work {
    void (*run)(struct mh_work *w);  /* on a pool thread: no Lua, no loop */
    void (*done)(struct mh_work *w); /* on the loop thread, after run */
    struct mh_work *_next;
};

struct mh_workpool;

/* A pool of at most nthreads threads (at least 1) whose results come back on loop. */
struct mh_workpool *mh_workpool_new(struct ev_loop *loop, unsigned nthreads);

/*
 * Queues w. Returns 0, or -1 when no thread could be started at all (w is
 * not queued; the caller may run the work itself or fail).
 */
int mh_workpool_submit(struct mh_workpool *p, struct mh_work *w);

/*
 * Stops the threads after the jobs they are running (queued ones never
 * run), calls done() for every job still held, run or not, and frees the
 * pool. The loop no longer runs then: a done() whose waiter is gone must
 * free its job; one still waited on finds no loop to resume it.
 */
void mh_workpool_free(struct mh_workpool *p);

#endif
