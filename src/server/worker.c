#include "worker.h"

#include "shared_zones.h"

#include "access_log.h"
#include "devwatch.h"
#include "log.h"
#include "lua_guard.h"
#include "lua_load.h"
#include "notify.h"
#include "passed_sockets.h"
#include "lua_sched.h"
#include "lua_timer.h"
#include "protocols.h"
#include "req.h"
#include "req_policy.h"
#include "shm_once.h"
#include "tls.h"
#include "tls_acme.h"
#include "workpool.h"

#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static void observe(void *ud, const struct mh_req *r);
static void on_once_started(const struct mh_gen_host *h, struct mh_gen *g);
static void on_tasks_running(const struct mh_gen_host *h, int delta);
static int on_tls_install(const struct mh_gen_host *h, size_t index, const char *cert,
                          const char *key, char *err, size_t errlen);
static void each_request(const struct mh_gen_host *h, void (*fn)(struct mh_req *r, void *ud),
                         void *ud);
static void on_once_timeout(struct ev_loop *loop, ev_timer *t, int revents);
static void begin_serving(struct mh_worker *w);
static void offer_http2(struct mh_config *c);

/*
 * The loop's life has one owner: this file. Every watcher below keeps its
 * reference on the loop (nothing here or in the modules under it counts
 * with ev_ref/ev_unref), so ev_run returns only through leave(), called
 * when the worker has decided to stop. A return without it is a bug, made
 * loud by mh_worker_run.
 */
static void leave(struct mh_worker *w)
{
    w->leaving = true;
    ev_timer_stop(w->loop, &w->watchdog_timer);
    ev_break(w->loop, EVBREAK_ALL);
}

/* Seconds idle keep-alive connections may still bring a request after a stop begins. */
#define MH_IDLE_CLOSE_GRACE 0.5

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
    mh_http_prepare(&w->http);
    /* A stop's drain has no connection left: the background tasks it kept running end now. */
    if (w->shutting_down && mh_http_drained(&w->http) && w->background_tasks &&
        !mh_gen_stopping(w->gen))
        mh_gen_stop(w->gen, MH_GEN_STOPPING);
    /* A `run` script's count covers its own task: it ends when nothing it started still runs. */
    if (((w->shutting_down && mh_http_drained(&w->http)) || w->script_done) &&
        w->background_tasks == 0)
        leave(w);
}

static void on_shutdown_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_worker *w = t->data;
    (void)revents;
    (void)loop;
    mh_log(MH_LOG_WARN, "shutdown timeout: closing %zu connections still open", w->http.nconns);
    mh_http_close_all(&w->http);
    /* Handlers still waiting (on a timer, say) are abandoned: the process is leaving. */
    leave(w);
}

static void on_idle_close(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_worker *w = t->data;
    (void)loop;
    (void)revents;
    mh_http_close_idle(&w->http);
}

/*
 * Stops accepting and closes idle connections; what is in flight finishes
 * within `deadline` seconds, then whatever is left is closed.
 */
static void stop_serving(struct mh_worker *w, double deadline)
{
    w->shutting_down = w->stopping = true;
    w->http.shutting_down = true;
    if (ev_is_active(&w->delay_timer))
        ev_timer_stop(w->loop, &w->delay_timer);
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_close(&w->listeners[i]);
    w->nlisteners = 0;
    mh_acceptor_stop(&w->acceptor);
    ev_timer_stop(w->loop, &w->trim_timer);
    if (w->metrics_listener.fd >= 0)
        mh_listener_close(&w->metrics_listener);
    /*
     * Closing an idle keep-alive connection races with a request the client
     * may be sending on it right now: that request would meet a reset. So
     * idle connections get a short grace, in which a request is answered
     * with "Connection: close" (h1_conn.c closes it after), then the rest go.
     */
    if (w->http.idle.head) {
        ev_timer_init(&w->idle_close_timer, on_idle_close, MH_IDLE_CLOSE_GRACE, 0.);
        w->idle_close_timer.data = w;
        ev_timer_start(w->loop, &w->idle_close_timer);
    }
    ev_timer_init(&w->shutdown_timer, on_shutdown_timeout, deadline, 0.);
    w->shutdown_timer.data = w;
    ev_timer_start(w->loop, &w->shutdown_timer);
}

