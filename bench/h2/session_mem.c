/*
 * The memory of nghttp2's own server session, without moonhttp around it
 * (issue 16: what an idle h2c connection cannot go below while it keeps a
 * session). Makes N sessions with the options and SETTINGS moonhttp uses
 * (src/http/h2_conn.c), feeds each a client preface with empty SETTINGS and
 * lets it write its answer, as bench/h2/idle.py's "fresh" connections do.
 * Prints every allocation of one session (through nghttp2_mem) and the RSS
 * growth per session over N.
 *
 *   cc -O2 bench/h2/session_mem.c -lnghttp2 -o /tmp/session_mem && /tmp/session_mem 10000
 */
#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static bool tracing;
static size_t bytes;
static int calls;

static void note(const char *what, size_t n)
{
    bytes += n;
    calls++;
    if (tracing)
        printf("  %-7s %6zu B\n", what, n);
}

static void *mem_malloc(size_t n, void *ud)
{
    (void)ud;
    note("malloc", n);
    return malloc(n);
}

static void mem_free(void *p, void *ud)
{
    (void)ud;
    free(p);
}

static void *mem_calloc(size_t k, size_t n, void *ud)
{
    (void)ud;
    note("calloc", k * n);
    return calloc(k, n);
}

static void *mem_realloc(void *p, size_t n, void *ud)
{
    (void)ud;
    note("realloc", n);
    return realloc(p, n);
}

static long rss_kb(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &pages, &resident) != 2)
        resident = 0;
    if (f)
        fclose(f);
    return resident * 4;
}

static nghttp2_session *session_new(nghttp2_session_callbacks *cbs, nghttp2_option *opt, nghttp2_mem *mem)
{
    static const uint8_t preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
                                     "\x00\x00\x00\x04\x00\x00\x00\x00\x00";
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
        {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 4096},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 65536},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    nghttp2_session *s;
    const uint8_t *out;
    if (nghttp2_session_server_new3(&s, cbs, NULL, opt, mem) != 0 ||
        nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]) != 0 ||
        nghttp2_session_set_local_window_size(s, NGHTTP2_FLAG_NONE, 0, 100 * 65535) != 0 ||
        nghttp2_session_mem_recv(s, preface, sizeof preface - 1) < 0) {
        fprintf(stderr, "session_mem: nghttp2 refused the session\n");
        exit(1);
    }
    while (nghttp2_session_mem_send(s, &out) > 0)
        ;
    return s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 10000;
    nghttp2_mem mem = {NULL, mem_malloc, mem_free, mem_calloc, mem_realloc};
    nghttp2_session_callbacks *cbs;
    nghttp2_option *opt;
    if (n < 1 || nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0)
        return 1;
    nghttp2_option_set_no_auto_window_update(opt, 1);
    nghttp2_option_set_max_outbound_ack(opt, 100);
    nghttp2_option_set_max_settings(opt, 32);
    nghttp2_option_set_max_continuations(opt, 8);
    nghttp2_option_set_no_closed_streams(opt, 1);

    printf("nghttp2 %s, one session's allocations:\n", nghttp2_version(0)->version_str);
    tracing = true;
    nghttp2_session_del(session_new(cbs, opt, &mem));
    tracing = false;
    printf("  total   %6zu B in %d allocations\n", bytes, calls);

    nghttp2_session **all = calloc((size_t)n, sizeof *all);
    long before = rss_kb();
    for (int i = 0; i < n; i++)
        all[i] = session_new(cbs, opt, &mem);
    long after = rss_kb();
    printf("%d sessions: RSS %ld kB -> %ld kB, %ld B each\n", n, before, after,
           (after - before) * 1024 / n);
    for (int i = 0; i < n; i++)
        nghttp2_session_del(all[i]);
    free(all);
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cbs);
    return 0;
}
