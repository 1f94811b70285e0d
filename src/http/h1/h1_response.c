/*
 * The HTTP/1 serializer (h1_response.h): a response model (response.h) as
 * an HTTP/1 head and a body framed on the wire.
 */
#include "h1_response.h"

#include <string.h>

/* Copies n bytes to p and returns the end: heads are assembled with no per-piece checks. */
static inline char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

#define PUT_LIT(p, lit) put((p), (lit), sizeof(lit) - 1)

static inline __attribute__((always_inline)) char *put_status_line(char *p, int status)
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

/* "00" to "99": two digits a step. */
static const char digit_pairs[] =
    "00010203040506070809101112131415161718192021222324252627282930313233"
    "34353637383940414243444546474849505152535455565758596061626364656667"
    "6869707172737475767778798081828384858687888990919293949596979899";

/* Decimal digits written in place, last first, once their count is known (no copy). */
static char *put_u64(char *p, uint64_t v)
{
    size_t n = 1;
    for (uint64_t bound = 10; n < 20 && v >= bound; bound *= 10)
        n++;
    char *end = p + n;
    for (; v >= 100; v /= 100) {
        end -= 2;
        memcpy(end, digit_pairs + v % 100 * 2, 2);
    }
    if (v >= 10)
        memcpy(end - 2, digit_pairs + v * 2, 2);
    else
        end[-1] = (char)('0' + v);
    return p + n;
}

/* "Date: " IMF-fixdate CRLF is 37 bytes from the year 1000 to 9999: a fixed-size copy, no call. */
#define DATE_LINE_LEN 37

static inline char *put_date(char *p, const struct mh_h1_head_ctx *ctx)
{
    if (ctx->date_len == DATE_LINE_LEN)
        return put(p, ctx->date_line, DATE_LINE_LEN);
    return put(p, ctx->date_line, ctx->date_len);
}

/* Longest status line plus the fixed headers we may add, with room to spare. */
#define HEAD_FIXED_MAX 256

/*
 * The head, and with it (inline_body) a small body held in one memory
 * chunk: one reservation for the whole response, the common case.
 */
static int append_head(struct mh_response *r, struct mh_outq *out, const struct mh_h1_head_ctx *ctx,
                       bool complete, const char *inline_body, size_t inline_len)
{
    bool bodyless = mh_status_bodyless(r->status);
    size_t need = HEAD_FIXED_MAX + r->_hbytes.len + ctx->date_len + inline_len;
    char *p0 = mh_outq_reserve(out, need), *p = p0;
    if (!p)
        return -1;
    p = put_status_line(p, r->status);
    if (mh_response_adds_server(r))
        p = PUT_LIT(p, "Server: " MH_SERVER_NAME "\r\n");
    p = put_date(p, ctx);
    if (mh_response_adds_type(r, r->body.bytes, complete, ctx->upgrade))
        p = PUT_LIT(p, "Content-Type: " MH_DEFAULT_TYPE "\r\n");
    if (!r->_holes) {
        if (r->_hbytes.len)
            p = put(p, r->_hbytes.data, r->_hbytes.len);
    } else {
        for (uint32_t i = 0; i < r->_npairs; i++) {
            const struct mh_hpair *h = &r->_pairs[i];
            if (h->name_len) /* the line runs from the name to the CRLF after the value */
                p = put(p, r->_hbytes.data + h->name_off,
                        h->value_off + h->value_len + 2 - h->name_off);
        }
    }
    if (mh_response_adds_length(r, complete, ctx->http_minor >= 1)) {
        p = PUT_LIT(p, "Content-Length: ");
        p = put_u64(p, mh_response_length(r, r->body.bytes));
        p = PUT_LIT(p, "\r\n");
    } else if (!bodyless && ctx->http_minor >= 1) {
        r->chunked = true;
        p = PUT_LIT(p, "Transfer-Encoding: chunked\r\n");
    }
    /* else: bodyless, or HTTP/1.0 without a length: the body ends when we close. */
    if (ctx->upgrade)
        p = PUT_LIT(p, "Connection: Upgrade\r\n");
    else if (!ctx->keep_alive)
        p = PUT_LIT(p, "Connection: close\r\n");
    else if (ctx->http_minor == 0)
        p = PUT_LIT(p, "Connection: keep-alive\r\n");
    p = PUT_LIT(p, "\r\n");
    if (inline_len)
        p = put(p, inline_body, inline_len);
    mh_outq_commit(out, (size_t)(p - p0));
    r->head_sent = true;
    return 0;
}