void mh_worker_shutdown(struct mh_worker *w)
{
    if (w->graceful_stop)
        return;
    w->graceful_stop = true;
    const struct mh_config *c = w->config;
    mh_log(MH_LOG_INFO,
           "graceful stop: %zu connections open; WebSockets and streams drain for up to %g s "
           "(shutdown_timeout), the last %g s of it closing them (drain_spread)",
           w->http.nconns, c->shutdown_timeout, mh_stop_drain_spread(c));
    /* The loop took the signal, so it is not stuck: the guard allows the drain's time. */
    mh_guard_stop_after(mh_worker_stop_seconds(c));
    if (w->draining) {
        /* A reload's drain under way (this worker was retired): the stop's window cuts it. */
        if (ev_timer_remaining(w->loop, &w->shutdown_timer) > mh_worker_stop_seconds(c)) {
            ev_timer_stop(w->loop, &w->shutdown_timer);
            ev_timer_set(&w->shutdown_timer, mh_worker_stop_seconds(c), 0.);
            ev_timer_start(w->loop, &w->shutdown_timer);
        }
        mh_gen_stop(w->gen, MH_GEN_ASKED); /* lua_handler.c: its window ends within the stop's */
        return;
    }
    stop_serving(w, mh_worker_stop_seconds(c));
    /*
     * The code drains as a reload's replaced code does: its long-lived
     * requests go on, told by http.draining() and ws:on_drain, older
     * generations' drains end within the same window; its background tasks
     * and timers run on for them and hear "stopping" when the drain ends, or
     * at once once no connection is left (on_prepare).
     */
    double spread = mh_stop_drain_spread(c);
    mh_gen_drain(w->gen, MH_GEN_ASKED, c->shutdown_timeout - spread, spread);
}

void mh_worker_stop_now(struct mh_worker *w)
{
    const struct mh_config *c = w->config;
    if (!w->stopping)
        mh_notify_send(w->notify, "STOPPING=1");
    w->graceful_stop = true;
    w->draining = false;
    mh_log(MH_LOG_INFO, "stop at once: %zu connections open; requests in flight get %g s",
           w->http.nconns, c->shutdown_timeout);
    mh_guard_stop_after(c->shutdown_timeout);
    if (!w->shutting_down) {
        stop_serving(w, c->shutdown_timeout);
    } else if (ev_timer_remaining(w->loop, &w->shutdown_timer) > c->shutdown_timeout) {
        ev_timer_stop(w->loop, &w->shutdown_timer);
        ev_timer_set(&w->shutdown_timer, c->shutdown_timeout, 0.);
        ev_timer_start(w->loop, &w->shutdown_timer);
    }
    /* WebSockets close with 1001, streams hear "stopping"; older generations stop with it. */
    mh_gen_stop(w->gen, MH_GEN_ASKED | MH_GEN_STOPPING);
}

void mh_worker_retire(struct mh_worker *w)
{
    if (w->shutting_down)
        return;
    const struct mh_config *c = w->config;
    mh_log(MH_LOG_INFO, "replaced by a reload: %zu connections open, draining", w->http.nconns);
    w->draining = true;
    /* The loop took the signal, so it is not stuck: the guard allows the drain's time. */
    mh_guard_stop_after(c->drain_timeout + c->drain_spread + c->shutdown_timeout);
    stop_serving(w, c->drain_timeout + c->drain_spread + c->shutdown_timeout);
    mh_gen_drain(w->gen, MH_GEN_RETIRED, c->drain_timeout, c->drain_spread);
}

static void on_delay_done(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    mh_worker_shutdown(t->data);
}

/*
 * SIGTERM: a graceful stop (after shutdown_delay, with http.stopping()
 * true meanwhile), draining long-lived connections. SIGINT, or SIGTERM
 * once more: a stop at once. SIGUSR2 (the master died): graceful, no delay.
 */
static void on_signal(struct ev_loop *loop, ev_signal *s, int revents)
{
    struct mh_worker *w = s->data;
    (void)revents;
    if (s->signum == SIGINT || (s->signum == SIGTERM && w->sigterm_seen)) {
        mh_worker_stop_now(w);
        return;
    }
    w->sigterm_seen = w->sigterm_seen || s->signum == SIGTERM;
    if (!w->stopping)
        mh_notify_send(w->notify, "STOPPING=1");
    if (s->signum == SIGUSR2 || w->stopping || w->config->shutdown_delay <= 0) {
        mh_worker_shutdown(w);
        return;
    }
    w->stopping = true;
    mh_gen_stop(w->gen, MH_GEN_ASKED);
    mh_log(MH_LOG_INFO, "stopping in %g s: still serving, http.stopping() is true",
           w->config->shutdown_delay);
    ev_timer_init(&w->delay_timer, on_delay_done, w->config->shutdown_delay, 0.);
    w->delay_timer.data = w;
    ev_timer_start(loop, &w->delay_timer);
}

