#include "response.h"

#include "request_head.h"

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
    /* Field by field: a memset of the whole struct costs more than the request it serves. */
    mh_outq_clear(&r->body);
    r->status = 200;
    r->declared_length = r->body_sent = 0;
    r->npairs = r->_npairs = 0;
    r->_hbytes.len = 0;
    r->_holes = false;
    r->has_length = r->has_type = r->has_server = false;
    r->written = r->head_sent = r->chunked = r->close = false;
    r->trailers.len = 0;
}

void mh_response_free(struct mh_response *r)
{
    mh_outq_free(&r->body);
    mh_response_trim(r);
    mh_buf_free(&r->trailers);
    memset(r, 0, sizeof *r);
}

void mh_response_trim(struct mh_response *r)
{
    mh_buf_free(&r->_hbytes);
    free(r->_pairs);
    r->_pairs = NULL;
    r->_npairs = r->_pairs_cap = r->npairs = 0;
    r->_holes = false;
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

static bool pair_is(const struct mh_response *r, const struct mh_hpair *p, const char *name,
                    size_t nlen)
{
    return p->name_len && mh_strieq(r->_hbytes.data + p->name_off, p->name_len, name, nlen);
}

/* The response headers the server interprets. */
enum known_name { NAME_OTHER, NAME_LENGTH, NAME_CONNECTION, NAME_TE, NAME_TYPE, NAME_SERVER };

/* Which of them `name` is (any case), found by length first. */
static inline enum known_name known_name(const char *name, size_t nlen)
{
    switch (nlen) {
    case 14:
        return mh_strieq(name, nlen, "Content-Length", 14) ? NAME_LENGTH : NAME_OTHER;
    case 10:
        return mh_strieq(name, nlen, "Connection", 10) ? NAME_CONNECTION : NAME_OTHER;
    case 17:
        return mh_strieq(name, nlen, "Transfer-Encoding", 17) ? NAME_TE : NAME_OTHER;
    case 12:
        return mh_strieq(name, nlen, "Content-Type", 12) ? NAME_TYPE : NAME_OTHER;
    case 6:
        return mh_strieq(name, nlen, "Server", 6) ? NAME_SERVER : NAME_OTHER;
    default:
        return NAME_OTHER;
    }
}

void mh_response_unset(struct mh_response *r, const char *name, size_t nlen)
{
    switch (known_name(name, nlen)) {
    case NAME_LENGTH:
        r->has_length = false;
        break;
    case NAME_TYPE:
        r->has_type = false;
        break;
    case NAME_SERVER:
        r->has_server = false;
        break;
    default:
        break;
    }
    for (uint32_t i = 0; i < r->_npairs; i++) {
        if (pair_is(r, &r->_pairs[i], name, nlen)) {
            r->_pairs[i].name_len = 0;
            r->npairs--;
            r->_holes = true;
        }
    }
}

const char *mh_response_get(const struct mh_response *r, const char *name, size_t nlen,
                            size_t *vlen)
{
    for (uint32_t i = 0; i < r->_npairs; i++) {
        const struct mh_hpair *p = &r->_pairs[i];
        if (pair_is(r, p, name, nlen)) {
            *vlen = p->value_len;
            return r->_hbytes.data + p->value_off;
        }
    }
    return NULL;
}

bool mh_response_pair(const struct mh_response *r, uint32_t *i, const char **name, size_t *nlen,
                      const char **value, size_t *vlen)
{
    while (*i < r->_npairs && r->_pairs[*i].name_len == 0)
        (*i)++;
    if (*i >= r->_npairs)
        return false;
    const struct mh_hpair *p = &r->_pairs[(*i)++];
    *name = r->_hbytes.data + p->name_off;
    *nlen = p->name_len;
    *value = r->_hbytes.data + p->value_off;
    *vlen = p->value_len;
    return true;
}

static const char *add_pair(struct mh_response *r, const char *name, size_t nlen, const char *value,
                            size_t vlen)
{
    if (r->_npairs == r->_pairs_cap) {
        uint32_t cap = r->_pairs_cap ? r->_pairs_cap * 2 : 8;
        struct mh_hpair *v = realloc(r->_pairs, cap * sizeof *v);
        if (!v)
            return "out of memory";
        r->_pairs = v;
        r->_pairs_cap = cap;
    }
    if (r->_hbytes.cap - r->_hbytes.len < nlen + vlen + 4 &&
        mh_buf_reserve(&r->_hbytes, nlen + vlen + 4) < 0)
        return "out of memory";
    struct mh_hpair *p = &r->_pairs[r->_npairs++];
    char *base = r->_hbytes.data, *w = base + r->_hbytes.len;
    p->name_off = (uint32_t)(w - base);
    p->name_len = (uint32_t)nlen;
    w = put(w, name, nlen);
    w = PUT_LIT(w, ": ");
    p->value_off = (uint32_t)(w - base);
    p->value_len = (uint32_t)vlen;
    w = put(w, value, vlen);
    w = PUT_LIT(w, "\r\n");
    r->_hbytes.len = (size_t)(w - base);
    r->npairs++;
    return NULL;
}

/* Fields a trailer must not carry (RFC 9110 §6.5.1): framing, routing, connection control. */
static bool trailer_forbidden(const char *name, size_t nlen)
{
    static const char *const names[] = {"content-length",
                                        "transfer-encoding",
                                        "host",
                                        "connection",
                                        "keep-alive",
                                        "trailer",
                                        "te",
                                        "upgrade",
                                        "content-encoding",
                                        "content-type",
                                        "content-range",
                                        "cache-control",
                                        "expect",
                                        "authorization",
                                        "set-cookie",
                                        NULL};
    for (const char *const *n = names; *n; n++)
        if (mh_strieq(name, nlen, *n, strlen(*n)))
            return true;
    return false;
}

const char *mh_response_trailer(struct mh_response *r, const char *name, size_t nlen,
                                const char *value, size_t vlen)
{
    if (nlen == 0 || !mh_is_token(name, nlen))
        return "invalid trailer name";
    if (mh_value_has_stop(value, vlen))
        return "CR, LF or NUL in trailer value";
    if (trailer_forbidden(name, nlen))
        return "this field cannot be a trailer";
    if (mh_buf_reserve(&r->trailers, nlen + vlen + 4) < 0)
        return "out of memory";
    char *w = r->trailers.data + r->trailers.len;
    w = put(w, name, nlen);
    w = PUT_LIT(w, ": ");
    w = put(w, value, vlen);
    w = PUT_LIT(w, "\r\n");
    r->trailers.len = (size_t)(w - r->trailers.data);
    return NULL;
}

bool mh_response_trailer_next(const struct mh_response *r, size_t *pos, const char **name,
                              size_t *nlen, const char **value, size_t *vlen)
{
    const char *p = r->trailers.data + *pos, *end = r->trailers.data + r->trailers.len;
    if (*pos >= r->trailers.len)
        return false;
    const char *colon = memchr(p, ':', (size_t)(end - p));
    const char *eol = colon ? memchr(colon, '\r', (size_t)(end - colon)) : NULL;
    if (!eol)
        return false; /* not reached: the lines are written above */
    *name = p;
    *nlen = (size_t)(colon - p);
    *value = colon + 2;
    *vlen = (size_t)(eol - colon - 2);
    *pos = (size_t)(eol + 2 - r->trailers.data);
    return true;
}

const char *mh_response_add_trusted(struct mh_response *r, const char *name, size_t nlen,
                                    const char *value, size_t vlen)
{
    return add_pair(r, name, nlen, value, vlen);
}

const char *mh_response_header(struct mh_response *r, const char *name, size_t nlen,
                               const char *value, size_t vlen, bool replace)
{
    /* A name equal to a known one is a token already: only the others are checked byte by byte. */
    enum known_name known = known_name(name, nlen);
    if (known == NAME_OTHER) {
        if (nlen == 0)
            return "empty header name";
        if (!mh_is_token(name, nlen))
            return "invalid character in header name";
    }
    if (mh_value_has_stop(value, vlen))
        return "CR, LF or NUL in header value";
    switch (known) {
    case NAME_LENGTH: {
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
    case NAME_CONNECTION:
        if (mh_strieq(value, vlen, "close", 5))
            r->close = true;
        return NULL;
    case NAME_TE:
        return "Transfer-Encoding is managed by the server";
    case NAME_TYPE:
        r->has_type = true;
        break;
    case NAME_SERVER:
        r->has_server = true;
        break;
    case NAME_OTHER:
        break;
    }
    if (replace && r->npairs) {
        for (uint32_t i = 0; i < r->_npairs; i++) {
            if (pair_is(r, &r->_pairs[i], name, nlen)) {
                r->_pairs[i].name_len = 0;
                r->npairs--;
                r->_holes = true;
            }
        }
    }
    return add_pair(r, name, nlen, value, vlen);
}