static char *put_hex(char *p, uint64_t v)
{
    char tmp[20], *t = tmp + sizeof tmp;
    do {
        *--t = "0123456789abcdef"[v & 15];
        v >>= 4;
    } while (v);
    return put(p, t, (size_t)(tmp + sizeof tmp - t));
}

/* The chunked body's end: the last chunk, the trailer fields, the final CRLF (RFC 9112 §7.1). */
static int last_chunk(struct mh_response *r, struct mh_outq *out)
{
    if (mh_outq_append(out, "0\r\n", 3) < 0)
        return -1;
    if (r->trailers.len && mh_outq_append(out, r->trailers.data, r->trailers.len) < 0)
        return -1;
    return mh_outq_append(out, "\r\n", 2);
}

int mh_h1_response_emit(struct mh_response *r, struct mh_outq *out,
                        const struct mh_h1_head_ctx *ctx, bool complete)
{
    bool send_body = !ctx->head_method && !mh_status_bodyless(r->status);
    if (!r->head_sent) {
        const struct mh_chunk *c = mh_outq_chunk(&r->body, 0);
        bool inline_body = complete && send_body && !r->trailers.len &&
                           mh_outq_count(&r->body) == 1 && c->kind == MH_CHUNK_MEM &&
                           c->len <= MH_BUF_CHUNK;
        if (append_head(r, out, ctx, complete, inline_body ? mh_outq_chunk_mem(&r->body, c) : NULL,
                        inline_body ? (size_t)c->len : 0) < 0)
            return -1;
        if (inline_body) {
            r->body_sent += c->len;
            mh_outq_clear(&r->body);
            return 0;
        }
    }
    uint64_t n = r->body.bytes;
    if (n && send_body) {
        if (r->chunked) {
            /* The chunk-size line, the body's own chunks, then CRLF (and the terminator). */
            char *p0 = mh_outq_reserve(out, 20), *p = p0;
            if (!p)
                return -1;
            p = put_hex(p, n);
            p = PUT_LIT(p, "\r\n");
            mh_outq_commit(out, (size_t)(p - p0));
            if (mh_outq_move(out, &r->body) < 0)
                return -1;
            if (mh_outq_append(out, "\r\n", 2) < 0 || (complete && last_chunk(r, out) < 0))
                return -1;
            r->body_sent += n;
            return 0;
        }
        if (mh_outq_move(out, &r->body) < 0)
            return -1;
    } else {
        mh_outq_clear(&r->body);
    }
    r->body_sent += n;
    if (complete && r->chunked && send_body && last_chunk(r, out) < 0)
        return -1;
    return 0;
}

int mh_h1_response_simple(struct mh_outq *out, int status, const char *extra, const char *body,
                          const struct mh_h1_head_ctx *ctx)
{
    /* Without the pairs: errors before any handler are written straight to the wire. */
    bool bodyless = mh_status_bodyless(status);
    size_t elen = extra ? strlen(extra) : 0, blen = body && !bodyless ? strlen(body) : 0;
    char *p0 = mh_outq_reserve(out, HEAD_FIXED_MAX + ctx->date_len + elen + blen), *p = p0;
    if (!p)
        return -1;
    p = put_status_line(p, status);
    p = PUT_LIT(p, "Server: " MH_SERVER_NAME "\r\n");
    p = put_date(p, ctx);
    if (blen)
        p = PUT_LIT(p, "Content-Type: " MH_DEFAULT_TYPE "\r\n");
    p = put(p, extra ? extra : "", elen);
    if (!bodyless) {
        p = PUT_LIT(p, "Content-Length: ");
        p = put_u64(p, blen);
        p = PUT_LIT(p, "\r\n");
    }
    if (!ctx->keep_alive)
        p = PUT_LIT(p, "Connection: close\r\n");
    else if (ctx->http_minor == 0)
        p = PUT_LIT(p, "Connection: keep-alive\r\n");
    p = PUT_LIT(p, "\r\n");
    if (!ctx->head_method)
        p = put(p, body ? body : "", blen);
    mh_outq_commit(out, (size_t)(p - p0));
    return 0;
}