static void on_retire_signal(struct ev_loop *loop, ev_signal *s, int revents)
{
    (void)loop;
    (void)revents;
    mh_worker_retire(s->data);
}

/* systemd follows the reload from RELOADING=1 to READY=1, whatever its outcome. */
static void on_sighup(struct ev_loop *loop, ev_signal *s, int revents)
{
    struct mh_worker *w = s->data;
    (void)loop;
    (void)revents;
    mh_notify_reloading(w->notify);
    mh_worker_reload(w, "SIGHUP");
    mh_notify_send(w->notify, "READY=1");
}

/* A lone worker is its own stall watchdog's subject: a loop stuck in a task stops the pings. */
static void on_watchdog(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_worker *w = t->data;
    (void)loop;
    (void)revents;
    mh_notify_send(w->notify, "WATCHDOG=1");
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
    mh_gen_set_host(g, &w->host);
    if (w->shared)
        mh_shared_zones_reload(w->shared, g);
    if (g->wants_metrics && w->metrics && !w->record_metrics) {
        w->record_metrics = w->observe = true;
        w->http.observe = observe;
    }
    struct mh_gen *old = w->gen;
    w->gen = g; /* the reference mh_gen_load returned is the worker's now */
    /* A stop under way covers the new code too. */
    mh_gen_stop(g, (w->stopping ? MH_GEN_ASKED : 0) | (w->shutting_down ? MH_GEN_STOPPING : 0));
    /*
     * The old code drains as a retiring worker's does (several workers):
     * its WebSockets and streams go on for drain_timeout, then close over
     * drain_spread; http.stopping() and http.draining() turn true in it, its
     * background tasks hear "stopping". Only its own requests: the new
     * generation serves on, kept-alive connections' next requests too.
     */
    if (w->shutting_down)
        mh_gen_stop(old, MH_GEN_RETIRED | MH_GEN_STOPPING);
    else
        mh_gen_drain(old, MH_GEN_RETIRED, w->config->drain_timeout, w->config->drain_spread);
    if (w->host.once) /* a reload in place is the only worker's: the next epoch is its own */
        w->once_epoch = mh_shm_once_next_epoch(w->host.once);
    mh_timer_gen_started(g);
    /* old keeps its host: requests in flight on it still need the loop. */
    mh_gen_unref(old);
    st->reloads++;
    st->last_failed = false;
    g->number = st->reloads;
    /* Certificates are read again too; open connections keep the ones they started with. */
    const struct mh_tls_certs *certs[MH_MAX_LISTEN];
    struct mh_tls_certs acme_bufs[MH_MAX_LISTEN];
    offer_http2(w->config);
    for (size_t i = 0; i < w->nlisteners; i++)
        certs[i] = mh_acme_certs_for(&w->acme_certs, w->config, i, &acme_bufs[i]);
    if (mh_listener_tls_reload(w->listeners, w->nlisteners, certs, err, sizeof err) < 0)
        mh_log(MH_LOG_ERROR, "reload (%s): certificates not reloaded, the previous ones stay: %s",
               why, err);
    mh_log(MH_LOG_INFO, "reloaded (%s) in %.1f ms: %zu routes", why, (ev_time() - t0) * 1000,
           mh_router_size(g->router));
    return 0;
}

static void on_file_change(void *ctx)
{
    mh_worker_reload(ctx, "file change");
}

void mh_worker_watch(struct mh_worker *w, const struct mh_deps *deps)
{
    if (!w->devwatch)
        w->devwatch = mh_devwatch_start(w->loop, w->config->script, deps, on_file_change, w);
}

/* A request ended (the connection code calls this when w->observe): access log, metrics, dev log.
 */
