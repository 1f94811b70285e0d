#include "access_log.h"

#include "req.h"
#include "lua_vm.h"
#include "router.h"
#include "settings.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FLUSH_AT       (32 * 1024)
#define FLUSH_AFTER    0.2
#define LINE_MAX_BYTES 8192 /* longer fields are cut */
/*
 * Room an escaped field leaves for the rest of the line: the keys, numbers,
 * address, method, request id and closing bytes (under 600 bytes), so a
 * line whose fields were cut still ends as it should (a JSON line stays
 * valid JSON).
 */
#define LINE_TAIL_BYTES 1024

struct mh_access_log {
    struct ev_loop *loop;
    int fd;
    enum mh_access_format fmt;
    const char *request_id_header; /* the config's string, or NULL */
    /* access_log_redact's names, as slices of redact_names */
    size_t nredact;
    struct {
        size_t off, len;
    } redact[MH_ACCESS_REDACT_MAX];
    char redact_names[256];
    ev_timer timer;
    time_t time_sec; /* second the cached time text is for */
    char time_text[64];
    size_t len;
    char buf[FLUSH_AT + LINE_MAX_BYTES];
};

int mh_access_format_parse(const char *s)
{
    if (!strcmp(s, "common"))
        return MH_ACCESS_COMMON;
    if (!strcmp(s, "combined"))
        return MH_ACCESS_COMBINED;
    if (!strcmp(s, "json"))
        return MH_ACCESS_JSON;
    return -1;
}

int mh_access_log_open(const char *path)
{
    if (!strcmp(path, "-"))
        return STDOUT_FILENO;
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

void mh_access_log_flush(struct mh_access_log *a)
{
    size_t off = 0;
    while (off < a->len) {
        ssize_t n = write(a->fd, a->buf + off, a->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* a full disk loses log lines, not requests */
        off += (size_t)n;
    }
    a->len = 0;
    ev_timer_stop(a->loop, &a->timer);
}

static void on_flush_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    mh_access_log_flush(t->data);
}

/* Splits access_log_redact ("off" or "a,b") into a's names; what does not fit is dropped. */
static void set_redact(struct mh_access_log *a, const char *names)
{
    a->nredact = 0;
    if (!names || !strcmp(names, "off"))
        return;
    snprintf(a->redact_names, sizeof a->redact_names, "%s", names);
    for (size_t off = 0; a->redact_names[off] && a->nredact < MH_ACCESS_REDACT_MAX;) {
        size_t len = strcspn(a->redact_names + off, ",");
        a->redact[a->nredact].off = off;
        a->redact[a->nredact++].len = len;
        off += len + (a->redact_names[off + len] == ',');
    }
}

static bool redacted_name(const struct mh_access_log *a, const char *name, size_t len)
{
    for (size_t i = 0; i < a->nredact; i++)
        if (a->redact[i].len == len && !memcmp(a->redact_names + a->redact[i].off, name, len))
            return true;
    return false;
}

/*
 * The request target (or a query) with the values of access_log_redact's
 * parameters written as REDACTED, into out; returns its length. Only what
 * follows the first '?' is looked at when `query_only` is false.
 */
static size_t redact_target(const struct mh_access_log *a, const char *s, size_t n, bool query_only,
                            char *out, size_t outlen)
{
    size_t i = 0, o = 0;
    if (!query_only) {
        const char *q = memchr(s, '?', n);
        i = q ? (size_t)(q - s) + 1 : n;
        o = i < outlen ? i : outlen;
        memcpy(out, s, o);
    }
    while (i < n && o < outlen) {
        size_t end = i;
        while (end < n && s[end] != '&')
            end++;
        const char *eq = memchr(s + i, '=', end - i);
        bool hide = eq && redacted_name(a, s + i, (size_t)(eq - (s + i)));
        size_t keep = hide ? (size_t)(eq - s) + 1 - i : end - i;
        size_t take = keep < outlen - o ? keep : outlen - o;
        memcpy(out + o, s + i, take);
        o += take;
        if (hide && outlen - o >= 8) {
            memcpy(out + o, "REDACTED", 8);
            o += 8;
        }
        if (end < n && o < outlen)
            out[o++] = '&';
        i = end + 1;
    }
    return o;
}

struct mh_access_log *mh_access_log_new(struct ev_loop *loop, int fd, enum mh_access_format fmt,
                                        const char *request_id_header, const char *redact)
{
    struct mh_access_log *a = malloc(sizeof *a);
    if (!a)
        return NULL;
    set_redact(a, redact);
    a->loop = loop;
    a->fd = fd;
    a->fmt = fmt;
    a->request_id_header = request_id_header;
    a->len = 0;
    a->time_sec = -1;
    ev_init(&a->timer, on_flush_timer);
    a->timer.data = a;
    return a;
}

void mh_access_log_free(struct mh_access_log *a)
{
    if (!a)
        return;
    mh_access_log_flush(a);
    free(a);
}

struct line {
    char *p, *end;
};

static void put(struct line *l, const char *s, size_t n)
{
    if (n > (size_t)(l->end - l->p))
        n = (size_t)(l->end - l->p);
    memcpy(l->p, s, n);
    l->p += n;
}

static void puts_(struct line *l, const char *s)
{
    put(l, s, strlen(s));
}

static void putf(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct line *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(l->p, (size_t)(l->end - l->p), fmt, ap);
    va_end(ap);
    if (n > 0)
        l->p += (size_t)n < (size_t)(l->end - l->p) ? (size_t)n : (size_t)(l->end - l->p) - 1;
}

/*
 * Client-controlled bytes: quotes, backslashes, control and non-ASCII bytes
 * escaped, so a line cannot be forged or broken (\xHH as nginx; JSON \u00HH).
 * Cut where LINE_TAIL_BYTES would be left, never inside an escape.
 */
static void put_escaped(struct line *l, const char *s, size_t n, bool json)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n && l->end - l->p > LINE_TAIL_BYTES + 6; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            *l->p++ = '\\';
            *l->p++ = (char)ch;
        } else if (ch < 0x20 || ch >= 0x7f) {
            if (json) {
                memcpy(l->p, "\\u00", 4);
                l->p += 4;
            } else {
                *l->p++ = '\\';
                *l->p++ = 'x';
            }
            *l->p++ = hex[ch >> 4];
            *l->p++ = hex[ch & 15];
        } else {
            *l->p++ = (char)ch;
        }
    }
}

