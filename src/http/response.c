#include "response.h"

#include "request.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Copies n bytes to p and returns the end: heads are assembled with no per-piece checks. */
static inline char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

#define PUT_LIT(p, lit) put((p), (lit), sizeof(lit) - 1)

void mh_response_reset(struct mh_response *r)
{
    struct mh_buf h = r->headers, b = r->body;
    h.len = b.len = 0;
    memset(r, 0, sizeof *r);
    r->headers = h;
    r->body = b;
    r->status = 200;
}

void mh_response_free(struct mh_response *r)
{
    mh_buf_free(&r->headers);
    mh_buf_free(&r->body);
}

bool mh_status_bodyless(int status)
{
    return (status >= 100 && status < 200) || status == 204 || status == 304;
}

/*
 * Reason phrases for every code Go's net/http StatusText knows, with RFC 9110's
 * newer names where it renamed one (413, 414, 416, 422). Indexed by code so a
 * lookup is one load.
 */
static const char *const status_texts[600] = {
    [100] = "Continue",
    [101] = "Switching Protocols",
    [102] = "Processing",
    [103] = "Early Hints",
    [200] = "OK",
    [201] = "Created",
    [202] = "Accepted",
    [203] = "Non-Authoritative Information",
    [204] = "No Content",
    [205] = "Reset Content",
    [206] = "Partial Content",
    [207] = "Multi-Status",
    [208] = "Already Reported",
    [226] = "IM Used",
    [300] = "Multiple Choices",
    [301] = "Moved Permanently",
    [302] = "Found",
    [303] = "See Other",
    [304] = "Not Modified",
    [305] = "Use Proxy",
    [307] = "Temporary Redirect",
    [308] = "Permanent Redirect",
    [400] = "Bad Request",
    [401] = "Unauthorized",
    [402] = "Payment Required",
    [403] = "Forbidden",
    [404] = "Not Found",
    [405] = "Method Not Allowed",
    [406] = "Not Acceptable",
    [407] = "Proxy Authentication Required",
    [408] = "Request Timeout",
    [409] = "Conflict",
    [410] = "Gone",
    [411] = "Length Required",
    [412] = "Precondition Failed",
    [413] = "Content Too Large",
    [414] = "URI Too Long",
    [415] = "Unsupported Media Type",
    [416] = "Range Not Satisfiable",
    [417] = "Expectation Failed",
    [418] = "I'm a teapot",
    [421] = "Misdirected Request",
    [422] = "Unprocessable Content",
    [423] = "Locked",
    [424] = "Failed Dependency",
    [425] = "Too Early",
    [426] = "Upgrade Required",
    [428] = "Precondition Required",
    [429] = "Too Many Requests",
    [431] = "Request Header Fields Too Large",
    [451] = "Unavailable For Legal Reasons",
    [500] = "Internal Server Error",
    [501] = "Not Implemented",
    [502] = "Bad Gateway",
    [503] = "Service Unavailable",
    [504] = "Gateway Timeout",
    [505] = "HTTP Version Not Supported",
    [506] = "Variant Also Negotiates",
    [507] = "Insufficient Storage",
    [508] = "Loop Detected",
    [510] = "Not Extended",
    [511] = "Network Authentication Required",
};

const char *mh_status_text(int s)
{
    const char *t = s >= 0 && s < 600 ? status_texts[s] : NULL;
    return t ? t : "Unknown";
}

/* Removes every serialized header line named `name`. */
static void remove_header(struct mh_buf *h, const char *name, size_t nlen)
{
    size_t i = 0;
    while (i < h->len) {
        char *line = h->data + i;
        char *eol = memchr(line, '\n', h->len - i);
        size_t llen = (size_t)(eol - line) + 1;
        char *colon = memchr(line, ':', llen);
        if (colon && mh_strieq(line, (size_t)(colon - line), name, nlen)) {
            memmove(line, line + llen, h->len - i - llen);
            h->len -= llen;
        } else {
            i += llen;
        }
    }
}

const char *mh_response_header(struct mh_response *r, const char *name, size_t nlen,
                               const char *value, size_t vlen, bool replace)
{
    if (nlen == 0)
        return "empty header name";
    for (size_t i = 0; i < nlen; i++)
        if (!mh_is_tchar((unsigned char)name[i]))
            return "invalid character in header name";
    if (mh_value_has_stop(value, vlen))
        return "CR, LF or NUL in header value";
    switch (nlen) { /* the headers the server interprets, found by length first */
    case 14:
        if (mh_strieq(name, nlen, "Content-Length", 14)) {
            uint64_t v = 0;
            if (vlen == 0 || vlen > 19)
                return "bad Content-Length";
            for (size_t i = 0; i < vlen; i++) {
                if (value[i] < '0' || value[i] > '9')
                    return "bad Content-Length";
                v = v * 10 + (uint64_t)(value[i] - '0');
            }
            r->has_length = true;
            r->declared_length = v;
            return NULL;
        }
        break;
    case 10:
        if (mh_strieq(name, nlen, "Connection", 10)) {
            if (mh_strieq(value, vlen, "close", 5))
                r->close = true;
            return NULL;
        }
        break;
    case 17:
        if (mh_strieq(name, nlen, "Transfer-Encoding", 17))
            return "Transfer-Encoding is managed by the server";
        break;
    case 12:
        if (mh_strieq(name, nlen, "Content-Type", 12))
            r->has_type = true;
        break;
    case 6:
        if (mh_strieq(name, nlen, "Server", 6))
            r->has_server = true;
        break;
    }
    if (replace && r->headers.len)
        remove_header(&r->headers, name, nlen);
    if (mh_buf_reserve(&r->headers, nlen + vlen + 4) < 0)
        return "out of memory";
    char *p = r->headers.data + r->headers.len;
    p = put(p, name, nlen);
    p = PUT_LIT(p, ": ");
    p = put(p, value, vlen);
    p = PUT_LIT(p, "\r\n");
    r->headers.len = (size_t)(p - r->headers.data);
    return NULL;
}

