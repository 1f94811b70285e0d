#define _GNU_SOURCE /* accept4 */
#include "metrics.h"

#include "log.h"
#include "worker.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define NSLOTS        509 /* route patterns (prime: open addressing) */
#define PATTERN_MAX   192
#define NWORKER_SLOTS 256
#define NCLASSES      5

static const double bucket_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                   0.25,  0.5,    1,     2.5,  5,     10};
#define NBUCKETS (sizeof bucket_le / sizeof bucket_le[0] + 1) /* + +Inf */

enum { SLOT_EMPTY, SLOT_CLAIMED, SLOT_READY };

struct route_slot {
    uint32_t state;
    uint32_t hash;
    char pattern[PATTERN_MAX];
    uint64_t by_class[NCLASSES];
    uint64_t buckets[NBUCKETS]; /* not cumulative; summed when rendered */
    uint64_t sum_us;
    uint64_t count;
};

struct worker_slot {
    int32_t pid;
    uint64_t open, idle;
};

struct mh_metrics {
    struct mh_reload_stats reload;
    uint64_t guards[MH_METRICS_NGUARDS];
    struct worker_slot workers[NWORKER_SLOTS];
    struct route_slot other;     /* when the table is full */
    struct route_slot unmatched; /* 404, 405, redirects: no route */
    struct route_slot routes[NSLOTS];
};

#define ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define LOAD(p)   __atomic_load_n((p), __ATOMIC_RELAXED)