static void observe(void *ud, const struct mh_req *r)
{
    struct mh_worker *w = ud;
    double seconds = ev_time() - r->started;
    const struct mh_route *route = r->routed.route;
    if (w->record_metrics) {
        mh_metrics_record(w->metrics, route ? mh_route_pattern(route) : NULL, r->res.status,
                          seconds);
        mh_metrics_count_proto(w->metrics, r->head.http_major == 2 ? MH_METRICS_HTTP2
                                           : r->head.http_minor    ? MH_METRICS_HTTP11
                                                                   : MH_METRICS_HTTP10);
    }
    if (w->access_log)
        mh_access_log_request(w->access_log, r, seconds);
    if (w->log_requests) {
        size_t tlen;
        const char *target = mh_req_slice(r, r->head.target, &tlen);
        mh_log(MH_LOG_INFO, "%s %.*s -> %d (%.1f ms)", mh_req_method(r), (int)tlen, target,
               r->res.status, seconds * 1000);
    }
}

struct draining {
    struct mh_metrics_draining gens[MH_METRICS_DRAIN_GENS];
    size_t n;
};

static void count_draining(struct mh_req *r, void *ud)
{
    struct draining *d = ud;
    const struct mh_gen *g = mh_lua_request_gen(r);
    if (!g || !mh_gen_draining(g))
        return;
    size_t i = 0;
    while (i < d->n && d->gens[i].generation != g->number)
        i++;
    if (i == d->n) {
        if (d->n == MH_METRICS_DRAIN_GENS)
            return; /* older reloads still draining: not shown */
        d->gens[d->n++] = (struct mh_metrics_draining){.generation = g->number};
    }
    d->gens[i].conns++;
}

static void on_metrics_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_worker *w = t->data;
    (void)loop;
    (void)revents;
    mh_metrics_publish_conns(w->metrics, getpid(), w->http.nconns, w->http.idle.n);
    struct draining d = {.n = 0};
    mh_http_each_request(&w->http, count_draining, &d);
    mh_metrics_publish_draining(w->metrics, getpid(), d.gens, d.n);
}

/*
 * With an ACME listener, the challenges' answers are read from the shared
 * zone: TLS-ALPN-01 by the TLS listeners' handshakes, HTTP-01 by a handler
 * in front of the app on every plain listener (before routing). A server
 * without ACME keeps its listeners as they are.
 */
static void serve_acme(struct mh_worker *w)
{
    struct mh_shm_dict *zone = w->shared && mh_config_has_acme(w->config)
                                   ? mh_shm_dicts_find(w->shared, MH_ACME_ZONE)
                                   : NULL;
    mh_tls_acme_set_zone(zone);
    if (!zone)
        return;
    mh_acme_challenge_init(&w->acme_challenge, &w->app.base, zone);
    for (size_t i = 0; i < w->nlisteners; i++)
        if (!w->listeners[i].tls && !w->listeners[i].serves)
            w->listeners[i].serves = &w->acme_challenge.base;
}

void mh_worker_set_ops(struct mh_worker *w, const struct mh_ops *ops)
{
    if (ops->access_log_fd >= 0) {
        const char *id_header = w->gen->config->request_id_header;
        w->access_log = mh_access_log_new(
            w->loop, ops->access_log_fd, (enum mh_access_format)ops->access_log_format,
            strcmp(id_header, "off") ? id_header : NULL, w->gen->config->access_log_redact);
    }
    w->metrics = ops->metrics;
    w->shared = ops->shared;
    w->notify = w->inherited ? NULL : ops->notify; /* under a master, the master talks */
    w->gen->shared = ops->shared;
    serve_acme(w);
    const char *cerr = mh_chan_endpoint_init(&w->channels, w->loop, ops->channels, getpid());
    if (cerr)
        mh_log(MH_LOG_WARN, "channels: %s: this worker can publish but not subscribe", cerr);
    w->host.channels = &w->channels;
    if (ops->once) {
        w->once_epoch = mh_shm_once_epoch(ops->once);
        w->host.once_epoch = &w->once_epoch;
        w->host.once = ops->once;
    }
    if (!w->metrics)
        return;
    w->reload_stats = mh_metrics_reload_stats(w->metrics);
    w->record_metrics = ops->metrics_on || w->gen->wants_metrics;
    mh_metrics_handler_init(&w->metrics_handler, w->metrics, &w->http);
    w->host.metrics = &w->metrics_handler.base;
    w->host.metrics_table = w->metrics;
    if (ops->metrics_fd >= 0) {
        /* An ordinary listener whose connections are served by the metrics handler alone. */
        /* A copy: the listening socket itself stays the process's (main closes it). */
        mh_listener_adopt(&w->metrics_listener, fcntl(ops->metrics_fd, F_DUPFD_CLOEXEC, 0),
                          "metrics");
        w->metrics_listener.serves = &w->metrics_handler.base;
        mh_listener_start(&w->metrics_listener, &w->acceptor);
    }
    mh_metrics_publish_conns(w->metrics, getpid(), 0, 0);
    ev_timer_init(&w->metrics_timer, on_metrics_timer, 0.5, 0.5);
    w->metrics_timer.data = w;
    ev_timer_start(w->loop, &w->metrics_timer);
    w->observe = w->log_requests || w->access_log || w->record_metrics;
    w->http.observe = w->observe ? observe : NULL;
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
    if (!w->accept_paused || w->shutting_down || w->awaiting_once ||
        w->http.nconns >= (size_t)w->config->max_connections)
        return;
    w->accept_paused = false;
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_resume(&w->listeners[i]);
}

