/*
 * Metrics table tests: counting by pattern and status class, cumulative
 * histogram buckets, label escaping, worker gauges, the overflow slot, and
 * counts from two processes sharing the mapping.
 */
#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit.h"

static char *render(struct mh_metrics *m)
{
    struct mh_buf out = {0};
    mh_metrics_render(m, 0, 0, &out);
    mh_buf_append(&out, "", 1);
    return out.data;
}

static void has_line(const char *text, const char *line)
{
    const char *p = strstr(text, line);
    bool ok = p && (p == text || p[-1] == '\n') && p[strlen(line)] == '\n';
    CHECKF(ok, "missing line: %s", line);
}

int main(void)
{
    struct mh_metrics *m = mh_metrics_new();
    CHECKF(m != NULL, "mh_metrics_new");
    mh_metrics_record(m, "GET /a", 200, 0.0005);
    mh_metrics_record(m, "GET /a", 201, 0.003);
    mh_metrics_record(m, "GET /a", 503, 20);
    mh_metrics_record(m, NULL, 404, 0.0001);
    mh_metrics_record(m, "GET /q/\"x\"\\y", 200, 0.1);
    char *t = render(m);
    has_line(t, "moonhttp_requests_total{pattern=\"GET /a\",status=\"2xx\"} 2");
    has_line(t, "moonhttp_requests_total{pattern=\"GET /a\",status=\"5xx\"} 1");
    has_line(t, "moonhttp_requests_total{pattern=\"(unmatched)\",status=\"4xx\"} 1");
    has_line(t, "moonhttp_request_duration_seconds_bucket{pattern=\"GET /a\",le=\"0.001\"} 1");
    has_line(t, "moonhttp_request_duration_seconds_bucket{pattern=\"GET /a\",le=\"0.005\"} 2");
    has_line(t, "moonhttp_request_duration_seconds_bucket{pattern=\"GET /a\",le=\"10\"} 2");
    has_line(t, "moonhttp_request_duration_seconds_bucket{pattern=\"GET /a\",le=\"+Inf\"} 3");
    has_line(t, "moonhttp_request_duration_seconds_count{pattern=\"GET /a\"} 3");
    has_line(t, "moonhttp_requests_total{pattern=\"GET /q/\\\"x\\\"\\\\y\",status=\"2xx\"} 1");
    has_line(t, "moonhttp_reloads_total 0");
    free(t);

    /* gauges: the rendering worker publishes its own (0, 0 here) */
    mh_metrics_publish_conns(m, 999999, 5, 2);
    t = render(m);
    has_line(t, "moonhttp_connections{state=\"open\"} 5");
    has_line(t, "moonhttp_connections{state=\"idle\"} 2");
    has_line(t, "moonhttp_workers 2");
    free(t);
    mh_metrics_forget_worker(m, 999999);
    t = render(m);
    has_line(t, "moonhttp_workers 1");
    free(t);

    /* reload stats and the error label */
    struct mh_reload_stats *rs = mh_metrics_reload_stats(m);
    mh_reload_stats_failed(rs, "app.lua:3: ')' expected\nstack traceback: ...");
    t = render(m);
    has_line(t, "moonhttp_reload_failures_total 1");
    has_line(t, "moonhttp_reload_last_failed 1");
    has_line(t, "moonhttp_reload_last_error_info{error=\"app.lua:3: ')' expected\"} 1");
    free(t);

    /* two processes add to the same counters */
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 10000; i++)
            mh_metrics_record(m, "GET /shared", 200, 0.001);
        _exit(0);
    }
    for (int i = 0; i < 10000; i++)
        mh_metrics_record(m, "GET /shared", 200, 0.001);
    int status;
    waitpid(pid, &status, 0);
    t = render(m);
    has_line(t, "moonhttp_requests_total{pattern=\"GET /shared\",status=\"2xx\"} 20000");
    free(t);

    /* more patterns than slots: the rest count under (other) */
    char name[64];
    for (int i = 0; i < 600; i++) {
        snprintf(name, sizeof name, "GET /p%d", i);
        mh_metrics_record(m, name, 200, 0.001);
    }
    t = render(m);
    CHECKF(strstr(t, "pattern=\"(other)\",status=\"2xx\"}") != NULL, "overflow slot");
    free(t);

    mh_metrics_free(m);
    return unit_report();
}