static void put_header(struct line *l, const struct mh_req *c, const char *name, bool json)
{
    size_t vlen;
    const char *v = mh_req_header(c, name, strlen(name), &vlen);
    if (!v) {
        puts_(l, json ? "\"\"" : "\"-\"");
        return;
    }
    puts_(l, "\"");
    put_escaped(l, v, vlen, json);
    puts_(l, "\"");
}

/* Closes the string before it and adds ,"name":"slice of head" (escaped). */
static void put_json_field(struct line *l, const char *name, const char *head, struct mh_slice v)
{
    putf(l, "\",\"%s\":\"", name);
    put_escaped(l, head + v.off, v.len, true);
}

static const char *clf_time(struct mh_access_log *a, bool iso)
{
    time_t now = (time_t)ev_now(a->loop);
    if (now != a->time_sec) {
        struct tm tm;
        localtime_r(&now, &tm);
        strftime(a->time_text, sizeof a->time_text, "%d/%b/%Y:%H:%M:%S %z", &tm);
        a->time_sec = now;
    }
    (void)iso;
    return a->time_text;
}

void mh_access_log_request(struct mh_access_log *a, const struct mh_req *c, double seconds)
{
    struct line l = {a->buf + a->len, a->buf + a->len + LINE_MAX_BYTES - 2};
    char addr[64];
    c->ops->remote_addr(c, addr, sizeof addr);
    char *colon = strrchr(addr, ':'); /* the log wants the host, not the port */
    if (colon)
        *colon = 0;
    const char *host = addr[0] == '[' ? addr + 1 : addr;
    if (addr[0] == '[' && colon && colon[-1] == ']')
        colon[-1] = 0;
    const char *method = mh_req_method(c);
    const char *target = mh_req_head(c) + c->head.target.off;
    size_t target_len = c->head.target.len;
    struct mh_slice query = c->head.query;
    const char *query_base = mh_req_head(c);
    char clean_target[LINE_MAX_BYTES], clean_query[LINE_MAX_BYTES];
    if (a->nredact && query.len) {
        target_len = redact_target(a, target, target_len, false, clean_target, sizeof clean_target);
        target = clean_target;
        query.len = redact_target(a, query_base + query.off, query.len, true, clean_query,
                                  sizeof clean_query);
        query.off = 0;
        query_base = clean_query;
    }
    unsigned long long bytes = (unsigned long long)c->res.body_sent;
    bool json = a->fmt == MH_ACCESS_JSON;
    if (json) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        char when[40];
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
        putf(&l,
             "{\"time\":\"%s.%03ldZ\",\"pid\":%ld,\"remote_addr\":\"%s\",\"method\":\"%s\","
             "\"target\":\"",
             when, ts.tv_nsec / 1000000, (long)getpid(), host, method);
        put_escaped(&l, target, target_len, true);
        put_json_field(&l, "path", mh_req_head(c), c->head.path);
        put_json_field(&l, "query", query_base, query);
        put_json_field(&l, "host", mh_req_head(c), c->head.host);
        putf(&l,
             "\",\"proto\":\"HTTP/%d.%d\",\"status\":%d,\"bytes\":%llu,\"duration_ms\":%.3f,"
             "\"pattern\":",
             c->head.http_major, c->head.http_minor, c->res.status, bytes, seconds * 1000);
        if (c->routed.route) {
            puts_(&l, "\"");
            const char *p = mh_route_pattern(c->routed.route);
            put_escaped(&l, p, strlen(p), true);
            puts_(&l, "\"");
        } else {
            puts_(&l, "null");
        }
        puts_(&l, ",\"referer\":");
        put_header(&l, c, "referer", true);
        puts_(&l, ",\"user_agent\":");
        put_header(&l, c, "user-agent", true);
        size_t idlen;
        const char *id = mh_req_id(c, a->request_id_header, &idlen);
        puts_(&l, ",\"request_id\":\"");
        put(&l, id, idlen); /* mh_req_id's alphabet needs no escaping */
        puts_(&l, "\"}");
    } else {
        putf(&l, "%s - - [%s] \"%s ", host, clf_time(a, false), method);
        put_escaped(&l, target, target_len, false);
        putf(&l, " HTTP/%d.%d\" %d ", c->head.http_major, c->head.http_minor, c->res.status);
        if (bytes)
            putf(&l, "%llu", bytes);
        else
            puts_(&l, "-");
        if (a->fmt == MH_ACCESS_COMBINED) {
            puts_(&l, " ");
            put_header(&l, c, "referer", false);
            puts_(&l, " ");
            put_header(&l, c, "user-agent", false);
        }
    }
    *l.p++ = '\n';
    bool was_empty = a->len == 0;
    a->len = (size_t)(l.p - a->buf);
    if (a->len >= FLUSH_AT) {
        mh_access_log_flush(a);
    } else if (was_empty) {
        ev_timer_set(&a->timer, FLUSH_AFTER, 0.);
        ev_timer_start(a->loop, &a->timer);
    }
}