/* ---- glue for the layers below: acceptor and connection hooks ------------- */

static bool may_accept(void *ud)
{
    struct mh_worker *w = ud;
    return w->http.nconns < (size_t)w->config->max_connections;
}

static void pause_accept(void *ud)
{
    mh_worker_pause_accept(ud);
}

static int on_accept(void *ud, struct mh_listener *l, int fd, const struct sockaddr_storage *peer,
                     socklen_t plen)
{
    struct mh_worker *w = ud;
    const struct mh_handler *root = l->serves ? l->serves : &w->app.base;
    if (!mh_http_accept(&w->http, root, l->tls, fd, peer, plen))
        return -1;
    if (w->http.nconns > w->conns_peak)
        w->conns_peak = w->http.nconns;
    return 0;
}

/*
 * Memory back after a spike. What a burst of connections took (their
 * structs, buffers, TLS contexts, the pool's cached buffers) is freed when
 * they close, but glibc keeps freed heap pages it cannot trim from the top,
 * so the worker would stay at its peak for good (80 MB after 20,000 idle
 * connections left, 10 MB before: bench/spike.sh). Once the open
 * connections fell to half their peak, by at least MH_TRIM_DROP, and a
 * second passed (a drop is usually many closes in a row), the pools keep
 * a few connection objects, buffers and TLS contexts, and malloc_trim()
 * hands the free pages back. A
 * server whose connections churn below MH_TRIM_DROP never pays for it.
 */
#define MH_TRIM_DROP     256
#define MH_TRIM_KEEP     16 /* connection objects, and buffers (16 KiB each) */
#define MH_TRIM_KEEP_TLS 4  /* idle TLS contexts (with their records' buffers, ~40 KiB) */

static void on_trim_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_worker *w = t->data;
    (void)loop;
    (void)revents;
    w->conns_peak = w->http.nconns;
    mh_http_trim(&w->http, MH_TRIM_KEEP);
    mh_buf_pool_trim(&w->bufs, MH_TRIM_KEEP);
    for (size_t i = 0; i < w->nlisteners; i++)
        if (w->listeners[i].tls)
            mh_tls_server_trim(w->listeners[i].tls, MH_TRIM_KEEP_TLS);
    malloc_trim(0);
}

static void after_drop(struct mh_worker *w)
{
    size_t n = w->http.nconns;
    if (w->conns_peak - n >= MH_TRIM_DROP && n <= w->conns_peak / 2 && !w->shutting_down &&
        !ev_is_active(&w->trim_timer))
        ev_timer_start(w->loop, &w->trim_timer);
}

static void on_conn_close(void *ud)
{
    after_drop(ud);
    mh_worker_maybe_resume_accept(ud);
}

static void set_limits(struct mh_http_limits *lim, const struct mh_config *c)
{
    lim->read_header_timeout = c->read_header_timeout;
    lim->read_timeout = c->read_timeout;
    lim->body_timeout = c->body_timeout;
    lim->write_timeout = c->write_timeout;
    lim->idle_timeout = c->idle_timeout;
    lim->send_timeout = c->send_timeout;
    lim->max_header_bytes = c->max_header_bytes;
    lim->max_body_bytes = c->max_body_bytes;
    lim->discard_body_bytes = c->discard_body_bytes;
    lim->keepalive_requests = c->keepalive_requests;
    lim->http2 = c->http2;
    lim->h2c = c->h2c;
    lim->h2_max_concurrent_streams = (uint32_t)c->h2_max_concurrent_streams;
    lim->h2_header_table_size = (uint32_t)c->h2_header_table_size;
    lim->h2_flood_budget = (uint32_t)c->h2_flood_budget;
}

