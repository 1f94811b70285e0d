#include "worker.h"

#include "shared_zones.h"

#include "access_log.h"
#include "conn.h"
#include "devwatch.h"
#include "log.h"
#include "lua_sched.h"
#include "lua_vm.h"
#include "metrics.h"
#include "tls.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Seconds idle keep-alive connections may still bring a request after a stop begins. */
#define MH_IDLE_CLOSE_GRACE 0.5

const char *mh_worker_date(struct mh_worker *w, size_t *len)
{
    time_t now = (time_t)ev_now(w->loop);
    if (now != w->date_sec) {
        struct tm tm;
        gmtime_r(&now, &tm);
        w->date_len =
            strftime(w->date_line, sizeof w->date_line, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
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
    (void)revents;
    ev_ref(loop); /* balances the ev_unref in mh_worker_shutdown: this timer has stopped */
    mh_log(MH_LOG_WARN, "shutdown timeout: closing %zu connections still open", w->nconns);
    while (w->active.head)
        mh_conn_close(w->active.head);
    while (w->idle.head)
        mh_conn_close(w->idle.head);
    /* Handlers still waiting (on a timer, say) are abandoned: the process is leaving. */
    ev_break(loop, EVBREAK_ALL);
}

static void on_idle_close(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_worker *w = t->data;
    (void)loop;
    (void)revents;
    while (w->idle.head)
        mh_conn_close(w->idle.head);
}

void mh_worker_shutdown(struct mh_worker *w)
{
    if (w->shutting_down)
        return;
    w->shutting_down = w->stopping = true;
    if (ev_is_active(&w->delay_timer))
        ev_timer_stop(w->loop, &w->delay_timer);
    mh_log(MH_LOG_INFO, "graceful stop: %zu connections open", w->nconns);
    /* Streaming handlers hear "stopping" from their next wait, so their loops end now. */
    for (struct mh_conn *c = w->active.head; c; c = c->next)
        if (c->task)
            mh_task_on_stopping(c->task);
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_close(&w->listeners[i]);
    w->nlisteners = 0;
    mh_metrics_server_close_listener(w->metrics_server);
    /*
     * Closing an idle keep-alive connection races with a request the client
     * may be sending on it right now: that request would meet a reset. So
     * idle connections get a short grace, in which a request is answered
     * with "Connection: close" (conn.c closes it after), then the rest go.
     */
    if (w->idle.head) {
        ev_timer_init(&w->idle_close_timer, on_idle_close, MH_IDLE_CLOSE_GRACE, 0.);
        w->idle_close_timer.data = w;
        ev_timer_start(w->loop, &w->idle_close_timer);
    }
    ev_timer_init(&w->shutdown_timer, on_shutdown_timeout, w->config->shutdown_timeout, 0.);
    w->shutdown_timer.data = w;
    ev_timer_start(w->loop, &w->shutdown_timer);
    ev_unref(w->loop); /* the timer alone must not keep the loop running */
}

static void on_delay_done(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    mh_worker_shutdown(t->data);
}

static void on_signal(struct ev_loop *loop, ev_signal *s, int revents)
{
    struct mh_worker *w = s->data;
    (void)revents;
    if (s->signum == SIGUSR2 || w->stopping || w->config->shutdown_delay <= 0) {
        mh_worker_shutdown(w);
        return;
    }
    w->stopping = true;
    mh_log(MH_LOG_INFO, "stopping in %g s: still serving, http.stopping() is true",
           w->config->shutdown_delay);
    ev_timer_init(&w->delay_timer, on_delay_done, w->config->shutdown_delay, 0.);
    w->delay_timer.data = w;
    ev_timer_start(loop, &w->delay_timer);
}

static void on_sighup(struct ev_loop *loop, ev_signal *s, int revents)
{
    (void)loop;
    (void)revents;
    mh_worker_reload(s->data, "SIGHUP");
}

void mh_reload_stats_failed(struct mh_reload_stats *st, const char *err)
{
    st->failures++;
    st->last_failed = true;
    /* The first line of a load error (file:line: message) labels the metric; logs get it all. */
    size_t n = strcspn(err, "\n");
    if (n >= sizeof st->last_error)
        n = sizeof st->last_error - 1;
    memcpy(st->last_error, err, n);
    st->last_error[n] = 0;
}

int mh_worker_reload(struct mh_worker *w, const char *why)
{
    char err[4096];
    struct mh_deps deps = {0};
    ev_tstamp t0 = ev_time();
    struct mh_gen *g = mh_gen_load(w->config, true, w->devwatch ? &deps : NULL, err, sizeof err);
    if (w->devwatch)
        mh_devwatch_update(w->devwatch, &deps, g != NULL);
    mh_deps_free(&deps);
    struct mh_reload_stats *st = w->reload_stats;
    if (!g) {
        mh_reload_stats_failed(st, err);
        mh_log(MH_LOG_ERROR, "reload (%s) failed; the previous code keeps serving: %s", why, err);
        return -1;
    }
    g->worker = w;
    if (w->shared)
        mh_shared_zones_reload(w->shared, g);
    if (g->wants_metrics && w->metrics && !w->record_metrics)
        w->record_metrics = w->observe = true;
    struct mh_gen *old = w->gen;
    w->gen = g; /* the reference mh_gen_load returned is the worker's now */
    /* old->worker stays set: requests in flight on it still need the loop. */
    mh_gen_unref(old);
    st->reloads++;
    st->last_failed = false;
    /* Certificates are read again too; open connections keep the ones they started with. */
    if (mh_tls_worker_reload(w, err, sizeof err) < 0)
        mh_log(MH_LOG_ERROR, "reload (%s): certificates not reloaded, the previous ones stay: %s",
               why, err);
    mh_log(MH_LOG_INFO, "reloaded (%s) in %.1f ms: %zu routes", why, (ev_time() - t0) * 1000,
           mh_router_size(g->router));
    return 0;
}

void mh_worker_watch(struct mh_worker *w, const struct mh_deps *deps)
{
    if (!w->devwatch)
        w->devwatch = mh_devwatch_start(w, deps);
}

void mh_worker_observe(struct mh_worker *w, struct mh_conn *c)
{
    double seconds = ev_time() - c->started;
    if (w->record_metrics)
        mh_metrics_record(w->metrics, c->req.route ? mh_route_pattern(c->req.route) : NULL,
                          c->res.status, seconds);
    if (w->access_log)
        mh_access_log_request(w->access_log, c, seconds);
    if (w->log_requests)
        mh_log(MH_LOG_INFO, "%s %.*s -> %d (%.1f ms)",
               llhttp_method_name((llhttp_method_t)c->req.method), (int)c->req.target.len,
               mh_conn_head(c) + c->req.target.off, c->res.status, seconds * 1000);
}

static void on_metrics_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_worker *w = t->data;
    (void)loop;
    (void)revents;
    mh_metrics_publish_conns(w->metrics, getpid(), w->nconns, w->idle.n);
}

void mh_worker_set_ops(struct mh_worker *w, const struct mh_ops *ops)
{
    if (ops->access_log_fd >= 0)
        w->access_log = mh_access_log_new(w->loop, ops->access_log_fd,
                                          (enum mh_access_format)ops->access_log_format);
    w->metrics = ops->metrics;
    w->shared = ops->shared;
    w->gen->shared = ops->shared;
    if (!w->metrics)
        return;
    w->reload_stats = mh_metrics_reload_stats(w->metrics);
    w->record_metrics = ops->metrics_on || w->gen->wants_metrics;
    if (ops->metrics_fd >= 0)
        w->metrics_server = mh_metrics_server_start(w, ops->metrics_fd);
    mh_metrics_publish_conns(w->metrics, getpid(), 0, 0);
    ev_timer_init(&w->metrics_timer, on_metrics_timer, 0.5, 0.5);
    w->metrics_timer.data = w;
    ev_timer_start(w->loop, &w->metrics_timer);
    ev_unref(w->loop);
    w->observe = w->log_requests || w->access_log || w->record_metrics;
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

static int worker_setup(struct mh_worker *w, struct ev_loop *loop, struct mh_config *config,
                        struct mh_gen *gen, const int *fds, char *err, size_t errlen)
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
    for (size_t i = 0; fds && i < config->nlisten; i++) {
        mh_listener_adopt(&w->listeners[i], fds[i], config->listen[i]);
        w->nlisteners++;
    }
    for (size_t i = 0; !fds && i < config->nlisten; i++) {
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
    ev_signal_init(&w->sigusr2, on_signal, SIGUSR2);
    w->sigterm.data = w->sigint.data = w->sigusr2.data = w;
    ev_signal_start(loop, &w->sigterm);
    ev_signal_start(loop, &w->sigint);
    ev_signal_start(loop, &w->sigusr2);
    ev_unref(loop);
    ev_unref(loop);
    ev_unref(loop);
    if (fds) {
        signal(SIGHUP, SIG_IGN); /* the master reloads by replacing its workers */
    } else if (config->mode == MH_MODE_SERVE) {
        ev_signal_init(&w->sighup, on_sighup, SIGHUP);
        w->sighup.data = w;
        ev_signal_start(loop, &w->sighup);
        ev_unref(loop);
    }
    w->log_requests = config->dev;
    w->observe = w->log_requests;
    w->inherited = fds != NULL;
    w->reload_stats = &w->_own_reload_stats;
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

int mh_worker_init(struct mh_worker *w, struct ev_loop *loop, struct mh_config *config,
                   struct mh_gen *gen, char *err, size_t errlen)
{
    return worker_setup(w, loop, config, gen, NULL, err, errlen);
}

int mh_worker_init_inherited(struct mh_worker *w, struct ev_loop *loop, struct mh_config *config,
                             struct mh_gen *gen, const int *fds, char *err, size_t errlen)
{
    return worker_setup(w, loop, config, gen, fds, err, errlen);
}

int mh_worker_run(struct mh_worker *w)
{
    for (size_t i = 0; i < w->nlisteners && !w->inherited; i++)
        mh_log(MH_LOG_INFO, "listening on %s (port %d)", w->listeners[i].addr,
               mh_listener_port(&w->listeners[i]));
    ev_run(w->loop, 0);
    return w->exit_code;
}

void mh_worker_destroy(struct mh_worker *w)
{
    ev_timer_stop(w->loop, &w->idle_close_timer);
    mh_devwatch_stop(w->devwatch);
    w->devwatch = NULL;
    mh_access_log_free(w->access_log);
    w->access_log = NULL;
    mh_metrics_server_free(w->metrics_server);
    w->metrics_server = NULL;
    if (w->metrics) {
        ev_ref(w->loop);
        ev_timer_stop(w->loop, &w->metrics_timer);
        mh_metrics_forget_worker(w->metrics, getpid());
    }
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
