#ifndef MH_REQUEST_HEAD_H
#define MH_REQUEST_HEAD_H
/*
 * A parsed request head. Every string is a slice (offset, length) into the
 * connection's read buffer, relative to the first byte of this request, so
 * the bytes are never copied and stay valid when the buffer moves or grows.
 * llhttp may deliver a field in pieces across reads; since the bytes of one
 * request are contiguous in the buffer, a piece only extends the slice.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"

struct mh_slice {
    uint32_t off, len;
};

struct mh_header {
    struct mh_slice name, value;
};

/*
 * A method that is a valid token but not in llhttp's table ("get", "PURGEX"):
 * routed like any other, as Go's ServeMux does. Its name is copied into
 * method_name (at most MH_METHOD_NAME_MAX bytes; a longer one is a 501).
 */
#define MH_METHOD_OTHER    255
#define MH_METHOD_NAME_MAX 31

struct mh_request {
    struct mh_slice target; /* request-target as sent */
    struct mh_slice path;   /* escaped path part of target */
    struct mh_slice query;  /* after '?', without it */
    struct mh_slice host;   /* Host header or authority of an absolute target */
    struct mh_header *headers;
    uint32_t nheaders, headers_cap;
    uint8_t method; /* llhttp_method_t, or MH_METHOD_OTHER (then see method_name) */
    uint8_t http_major, http_minor;
    bool keep_alive;      /* the client allows reuse */
    bool expect_continue; /* "Expect: 100-continue" */
    bool has_body;        /* Content-Length > 0 or chunked */
    /*
     * HTTP/2: an extended CONNECT with :protocol websocket (RFC 8441), which
     * is routed and served as the GET of an RFC 6455 handshake.
     */
    bool connect_websocket;
    uint64_t content_length;
    char method_name[MH_METHOD_NAME_MAX + 1]; /* MH_METHOD_OTHER only: NUL-terminated */
};

/* Fits the header array to the headers it holds (a request that lives long: a tunnel). */
void mh_request_shrink(struct mh_request *r);

/* Clears per-request fields, keeping the header array's memory. */
void mh_request_reset(struct mh_request *r);
void mh_request_free(struct mh_request *r);

/* Makes room for more header slots (mh_request_add_header's slow path); -1 on OOM. */
int mh_request_grow_headers(struct mh_request *r);

/* Appends a header slot; -1 on OOM. Inline: a request's every header comes through here. */
static inline int mh_request_add_header(struct mh_request *r, uint32_t off, uint32_t len)
{
    if (r->nheaders == r->headers_cap && mh_request_grow_headers(r) < 0)
        return -1;
    struct mh_header *h = &r->headers[r->nheaders++];
    h->name.off = off;
    h->name.len = len;
    h->value.off = off;
    h->value.len = 0;
    return 0;
}

/*
 * Finds the first header named `name` (case-insensitive) in the head at
 * `base`. Returns its index or -1.
 */
int mh_request_find_header(const struct mh_request *r, const char *base, const char *name,
                           size_t len, size_t start);

/* Splits target into path and query, and takes host from an absolute-form target. */
void mh_request_split_target(struct mh_request *r, const char *base);

extern const unsigned char mh_tchar[256];
extern const unsigned char mh_value_stop[256];

/* Whether c may appear in a token (RFC 9110 tchar): methods, header names. */
static inline bool mh_is_tchar(unsigned char c)
{
    return mh_tchar[c];
}

/* Whether every byte of s[0..len) is a tchar (empty is): four table loads per test. */
static inline bool mh_is_token(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    for (; i + 4 <= len; i += 4)
        if (!(mh_tchar[u[i]] & mh_tchar[u[i + 1]] & mh_tchar[u[i + 2]] & mh_tchar[u[i + 3]]))
            return false;
    for (; i < len; i++)
        if (!mh_tchar[u[i]])
            return false;
    return true;
}

/*
 * Whether s[0..len) is a valid Host / absolute-form authority (RFC 9110
 * §7.2, RFC 3986 §3.2.2): a reg-name (unreserved, pct-encoded, sub-delims),
 * an IPv4 address (a reg-name too), or "[" IPv6 / IPvFuture "]", then an
 * optional ":" port of digits. Empty is valid (RFC 9112 §3.2: no authority).
 */
bool mh_authority_valid(const char *s, size_t len);

/* Whether some byte of the 8 in x is zero (exact: borrows only run past a zero byte). */
static inline uint64_t mh_has_zero_byte(uint64_t x)
{
    return (x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull;
}

/* Whether some byte of the 8 in x is below n, for n <= 128 (exact, as mh_has_zero_byte). */
static inline uint64_t mh_has_byte_below(uint64_t x, uint64_t n)
{
    return (x - 0x0101010101010101ull * n) & ~x & 0x8080808080808080ull;
}

/*
 * Whether a header value contains CR, LF or NUL (no calls). Eight bytes a
 * step: every request's Host and every header a handler sets pass here.
 * One test finds the eights without a control byte below CR (the usual
 * value); only the others, with a TAB say, are looked at for the three.
 */
static inline bool mh_value_has_stop(const char *v, size_t len)
{
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t x;
        memcpy(&x, v + i, 8);
        if (mh_has_byte_below(x, '\r' + 1) &&
            (mh_has_zero_byte(x) | mh_has_zero_byte(x ^ 0x0d0d0d0d0d0d0d0dull) |
             mh_has_zero_byte(x ^ 0x0a0a0a0a0a0a0a0aull)))
            return true;
    }
    for (; i < len; i++)
        if (mh_value_stop[(unsigned char)v[i]])
            return true;
    return false;
}

/* The case-folding comparison of two strings of length n (mh_strieq's slow path). */
bool mh_strieq_fold(const char *a, const char *b, size_t n);

/*
 * ASCII case-insensitive equality. Inline, so that against a literal the
 * canonical spelling is a fixed-size compare rather than a call.
 */
static inline bool mh_strieq(const char *a, size_t alen, const char *b, size_t blen)
{
    if (alen != blen)
        return false;
    return memcmp(a, b, alen) == 0 || mh_strieq_fold(a, b, alen);
}

/*
 * Decodes application/x-www-form-urlencoded text ('+' is space, %XX) into
 * out (at least len bytes). Malformed escapes are kept literally, as Go's
 * url.ParseQuery rejects them but browsers send them; returns the length.
 */
size_t mh_form_unescape(const char *in, size_t len, char *out);

#endif