/*
 * A lone worker's listener i: the socket passed at start for its address
 * (systemd, a binary upgrade: passed_sockets.h), else its own. 0 or -1.
 */
static int open_listener(struct mh_listener *l, const struct mh_config *config, size_t i, char *err,
                         size_t errlen)
{
    int fd;
    if (mh_passed_sockets_take(config->listen[i], false, &fd, 1) == 1) {
        mh_listener_adopt(l, fd, config->listen[i]);
        return 0;
    }
    if (mh_passed_sockets_from() == MH_PASSED_SYSTEMD) {
        snprintf(err, errlen,
                 "listen \"%s\": systemd passed no socket for this address (LISTEN_FDS): the "
                 ".socket unit's ListenStream= and the script's listen list disagree",
                 config->listen[i]);
        return -1;
    }
    return mh_listener_open(l, config->listen[i], (int)config->backlog, err, errlen) ? -1 : 0;
}

/* TLS listeners offer "h2" in ALPN when the http2 setting is on. */
static void offer_http2(struct mh_config *c)
{
    c->tls.http2 = c->http2;
    for (size_t i = 0; i < MH_MAX_LISTEN; i++)
        if (c->listen_certs[i])
            c->listen_certs[i]->http2 = c->http2;
}

/*
 * Many idle keep-alive connections need many descriptors: take what the hard
 * limit allows. Returns the limit now in force (0: unknown or unlimited).
 */
static int raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 0;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && getrlimit(RLIMIT_NOFILE, &rl) < 0)
            return 0;
    }
    return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > INT_MAX ? 0 : (int)rl.rlim_cur;
}

static int worker_setup(struct mh_worker *w, struct ev_loop *loop, struct mh_config *config,
                        struct mh_gen *gen, const int *fds, char *err, size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->loop = loop;
    w->config = config;
    w->gen = gen;
    mh_gen_ref(gen);
    w->host.loop = loop;
    w->host.reload_stats = &w->reload_stats;
    w->host.tasks_running = on_tasks_running;
    w->host.each_request = each_request;
    w->host.tls_install = on_tls_install;
    w->host.worker_id = 1; /* a lone worker; the master sets its workers' slots */
    /* Its threads start with the first job, in this process (after any fork). */
    w->host.workpool = mh_workpool_new(loop, (unsigned)config->thread_pool);
    mh_gen_set_host(gen, &w->host);
    /* again: http.server{} may have changed it after the first state was made */
    mh_guard_set_memory_limit((size_t)config->lua_memory_limit);
    mh_buf_pool_init(&w->bufs, 1024);
    ev_timer_init(&w->trim_timer, on_trim_timer, 1.0, 0.0);
    w->trim_timer.data = w;
    set_limits(&w->limits, config);
    mh_http_ctx_init(&w->http, loop, &w->limits, &w->bufs, &mh_http_protos);
    w->http.on_close = on_conn_close;
    w->http.ud = w;
    mh_lua_app_init(&w->app, &w->gen);
    w->metrics_listener.fd = -1;
    size_t shed_len;
    const char *shed_response = mh_policy_shed_response(&shed_len);
    w->acceptor = (struct mh_acceptor){
        .loop = loop,
        .reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC),
        .fd_limit = raise_fd_limit(),
        .tcp_nodelay = config->tcp_nodelay,
        .shed_response = shed_response,
        .shed_len = shed_len,
        .may_accept = may_accept,
        .pause = pause_accept,
        .on_accept = on_accept,
        .ud = w,
    };
    for (size_t i = 0; fds && i < config->nlisten; i++) {
        mh_listener_adopt(&w->listeners[i], fds[i], config->listen[i]);
        w->nlisteners++;
    }
    for (size_t i = 0; !fds && i < config->nlisten; i++) {
        if (open_listener(&w->listeners[i], config, i, err, errlen) < 0)
            goto fail;
        w->nlisteners++;
    }
    const struct mh_tls_certs *certs[MH_MAX_LISTEN];
    offer_http2(config);
    for (size_t i = 0; i < w->nlisteners; i++)
        certs[i] = mh_config_listen_tls(config, i);
    if (mh_listener_tls_init(w->listeners, w->nlisteners, certs, &config->tls, err, errlen) < 0)
        goto fail;
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_start(&w->listeners[i], &w->acceptor);
    ev_prepare_init(&w->prepare, on_prepare);
    w->prepare.data = w;
    ev_prepare_start(loop, &w->prepare);
    signal(SIGPIPE, SIG_IGN);
    ev_signal_init(&w->sigterm, on_signal, SIGTERM);
    ev_signal_init(&w->sigint, on_signal, SIGINT);
    ev_signal_init(&w->sigusr2, on_signal, SIGUSR2);
    w->sigterm.data = w->sigint.data = w->sigusr2.data = w;
    ev_signal_start(loop, &w->sigterm);
    ev_signal_start(loop, &w->sigint);
    ev_signal_start(loop, &w->sigusr2);
    if (fds) {
        signal(SIGHUP, SIG_IGN); /* the master reloads by replacing its workers */
        ev_signal_init(&w->sigretire, on_retire_signal, MH_SIGNAL_RETIRE);
        w->sigretire.data = w;
        ev_signal_start(loop, &w->sigretire);
    } else if (config->mode == MH_MODE_SERVE) {
        ev_signal_init(&w->sighup, on_sighup, SIGHUP);
        w->sighup.data = w;
        ev_signal_start(loop, &w->sighup);
    }
    w->log_requests = config->dev;
    w->observe = w->log_requests;
    w->http.observe = w->observe ? observe : NULL;
    w->inherited = fds != NULL;
    w->reload_stats = &w->_own_reload_stats;
    w->ready_fd = -1;
    w->host.once_started = on_once_started;
    return 0;
