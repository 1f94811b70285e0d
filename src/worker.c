#include "worker.h"

#include "conn.h"
#include "log.h"
#include "lua_vm.h"
#include "tls.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

const char *mh_worker_date(struct mh_worker *w, size_t *len)
{
    time_t now = (time_t)ev_now(w->loop);
    if (now != w->date_sec) {
        struct tm tm;
        gmtime_r(&now, &tm);
        w->date_len = strftime(w->date_line, sizeof w->date_line,
                               "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
        w->date_sec = now;
    }
    *len = w->date_len;
    return w->date_line;
}

/*
 * Runs once per loop iteration, before the loop sleeps: writes every
 * connection's queued output (so responses produced in one iteration,
 * pipelined or not, leave in one write each) and frees closed connections
 * that nothing references any more.
 */
static void on_prepare(struct ev_loop *loop, ev_prepare *p, int revents)
{
    struct mh_worker *w = p->data;
    (void)loop;
    (void)revents;
    while (w->pending_writes) {
        struct mh_conn *c = w->pending_writes;
        w->pending_writes = c->next_pending;
        c->in_pending = false;
        if (!c->closed)
            mh_conn_flush(c);
        mh_conn_unref(c);
    }
    struct mh_conn **pp = &w->closed;
    while (*pp) {
        struct mh_conn *c = *pp;
        if (c->refs == 1) {
            *pp = c->next_closed;
            c->refs = 0;
            mh_conn_destroy(c);
        } else {
            pp = &c->next_closed;
        }
    }
    if (w->shutting_down && w->nconns == 0 && !w->closed)
        ev_break(w->loop, EVBREAK_ALL);
}

static void on_shutdown_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_worker *w = t->data;
    (void)loop;
    (void)revents;
    mh_log(MH_LOG_WARN, "shutdown timeout: closing %zu connections still open", w->nconns);
    while (w->active.head)
        mh_conn_close(w->active.head);
    while (w->idle.head)
        mh_conn_close(w->idle.head);
}

void mh_worker_shutdown(struct mh_worker *w)
{
    if (w->shutting_down)
        return;
    w->shutting_down = true;
    mh_log(MH_LOG_INFO, "graceful stop: %zu connections open", w->nconns);
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_close(&w->listeners[i]);
    w->nlisteners = 0;
    while (w->idle.head)
        mh_conn_close(w->idle.head);
    ev_timer_init(&w->shutdown_timer, on_shutdown_timeout, w->config->shutdown_timeout, 0.);
    w->shutdown_timer.data = w;
    ev_timer_start(w->loop, &w->shutdown_timer);
    ev_unref(w->loop); /* the timer alone must not keep the loop running */
}

static void on_signal(struct ev_loop *loop, ev_signal *s, int revents)
{
    struct mh_worker *w = s->data;
    (void)loop;
    (void)revents;
    mh_worker_shutdown(w);
}

void mh_worker_pause_accept(struct mh_worker *w)
{
    if (w->accept_paused)
        return;
    w->accept_paused = true;
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_pause(&w->listeners[i]);
}

void mh_worker_maybe_resume_accept(struct mh_worker *w)
{
    if (!w->accept_paused || w->shutting_down || w->nconns >= (size_t)w->config->max_connections)
        return;
    w->accept_paused = false;
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_resume(&w->listeners[i]);
}

/* Many idle keep-alive connections need many descriptors: take what the hard limit allows. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int mh_worker_init(struct mh_worker *w, struct ev_loop *loop, struct mh_config *config,
                   struct mh_gen *gen, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->loop = loop;
    w->config = config;
    w->gen = gen;
    mh_gen_ref(gen);
    gen->worker = w;
    w->date_sec = -1;
    mh_buf_pool_init(&w->bufs, 1024);
    raise_fd_limit();
    w->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    for (size_t i = 0; i < config->nlisten; i++) {
        if (mh_listener_open(&w->listeners[i], config->listen[i], (int)config->backlog, err,
                             errlen)) {
            goto fail;
        }
        w->nlisteners++;
    }
    if (mh_tls_worker_init(w, err, errlen) < 0)
        goto fail;
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_start(&w->listeners[i], w);
    ev_prepare_init(&w->prepare, on_prepare);
    w->prepare.data = w;
    ev_prepare_start(loop, &w->prepare);
    ev_unref(loop); /* the prepare watcher alone must not keep the loop alive */
    signal(SIGPIPE, SIG_IGN);
    ev_signal_init(&w->sigterm, on_signal, SIGTERM);
    ev_signal_init(&w->sigint, on_signal, SIGINT);
    w->sigterm.data = w->sigint.data = w;
    ev_signal_start(loop, &w->sigterm);
    ev_signal_start(loop, &w->sigint);
    ev_unref(loop);
    ev_unref(loop);
    return 0;
fail:
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_close(&w->listeners[i]);
    if (w->reserve_fd >= 0)
        close(w->reserve_fd);
    mh_buf_pool_destroy(&w->bufs);
    gen->worker = NULL;
    mh_gen_unref(gen); /* the caller still holds its own reference */
    return -1;
}

int mh_worker_run(struct mh_worker *w)
{
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_log(MH_LOG_INFO, "listening on %s (port %d)", w->listeners[i].addr,
               mh_listener_port(&w->listeners[i]));
    ev_run(w->loop, 0);
    return w->exit_code;
}

void mh_worker_destroy(struct mh_worker *w)
{
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_close(&w->listeners[i]);
    while (w->active.head)
        mh_conn_close(w->active.head);
    while (w->idle.head)
        mh_conn_close(w->idle.head);
    while (w->closed) {
        struct mh_conn *c = w->closed;
        w->closed = c->next_closed;
        mh_conn_destroy(c);
    }
    while (w->free_conns) {
        struct mh_conn *c = w->free_conns;
        w->free_conns = c->next;
        mh_request_free(&c->req);
        mh_response_free(&c->res);
        mh_buf_free(&c->body);
        free(c);
    }
    mh_buf_pool_destroy(&w->bufs);
    if (w->reserve_fd >= 0)
        close(w->reserve_fd);
    w->gen->worker = NULL;
    mh_gen_unref(w->gen);
}
