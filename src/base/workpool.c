#include "workpool.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How much nicer than the loop thread the pool threads are (see pool_thread). */
#define MH_WORKPOOL_NICE 19

struct mh_workpool {
    struct ev_loop *loop;
    ev_async async; /* a thread finished a job: run the done callbacks */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct mh_work *queue, *queue_tail; /* waiting for a thread */
    struct mh_work *finished;           /* run, waiting for done() on the loop */
    pthread_t *threads;
    unsigned nthreads, max_threads, idle;
    bool stopping;
};

static void *pool_thread(void *arg)
{
    struct mh_workpool *p = arg;
    /*
     * Below the loop in the scheduler's eyes: when both want the same core,
     * the loop (every other request) gets nearly all of it (CFS weights 1024
     * vs 15 at nice +19) and the job what the loop leaves, which under real
     * load is plenty (20 logins/s beside 70k requests/s on one core); an
     * idle core runs jobs at full speed. At the loop's priority a continuous
     * login halved a one-core worker's rate (bench/password.sh).
     */
    int nice = getpriority(PRIO_PROCESS, 0) + MH_WORKPOOL_NICE;
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice > 19 ? 19 : nice) < 0) {
        /* not allowed to change it (a restricted container): run at the loop's priority */
    }
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->queue && !p->stopping) {
            p->idle++;
            pthread_cond_wait(&p->cv, &p->mu);
            p->idle--;
        }
        if (p->stopping)
            break;
        struct mh_work *w = p->queue;
        p->queue = w->_next;
        if (!p->queue)
            p->queue_tail = NULL;
        pthread_mutex_unlock(&p->mu);
        w->run(w);
        pthread_mutex_lock(&p->mu);
        w->_next = p->finished;
        p->finished = w;
        ev_async_send(p->loop, &p->async);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* On the loop: done() for every finished job, oldest first. */
static void on_async(struct ev_loop *loop, ev_async *a, int revents)
{
    struct mh_workpool *p = a->data;
    (void)loop;
    (void)revents;
    pthread_mutex_lock(&p->mu);
    struct mh_work *list = p->finished;
    p->finished = NULL;
    pthread_mutex_unlock(&p->mu);
    struct mh_work *ordered = NULL; /* the list was pushed newest first */
    while (list) {
        struct mh_work *next = list->_next;
        list->_next = ordered;
        ordered = list;
        list = next;
    }
    while (ordered) {
        struct mh_work *next = ordered->_next;
        ordered->done(ordered);
        ordered = next;
    }
}

struct mh_workpool *mh_workpool_new(struct ev_loop *loop, unsigned nthreads)
{
    struct mh_workpool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->max_threads = nthreads ? nthreads : 1;
    p->threads = calloc(p->max_threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    p->loop = loop;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    ev_async_init(&p->async, on_async);
    p->async.data = p;
    ev_async_start(loop, &p->async);
    return p;
}

/* With p->mu held: one more thread, its signals blocked. Returns 0 or -1. */
static int start_thread(struct mh_workpool *p)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&p->threads[p->nthreads], NULL, pool_thread, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0)
        return -1;
    p->nthreads++;
    return 0;
}

int mh_workpool_submit(struct mh_workpool *p, struct mh_work *w)
{
    pthread_mutex_lock(&p->mu);
    unsigned queued = 0;
    for (struct mh_work *q = p->queue; q; q = q->_next)
        queued++;
    if (queued + 1 > p->idle && p->nthreads < p->max_threads && start_thread(p) < 0 &&
        p->nthreads == 0) {
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    w->_next = NULL;
    if (p->queue_tail)
        p->queue_tail->_next = w;
    else
        p->queue = w;
    p->queue_tail = w;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

void mh_workpool_free(struct mh_workpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    /* Every job ends with its done(), run or not: a job whose waiter is gone frees itself there. */
    on_async(p->loop, &p->async, 0);
    while (p->queue) {
        struct mh_work *w = p->queue;
        p->queue = w->_next;
        w->done(w);
    }
    ev_async_stop(p->loop, &p->async);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p);
}
