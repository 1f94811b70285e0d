#include "metrics.h"

#include "app_metrics.h"
#include "conn.h"
#include "log.h"
#include "req.h"

#include <llhttp.h>

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
    uint32_t ndraining;
    struct mh_metrics_draining draining[MH_METRICS_DRAIN_GENS];
};

struct mh_metrics {
    struct mh_app_metrics *app; /* a mapping of its own, made with this one */
    struct mh_reload_stats reload;
    unsigned long task_errors[MH_METRICS_TASK_KINDS];
    uint64_t guards[MH_METRICS_NGUARDS];
    uint64_t protos[MH_METRICS_NPROTOS];
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
    if (!(m->app = mh_app_metrics_new())) {
        munmap(p, sizeof(struct mh_metrics));
        return NULL;
    }
    strcpy(m->other.pattern, "(other)");
    strcpy(m->unmatched.pattern, "(unmatched)");
    return m;
}

void mh_metrics_free(struct mh_metrics *m)
{
    if (m) {
        mh_app_metrics_free(m->app);
        munmap(m, sizeof *m);
    }
}

struct mh_app_metrics *mh_metrics_app(struct mh_metrics *m)
{
    return m->app;
}

void mh_metrics_count_task_error(struct mh_metrics *m, enum mh_metrics_task kind)
{
    ADD(&m->task_errors[kind], 1);
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

void mh_metrics_count_proto(struct mh_metrics *m, enum mh_metrics_proto proto)
{
    ADD(&m->protos[proto], 1);
}

void mh_metrics_count_guard(struct mh_metrics *m, enum mh_metrics_guard what)
{
    ADD(&m->guards[what], 1);
}

/* pid's slot, claimed if it has none yet; NULL when all are taken. */
static struct worker_slot *slot_of(struct mh_metrics *m, pid_t pid)
{
    for (size_t i = 0; i < NWORKER_SLOTS; i++)
        if (LOAD(&m->workers[i].pid) == pid)
            return &m->workers[i];
    for (size_t i = 0; i < NWORKER_SLOTS; i++) {
        int32_t expect = 0;
        if (__atomic_compare_exchange_n(&m->workers[i].pid, &expect, (int32_t)pid, false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return &m->workers[i];
    }
    return NULL;
}

void mh_metrics_publish_conns(struct mh_metrics *m, pid_t pid, size_t open, size_t idle)
{
    struct worker_slot *w = slot_of(m, pid);
    if (!w)
        return;
    __atomic_store_n(&w->open, open, __ATOMIC_RELAXED);
    __atomic_store_n(&w->idle, idle, __ATOMIC_RELAXED);
}

void mh_metrics_publish_draining(struct mh_metrics *m, pid_t pid,
                                 const struct mh_metrics_draining *d, size_t n)
{
    struct worker_slot *w = slot_of(m, pid);
    if (!w)
        return;
    if (n > MH_METRICS_DRAIN_GENS)
        n = MH_METRICS_DRAIN_GENS;
    /* A scrape meanwhile may see a mix of two publications: a gauge, fine. */
    __atomic_store_n(&w->ndraining, 0, __ATOMIC_RELAXED);
    for (size_t i = 0; i < n; i++) {
        __atomic_store_n(&w->draining[i].generation, d[i].generation, __ATOMIC_RELAXED);
        __atomic_store_n(&w->draining[i].conns, d[i].conns, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&w->ndraining, (uint32_t)n, __ATOMIC_RELEASE);
}

void mh_metrics_forget_worker(struct mh_metrics *m, pid_t pid)
{
    if (!m)
        return;
    mh_app_metrics_forget_worker(m->app, (int)pid); /* its shares of per_worker gauges */
    for (size_t i = 0; i < NWORKER_SLOTS; i++) {
        struct worker_slot *w = &m->workers[i];
        if (LOAD(&w->pid) == pid) {
            __atomic_store_n(&w->open, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&w->idle, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&w->ndraining, 0, __ATOMIC_RELAXED);
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

/* A labelled counter family: HELP, TYPE, then one line per label value (names[i] for counters[i]).
 */
static void counter_family(struct mh_buf *out, const char *name, const char *help,
                           const char *label, const char *const *names, const uint64_t *counters,
                           int n)
{
    appendf(out, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (int i = 0; i < n; i++)
        appendf(out, "%s{%s=\"%s\"} %llu\n", name, label, names[i],
                (unsigned long long)LOAD(&counters[i]));
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

/* moonhttp_connections_draining: the workers' counts summed by generation. */
static void render_draining(struct mh_metrics *m, struct mh_buf *out)
{
    struct mh_metrics_draining sum[64];
    size_t nsum = 0;
    for (size_t i = 0; i < NWORKER_SLOTS; i++) {
        struct worker_slot *w = &m->workers[i];
        if (!LOAD(&w->pid))
            continue;
        uint32_t n = __atomic_load_n(&w->ndraining, __ATOMIC_ACQUIRE);
        for (uint32_t k = 0; k < n && k < MH_METRICS_DRAIN_GENS; k++) {
            uint64_t gen = LOAD(&w->draining[k].generation), conns = LOAD(&w->draining[k].conns);
            size_t j = 0;
            while (j < nsum && sum[j].generation != gen)
                j++;
            if (j == nsum) {
                if (nsum == sizeof sum / sizeof sum[0])
                    continue;
                sum[nsum++] = (struct mh_metrics_draining){.generation = gen};
            }
            sum[j].conns += conns;
        }
    }
    mh_buf_append_str(out, "# HELP moonhttp_connections_draining Connections still open on code a "
                           "reload replaced (drain_timeout), by its generation (0: the start, "
                           "then one per reload).\n# TYPE moonhttp_connections_draining gauge\n");
    for (size_t j = 0; j < nsum; j++)
        appendf(out, "moonhttp_connections_draining{generation=\"%llu\"} %llu\n",
                (unsigned long long)sum[j].generation, (unsigned long long)sum[j].conns);
}

int mh_metrics_render(struct mh_metrics *m, size_t own_open, size_t own_idle, struct mh_buf *out)
{
    size_t start = out->len;
    mh_metrics_publish_conns(m, getpid(), own_open, own_idle);
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
    render_draining(m, out);
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
    static const char *const task_kinds[MH_METRICS_TASK_KINDS] = {"timer", "on_start", "thread"};
    mh_buf_append_str(out, "# HELP moonhttp_task_errors_total Timer callbacks, on_start functions "
                           "and light threads that failed.\n"
                           "# TYPE moonhttp_task_errors_total counter\n");
    for (int k = 0; k < MH_METRICS_TASK_KINDS; k++)
        appendf(out, "moonhttp_task_errors_total{kind=\"%s\"} %lu\n", task_kinds[k],
                LOAD(&m->task_errors[k]));
    static const char *const guard_names[MH_METRICS_NGUARDS] = {
        [MH_METRICS_CPU_LIMIT] = "cpu_limit",
        [MH_METRICS_MEMORY_LIMIT] = "memory_limit",
        [MH_METRICS_STALL] = "worker_stall",
        [MH_METRICS_LOOP_BLOCKED] = "loop_blocked",
    };
    counter_family(out, "moonhttp_guard_events_total",
                   "Tasks stopped by handler_cpu_limit or lua_memory_limit, workers killed "
                   "for a stalled loop, and tasks that held their loop past loop_block_warn.",
                   "guard", guard_names, m->guards, MH_METRICS_NGUARDS);
    static const char *const proto_names[MH_METRICS_NPROTOS] = {
        [MH_METRICS_HTTP10] = "HTTP/1.0",
        [MH_METRICS_HTTP11] = "HTTP/1.1",
        [MH_METRICS_HTTP2] = "HTTP/2.0",
    };
    counter_family(out, "moonhttp_requests_by_protocol_total",
                   "Finished requests by protocol version.", "protocol", proto_names, m->protos,
                   MH_METRICS_NPROTOS);
    mh_app_metrics_render(m->app, out);
    /* mh_buf_append fails only for lack of memory; then the text is cut short. */
    return out->len > start ? 0 : -1;
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

/* ---- the endpoint: an ordinary C handler --------------------------------- */

static void metrics_start(const struct mh_handler *base, struct mh_req *r)
{
    const struct mh_metrics_handler *h = (const struct mh_metrics_handler *)base;
    uint8_t method = r->head.method;
    if (method != HTTP_GET && method != HTTP_HEAD) {
        r->res.status = 405;
        mh_req_set_header(r, "Allow", 5, "GET, HEAD", 9, true);
        mh_req_write(r, "only GET\n", 9);
        mh_req_finish(r);
        return;
    }
    /* The text is rendered into the response's own queue: no copy, no allocation per scrape. */
    struct mh_buf text = {0};
    struct mh_http_counts n = {0};
    if (h->http)
        n = mh_http_counts(h->http);
    if (mh_metrics_render(h->m, n.open, n.idle, &text) < 0) {
        mh_buf_free(&text);
        mh_req_respond(r, 500, "500 Internal Server Error\n");
        return;
    }
    mh_req_set_header(r, "Content-Type", 12, "text/plain; version=0.0.4; charset=utf-8", 40, true);
    mh_req_write(r, text.data, text.len);
    mh_buf_free(&text);
    mh_req_finish(r);
}

static const struct mh_handler_ops metrics_ops = {.name = "metrics", .start = metrics_start};

void mh_metrics_handler_init(struct mh_metrics_handler *h, struct mh_metrics *m,
                             const struct mh_http_ctx *http)
{
    h->base.ops = &metrics_ops;
    h->m = m;
    h->http = http;
}