fail:
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_close(&w->listeners[i]);
    if (w->acceptor.reserve_fd >= 0)
        close(w->acceptor.reserve_fd);
    mh_buf_pool_destroy(&w->bufs);
    mh_gen_set_host(gen, NULL);
    mh_gen_unref(gen); /* the caller still holds its own reference */
    mh_workpool_free(w->host.workpool);
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

/*
 * Runs the loop until leave(). If ev_run returns otherwise, something
 * stopped the loop behind the worker's back: say what was still open and
 * exit non-zero (EX_SOFTWARE), so a supervisor restarts the server instead
 * of taking it for a clean stop.
 */
static void run_loop(struct mh_worker *w)
{
    ev_run(w->loop, 0);
    if (w->leaving)
        return;
    mh_log(MH_LOG_ERROR,
           "bug: the event loop ended while the worker was not stopping (%zu listeners, %zu "
           "connections, %u background tasks open); exiting with status %d",
           w->nlisteners, w->http.nconns, w->background_tasks, MH_EXIT_LOOP_ENDED);
    w->exit_code = MH_EXIT_LOOP_ENDED;
}

int mh_worker_run(struct mh_worker *w)
{
    for (size_t i = 0; i < w->nlisteners && !w->inherited; i++)
        mh_log(MH_LOG_INFO, "listening on %s%s (port %d)",
               mh_config_listen_tls(w->config, i) ? "https://" : "http://", w->listeners[i].addr,
               mh_listener_port(&w->listeners[i]));
    const struct mh_config *c = w->config;
    unsigned once = mh_timer_gen_started(w->gen);
    if (once && c->mode == MH_MODE_SERVE && c->once_start_timeout > 0) {
        /* The listening sockets stay open: connections wait in the backlog meanwhile. */
        mh_worker_pause_accept(w);
        w->awaiting_once = true;
        ev_timer_init(&w->once_timer, on_once_timeout, c->once_start_timeout, 0.);
        w->once_timer.data = w;
        ev_timer_start(w->loop, &w->once_timer);
    } else {
        begin_serving(w);
    }
    if (mh_notify_on(w->notify) && c->mode == MH_MODE_SERVE) {
        if (w->notify->watchdog > 0) {
            ev_timer_init(&w->watchdog_timer, on_watchdog, 0., w->notify->watchdog);
            w->watchdog_timer.data = w;
            ev_timer_start(w->loop, &w->watchdog_timer);
        }
    }
    char err[256];
    struct mh_guard_opts guard = {
        .cpu_limit = c->handler_cpu_limit,
        .stop_after = c->shutdown_delay + c->shutdown_timeout,
        .block_warn = c->loop_block_warn,
        .slot = w->heartbeat,
        .metrics = w->metrics,
    };
    if (c->mode == MH_MODE_SERVE && mh_guard_start(w->loop, &guard, err, sizeof err) < 0)
        mh_log(MH_LOG_WARN, "%s: serving without handler_cpu_limit", err);
    run_loop(w);
    mh_guard_stop(w->loop);
    return w->exit_code;
}