struct mh_metrics *mh_metrics_new(void)
{
    void *p = mmap(NULL, sizeof(struct mh_metrics), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct mh_metrics *m = p; /* zero-filled by the kernel */
    strcpy(m->other.pattern, "(other)");
    strcpy(m->unmatched.pattern, "(unmatched)");
    return m;
}

void mh_metrics_free(struct mh_metrics *m)
{
    if (m)
        munmap(m, sizeof *m);
}

struct mh_reload_stats *mh_metrics_reload_stats(struct mh_metrics *m)
{
    return &m->reload;
}

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static struct route_slot *find_slot(struct mh_metrics *m, const char *pattern)
{
    if (!pattern)
        return &m->unmatched;
    if (strlen(pattern) >= PATTERN_MAX)
        return &m->other;
    uint32_t h = hash_str(pattern);
    for (uint32_t i = 0; i < NSLOTS; i++) {
        struct route_slot *s = &m->routes[(h + i) % NSLOTS];
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (st == SLOT_EMPTY) {
            uint32_t expect = SLOT_EMPTY;
            if (__atomic_compare_exchange_n(&s->state, &expect, SLOT_CLAIMED, false,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                s->hash = h;
                strcpy(s->pattern, pattern);
                __atomic_store_n(&s->state, SLOT_READY, __ATOMIC_RELEASE);
                return s;
            }
            st = expect;
        }
        /*
         * Another worker is writing the name: it takes a few instructions.
         * Bounded, in case that worker died in between (then the slot is lost).
         */
        for (int spin = 0; st == SLOT_CLAIMED && spin < (1 << 16); spin++)
            st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (st != SLOT_READY)
            continue;
        if (s->hash == h && strcmp(s->pattern, pattern) == 0)
            return s;
    }
    return &m->other;
}

void mh_metrics_record(struct mh_metrics *m, const char *pattern, int status, double seconds)
{
    struct route_slot *s = find_slot(m, pattern);
    int cls = status / 100 - 1;
    if (cls >= 0 && cls < NCLASSES)
        ADD(&s->by_class[cls], 1);
    size_t b = 0;
    while (b < NBUCKETS - 1 && seconds > bucket_le[b])
        b++;
    ADD(&s->buckets[b], 1);
    ADD(&s->sum_us, (uint64_t)(seconds > 0 ? seconds * 1e6 : 0));
    ADD(&s->count, 1);
}

void mh_metrics_count_guard(struct mh_metrics *m, enum mh_metrics_guard what)
{
    ADD(&m->guards[what], 1);
}

void mh_metrics_publish_conns(struct mh_metrics *m, pid_t pid, size_t open, size_t idle)
{
    struct worker_slot *free_slot = NULL;
    for (size_t i = 0; i < NWORKER_SLOTS; i++) {
        struct worker_slot *w = &m->workers[i];
        int32_t p = LOAD(&w->pid);
        if (p == pid) {
            __atomic_store_n(&w->open, open, __ATOMIC_RELAXED);
            __atomic_store_n(&w->idle, idle, __ATOMIC_RELAXED);
            return;
        }
        if (p == 0 && !free_slot)
            free_slot = w;
    }
    for (size_t i = 0; i < NWORKER_SLOTS; i++) {
        struct worker_slot *w = &m->workers[i];
        int32_t expect = 0;
        if (__atomic_compare_exchange_n(&w->pid, &expect, (int32_t)pid, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&w->open, open, __ATOMIC_RELAXED);
            __atomic_store_n(&w->idle, idle, __ATOMIC_RELAXED);
            return;
        }
    }
    (void)free_slot;
}

void mh_metrics_forget_worker(struct mh_metrics *m, pid_t pid)
{
    if (!m)
        return;
    for (size_t i = 0; i < NWORKER_SLOTS; i++) {
        struct worker_slot *w = &m->workers[i];
        if (LOAD(&w->pid) == pid) {
            __atomic_store_n(&w->open, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&w->idle, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&w->pid, 0, __ATOMIC_RELEASE);
        }
    }
}

static int appendf(struct mh_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int appendf(struct mh_buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    return mh_buf_append(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A label value: backslash, quote and newline escaped as the format requires. */
static int append_label(struct mh_buf *b, const char *s)
{
    int rc = 0;
    for (; *s && rc == 0; s++) {
        if (*s == '\\')
            rc = mh_buf_append(b, "\\\\", 2);
        else if (*s == '"')
            rc = mh_buf_append(b, "\\\"", 2);
        else if (*s == '\n')
            rc = mh_buf_append(b, "\\n", 2);
        else
            rc = mh_buf_append(b, s, 1);
    }
    return rc;
}

static void render_route(struct route_slot *s, struct mh_buf *out, int part)
{
    uint64_t count = LOAD(&s->count);
    if (!count)
        return;
    static const char *const classes[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
    if (part == 0) {
        for (int c = 0; c < NCLASSES; c++) {
            uint64_t n = LOAD(&s->by_class[c]);
            if (!n)
                continue;
            mh_buf_append_str(out, "moonhttp_requests_total{pattern=\"");
            append_label(out, s->pattern);
            appendf(out, "\",status=\"%s\"} %llu\n", classes[c], (unsigned long long)n);
        }
        return;
    }
    uint64_t cum = 0;
    for (size_t b = 0; b < NBUCKETS; b++) {
        cum += LOAD(&s->buckets[b]);
        mh_buf_append_str(out, "moonhttp_request_duration_seconds_bucket{pattern=\"");
        append_label(out, s->pattern);
        if (b < NBUCKETS - 1)
            appendf(out, "\",le=\"%g\"} %llu\n", bucket_le[b], (unsigned long long)cum);
        else
            appendf(out, "\",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    }
    mh_buf_append_str(out, "moonhttp_request_duration_seconds_sum{pattern=\"");
    append_label(out, s->pattern);
    appendf(out, "\"} %.6f\n", (double)LOAD(&s->sum_us) / 1e6);
    mh_buf_append_str(out, "moonhttp_request_duration_seconds_count{pattern=\"");
    append_label(out, s->pattern);
    appendf(out, "\"} %llu\n", (unsigned long long)cum);
}

static void render_routes(struct mh_metrics *m, struct mh_buf *out, int part)
{
    for (size_t i = 0; i < NSLOTS; i++)
        if (__atomic_load_n(&m->routes[i].state, __ATOMIC_ACQUIRE) == SLOT_READY)
            render_route(&m->routes[i], out, part);
    render_route(&m->unmatched, out, part);
    render_route(&m->other, out, part);
}

int mh_metrics_render(struct mh_metrics *m, struct mh_worker *w, struct mh_buf *out)
{
    size_t start = out->len;
    mh_metrics_publish_conns(m, getpid(), w->nconns, w->idle.n);
    mh_buf_append_str(out, "# HELP moonhttp_requests_total Requests answered, by route pattern "
                           "and status class.\n# TYPE moonhttp_requests_total counter\n");
    render_routes(m, out, 0);
    mh_buf_append_str(out, "# HELP moonhttp_request_duration_seconds Time from request head to "
                           "complete response, by route pattern.\n"
                           "# TYPE moonhttp_request_duration_seconds histogram\n");
    render_routes(m, out, 1);
    uint64_t open = 0, idle = 0, workers = 0;
    for (size_t i = 0; i < NWORKER_SLOTS; i++) {
        if (!LOAD(&m->workers[i].pid))
            continue;
        workers++;
        open += LOAD(&m->workers[i].open);
        idle += LOAD(&m->workers[i].idle);
    }
    appendf(out,
            "# HELP moonhttp_connections Open client connections (idle: waiting for a "
            "request).\n# TYPE moonhttp_connections gauge\n"
            "moonhttp_connections{state=\"open\"} %llu\n"
            "moonhttp_connections{state=\"idle\"} %llu\n",
            (unsigned long long)open, (unsigned long long)idle);
    appendf(out,
            "# HELP moonhttp_workers Worker processes serving.\n"
            "# TYPE moonhttp_workers gauge\nmoonhttp_workers %llu\n",
            (unsigned long long)workers);
    struct mh_reload_stats *r = &m->reload;
    appendf(out,
            "# HELP moonhttp_reloads_total Successful reloads of the app code.\n"
            "# TYPE moonhttp_reloads_total counter\nmoonhttp_reloads_total %lu\n"
            "# HELP moonhttp_reload_failures_total Reloads that failed (old code kept).\n"
            "# TYPE moonhttp_reload_failures_total counter\n"
            "moonhttp_reload_failures_total %lu\n"
            "# HELP moonhttp_reload_last_failed Whether the last reload failed.\n"
            "# TYPE moonhttp_reload_last_failed gauge\nmoonhttp_reload_last_failed %d\n",
            r->reloads, r->failures, r->last_failed ? 1 : 0);
    if (r->failures) {
        mh_buf_append_str(out, "# HELP moonhttp_reload_last_error_info The last reload error.\n"
                               "# TYPE moonhttp_reload_last_error_info gauge\n"
                               "moonhttp_reload_last_error_info{error=\"");
        append_label(out, r->last_error);
        mh_buf_append_str(out, "\"} 1\n");
    }
    appendf(out,
            "# HELP moonhttp_guard_events_total Tasks stopped by handler_cpu_limit or "
            "lua_memory_limit, and workers killed for a stalled loop.\n"
            "# TYPE moonhttp_guard_events_total counter\n"
            "moonhttp_guard_events_total{guard=\"cpu_limit\"} %llu\n"
            "moonhttp_guard_events_total{guard=\"memory_limit\"} %llu\n"
            "moonhttp_guard_events_total{guard=\"worker_stall\"} %llu\n",
            (unsigned long long)LOAD(&m->guards[MH_METRICS_CPU_LIMIT]),
            (unsigned long long)LOAD(&m->guards[MH_METRICS_MEMORY_LIMIT]),
            (unsigned long long)LOAD(&m->guards[MH_METRICS_STALL]));
    if (w->client_metrics_hook)
        w->client_metrics_hook(w, out);
    /* mh_buf_append fails only for lack of memory; then the text is cut short. */
    return out->len > start ? 0 : -1;
}

/* ---- the metrics listener ------------------------------------------------ */

struct scrape {
    struct mh_metrics_server *srv;
    int fd;
    ev_io io;
    ev_timer timer;
    char in[2048];
    size_t inlen;
    struct mh_buf out;
    size_t sent;
    struct scrape *next, *prev;
};

struct mh_metrics_server {
    struct mh_worker *w;
    int fd;
    ev_io io;
    struct scrape *scrapes;
};

#define SCRAPE_TIMEOUT 5.0

static void scrape_free(struct scrape *s)
{
    struct ev_loop *loop = s->srv->w->loop;
    ev_io_stop(loop, &s->io);
    ev_timer_stop(loop, &s->timer);
    close(s->fd);
    if (s->prev)
        s->prev->next = s->next;
    else
        s->srv->scrapes = s->next;
    if (s->next)
        s->next->prev = s->prev;
    mh_buf_free(&s->out);
    free(s);
}

static void scrape_write(struct scrape *s)
{
    while (s->sent < s->out.len) {
        ssize_t n = send(s->fd, s->out.data + s->sent, s->out.len - s->sent, MSG_NOSIGNAL);
        if (n > 0) {
            s->sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            ev_io_stop(s->srv->w->loop, &s->io);
            ev_io_set(&s->io, s->fd, EV_WRITE);
            ev_io_start(s->srv->w->loop, &s->io);
            return;
        }
        break;
    }
    scrape_free(s);
}

static void scrape_respond(struct scrape *s)
{
    struct mh_buf body = {0};
    int status = 200;
    if (strncmp(s->in, "GET ", 4) != 0 && strncmp(s->in, "HEAD ", 5) != 0)
        status = 405, mh_buf_append_str(&body, "only GET\n");
    else if (mh_metrics_render(s->srv->w->metrics, s->srv->w, &body) < 0)
        status = 500;
    char head[256];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, status == 200 ? "OK" : "Error", body.len);
    mh_buf_append(&s->out, head, (size_t)n);
    if (strncmp(s->in, "HEAD ", 5) != 0)
        mh_buf_append(&s->out, body.data, body.len);
    mh_buf_free(&body);
    scrape_write(s);
}

static void on_scrape_io(struct ev_loop *loop, ev_io *io, int revents)
{
    struct scrape *s = io->data;
    (void)loop;
    if (revents & EV_WRITE) {
        scrape_write(s);
        return;
    }
    ssize_t n = read(s->fd, s->in + s->inlen, sizeof s->in - 1 - s->inlen);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n <= 0) {
        scrape_free(s);
        return;
    }
    s->inlen += (size_t)n;
    s->in[s->inlen] = 0;
    if (strstr(s->in, "\r\n\r\n") || strstr(s->in, "\n\n")) {
        ev_io_stop(loop, &s->io);
        scrape_respond(s);
    } else if (s->inlen == sizeof s->in - 1) {
        scrape_free(s);
    }
}

static void on_scrape_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    scrape_free(t->data);
}

static void on_metrics_accept(struct ev_loop *loop, ev_io *io, int revents)
{
    struct mh_metrics_server *srv = io->data;
    (void)revents;
    for (int i = 0; i < 16; i++) {
        int fd = accept4(srv->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        struct scrape *s = calloc(1, sizeof *s);
        if (!s) {
            close(fd);
            return;
        }
        s->srv = srv;
        s->fd = fd;
        s->next = srv->scrapes;
        if (s->next)
            s->next->prev = s;
        srv->scrapes = s;
        ev_io_init(&s->io, on_scrape_io, fd, EV_READ);
        s->io.data = s;
        ev_io_start(loop, &s->io);
        ev_timer_init(&s->timer, on_scrape_timeout, SCRAPE_TIMEOUT, 0.);
        s->timer.data = s;
        ev_timer_start(loop, &s->timer);
    }
}

struct mh_metrics_server *mh_metrics_server_start(struct mh_worker *w, int fd)
{
    struct mh_metrics_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return NULL;
    srv->w = w;
    srv->fd = fd;
    ev_io_init(&srv->io, on_metrics_accept, fd, EV_READ);
    srv->io.data = srv;
    ev_io_start(w->loop, &srv->io);
    return srv;
}

void mh_metrics_server_close_listener(struct mh_metrics_server *srv)
{
    if (srv && srv->fd >= 0) {
        ev_io_stop(srv->w->loop, &srv->io);
        close(srv->fd);
        srv->fd = -1;
    }
}

void mh_metrics_server_free(struct mh_metrics_server *srv)
{
    if (!srv)
        return;
    mh_metrics_server_close_listener(srv);
    while (srv->scrapes)
        scrape_free(srv->scrapes);
    free(srv);
}