static char *put_status_line(char *p, int status)
{
    /* The common lines are constants: no formatting on the hot path. */
    switch (status) {
    case 200:
        return PUT_LIT(p, "HTTP/1.1 200 OK\r\n");
    case 404:
        return PUT_LIT(p, "HTTP/1.1 404 Not Found\r\n");
    default: {
        const char *text = mh_status_text(status);
        p = PUT_LIT(p, "HTTP/1.1 ");
        *p++ = (char)('0' + status / 100);
        *p++ = (char)('0' + status / 10 % 10);
        *p++ = (char)('0' + status % 10);
        *p++ = ' ';
        p = put(p, text, strlen(text));
        return PUT_LIT(p, "\r\n");
    }
    }
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24], *t = tmp + sizeof tmp;
    do {
        *--t = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return put(p, t, (size_t)(tmp + sizeof tmp - t));
}

/* Longest status line plus the fixed headers we may add, with room to spare. */
#define HEAD_FIXED_MAX 256

static int append_head(struct mh_response *r, struct mh_buf *out, const struct mh_head_ctx *ctx,
                       bool complete)
{
    bool bodyless = mh_status_bodyless(r->status);
    if (mh_buf_reserve(out, HEAD_FIXED_MAX + r->headers.len + ctx->date_len) < 0)
        return -1;
    char *p = out->data + out->len;
    p = put_status_line(p, r->status);
    if (!r->has_server)
        p = PUT_LIT(p, "Server: moonhttp\r\n");
    p = put(p, ctx->date_line, ctx->date_len);
    if (!r->has_type && !bodyless && (r->body.len > 0 || !complete))
        p = PUT_LIT(p, "Content-Type: text/plain; charset=utf-8\r\n");
    if (r->headers.len)
        p = put(p, r->headers.data, r->headers.len);
    if (!bodyless) {
        if (r->has_length || complete) {
            p = PUT_LIT(p, "Content-Length: ");
            p = put_u64(p, r->has_length ? r->declared_length : r->body.len);
            p = PUT_LIT(p, "\r\n");
        } else if (ctx->http_minor >= 1) {
            r->chunked = true;
            p = PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
        }
        /* else: HTTP/1.0 without a length: the body ends when we close. */
    }
    if (!ctx->keep_alive)
        p = PUT_LIT(p, "Connection: close\r\n");
    else if (ctx->http_minor == 0)
        p = PUT_LIT(p, "Connection: keep-alive\r\n");
    p = PUT_LIT(p, "\r\n");
    out->len = (size_t)(p - out->data);
    r->head_sent = true;
    return 0;
}

int mh_response_emit(struct mh_response *r, struct mh_buf *out, const struct mh_head_ctx *ctx,
                     bool complete)
{
    if (!r->head_sent && append_head(r, out, ctx, complete) < 0)
        return -1;
    bool send_body = !ctx->head_method && !mh_status_bodyless(r->status);
    if (r->body.len && send_body) {
        if (r->chunked) {
            char sz[24];
            int n = snprintf(sz, sizeof sz, "%zx\r\n", r->body.len);
            if (mh_buf_reserve(out, (size_t)n + r->body.len + 2) < 0)
                return -1;
            mh_buf_append(out, sz, (size_t)n);
            mh_buf_append(out, r->body.data, r->body.len);
            mh_buf_append(out, "\r\n", 2);
        } else if (mh_buf_append(out, r->body.data, r->body.len) < 0) {
            return -1;
        }
    }
    r->body_sent += r->body.len;
    r->body.len = 0;
    if (complete && r->chunked && send_body && mh_buf_append(out, "0\r\n\r\n", 5) < 0)
        return -1;
    return 0;
}

int mh_response_simple(struct mh_buf *out, int status, const char *extra, const char *body,
                       const struct mh_head_ctx *ctx)
{
    struct mh_response r;
    memset(&r, 0, sizeof r);
    r.status = status;
    if (extra)
        r.headers.data = (char *)extra, r.headers.len = strlen(extra);
    if (body)
        r.body.data = (char *)body, r.body.len = strlen(body);
    return mh_response_emit(&r, out, ctx, true);
}