/* Accepts and says so: to the master (its pid on the ready pipe) or, alone, to systemd. */
static void begin_serving(struct mh_worker *w)
{
    w->awaiting_once = false;
    ev_timer_stop(w->loop, &w->once_timer);
    mh_worker_maybe_resume_accept(w);
    if (w->ready_fd >= 0) {
        pid_t self = getpid();
        ssize_t n = write(w->ready_fd, &self, sizeof self); /* atomic: < PIPE_BUF */
        (void)n;
        close(w->ready_fd);
        w->ready_fd = -1;
    }
    if (mh_notify_on(w->notify) && w->config->mode == MH_MODE_SERVE)
        mh_notify_send(w->notify, "READY=1");
}

/* The generation's host is the worker's own (worker_setup). */
static struct mh_worker *worker_of_host(const struct mh_gen_host *h)
{
    return (struct mh_worker *)((char *)h - offsetof(struct mh_worker, host));
}

static void on_tasks_running(const struct mh_gen_host *h, int delta)
{
    worker_of_host(h)->background_tasks += (unsigned)delta;
}

static int on_tls_install(const struct mh_gen_host *h, size_t index, const char *cert,
                          const char *key, char *err, size_t errlen)
{
    struct mh_worker *w = worker_of_host(h);
    return mh_acme_certs_install(&w->acme_certs, w->listeners, w->nlisteners, w->config, index,
                                 cert, key, err, errlen);
}

static void each_request(const struct mh_gen_host *h, void (*fn)(struct mh_req *r, void *ud),
                         void *ud)
{
    mh_http_each_request(&worker_of_host(h)->http, fn, ud);
}

/*
 * The once on_start functions of the code this worker started with have
 * ended (those of a later reload in place ran while it served: nothing
 * waits for them).
 */
static void on_once_started(const struct mh_gen_host *h, struct mh_gen *g)
{
    struct mh_worker *w = worker_of_host(h);
    (void)g;
    if (w->awaiting_once)
        begin_serving(w);
}

static void on_once_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_worker *w = t->data;
    (void)loop;
    (void)revents;
    mh_log(MH_LOG_WARN,
           "http.on_start(..., { once = true }) still running after %g s (once_start_timeout); "
           "serving without waiting for it",
           w->config->once_start_timeout);
    begin_serving(w);
}

static void on_script_done(struct mh_task *t)
{
    struct mh_worker *w = worker_of_host(t->gen->host);
    w->exit_code = t->exit_status;
    w->script_done = true;
    mh_timer_gen_retired(t->gen); /* timers still pending do not fire after the script ended */
}

int mh_worker_run_script(struct mh_worker *w)
{
    if (!mh_task_spawn(w->gen, 0, on_script_done)) {
        mh_log(MH_LOG_ERROR, "out of memory");
        return 1;
    }
    run_loop(w);
    return w->exit_code;
}

void mh_worker_destroy(struct mh_worker *w)
{
    ev_timer_stop(w->loop, &w->idle_close_timer);
    ev_timer_stop(w->loop, &w->once_timer);
    if (w->ready_fd >= 0)
        close(w->ready_fd);
    ev_timer_stop(w->loop, &w->watchdog_timer);
    mh_devwatch_stop(w->devwatch);
    w->devwatch = NULL;
    mh_access_log_free(w->access_log);
    w->access_log = NULL;
    if (w->metrics_listener.fd >= 0)
        mh_listener_close(&w->metrics_listener);
    if (w->metrics) {
        ev_timer_stop(w->loop, &w->metrics_timer);
        mh_metrics_forget_worker(w->metrics, getpid());
    }
    for (size_t i = 0; i < w->nlisteners; i++)
        mh_listener_close(&w->listeners[i]);
    mh_acme_certs_free(&w->acme_certs);
    mh_acceptor_stop(&w->acceptor);
    ev_timer_stop(w->loop, &w->trim_timer);
    mh_http_ctx_destroy(&w->http);
    mh_buf_pool_destroy(&w->bufs);
    if (w->acceptor.reserve_fd >= 0)
        close(w->acceptor.reserve_fd);
    mh_gen_set_host(w->gen, NULL);
    mh_gen_unref(w->gen);
    mh_chan_endpoint_close(&w->channels); /* after the Lua state: its subscriptions go first */
    mh_workpool_free(w->host.workpool);
}
