#include "request_head.h"

#include <stddef.h>

#include <stdlib.h>
#include <string.h>

void mh_request_shrink(struct mh_request *r)
{
    if (r->nheaders == 0 || r->nheaders == r->headers_cap)
        return;
    struct mh_header *h = realloc(r->headers, r->nheaders * sizeof *h);
    if (h) {
        r->headers = h;
        r->headers_cap = r->nheaders;
    }
}

void mh_request_reset(struct mh_request *r)
{
    struct mh_header *h = r->headers;
    uint32_t cap = r->headers_cap;
    /* method_name is written before read (method is MH_METHOD_OTHER only then) */
    memset(r, 0, offsetof(struct mh_request, method_name));
    r->headers = h;
    r->headers_cap = cap;
}

void mh_request_free(struct mh_request *r)
{
    free(r->headers);
    memset(r, 0, sizeof *r);
}

int mh_request_grow_headers(struct mh_request *r)
{
    uint32_t ncap = r->headers_cap ? r->headers_cap * 2 : 16;
    struct mh_header *h = realloc(r->headers, ncap * sizeof *h);
    if (!h)
        return -1;
    r->headers = h;
    r->headers_cap = ncap;
    return 0;
}

static inline unsigned char lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

/* RFC 9110 tchar: ALPHA / DIGIT / "!#$%&'*+-.^_`|~" */
const unsigned char mh_tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1, ['&'] = 1, ['\''] = 1, ['*'] = 1, ['+'] = 1,
    ['-'] = 1, ['.'] = 1, ['^'] = 1, ['_'] = 1, ['`'] = 1, ['|'] = 1,  ['~'] = 1, ['0'] = 1,
    ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1,  ['7'] = 1, ['8'] = 1,
    ['9'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1,  ['F'] = 1, ['G'] = 1,
    ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1, ['M'] = 1,  ['N'] = 1, ['O'] = 1,
    ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1, ['U'] = 1,  ['V'] = 1, ['W'] = 1,
    ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1, ['c'] = 1,  ['d'] = 1, ['e'] = 1,
    ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1, ['k'] = 1,  ['l'] = 1, ['m'] = 1,
    ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1, ['s'] = 1,  ['t'] = 1, ['u'] = 1,
    ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

/* Bytes that may not appear in a header value as received or sent: CR, LF, NUL. */
const unsigned char mh_value_stop[256] = {['\r'] = 1, ['\n'] = 1, [0] = 1};

bool mh_strieq_fold(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
            return false;
    return true;
}

int mh_request_find_header(const struct mh_request *r, const char *base, const char *name,
                           size_t len, size_t start)
{
    for (size_t i = start; i < r->nheaders; i++) {
        const struct mh_header *h = &r->headers[i];
        if (mh_strieq(base + h->name.off, h->name.len, name, len))
            return (int)i;
    }
    return -1;
}

void mh_request_split_target(struct mh_request *r, const char *base)
{
    const char *t = base + r->target.off;
    uint32_t n = r->target.len, start = 0;
    /*
     * absolute-form: scheme://authority/path. A scheme starts with a letter
     * (RFC 3986 §3.1): an origin-form path that holds "x://" ("/x://y") is
     * a path, and most targets start with '/', so they skip the search.
     */
    bool letter = n > 0 && ((t[0] | 0x20) >= 'a' && (t[0] | 0x20) <= 'z');
    const char *sep = letter && n > 3 ? memchr(t, ':', n < 8 ? n : 8) : NULL;
    if (sep && (uint32_t)(sep - t) + 2 < n && sep[1] == '/' && sep[2] == '/') {
        uint32_t a = (uint32_t)(sep - t) + 3, e = a;
        while (e < n && t[e] != '/' && t[e] != '?')
            e++;
        r->host.off = r->target.off + a;
        r->host.len = e - a;
        start = e;
    }
    const char *qm = memchr(t + start, '?', n - start); /* libc's is wider than a byte loop */
    uint32_t q = qm ? (uint32_t)(qm - t) : n;
    r->path.off = r->target.off + start;
    r->path.len = q - start;
    if (q < n) {
        r->query.off = r->target.off + q + 1;
        r->query.len = n - q - 1;
    } else {
        r->query.off = r->target.off + n;
        r->query.len = 0;
    }
}

/* RFC 3986 reg-name bytes besides pct-encoded: unreserved / sub-delims */
static const unsigned char regname[256] = {
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1,  ['g'] = 1, ['h'] = 1,
    ['i'] = 1, ['j'] = 1, ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1,  ['o'] = 1, ['p'] = 1,
    ['q'] = 1, ['r'] = 1, ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1,  ['w'] = 1, ['x'] = 1,
    ['y'] = 1, ['z'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1,  ['E'] = 1, ['F'] = 1,
    ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1,  ['M'] = 1, ['N'] = 1,
    ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1,  ['U'] = 1, ['V'] = 1,
    ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['0'] = 1, ['1'] = 1,  ['2'] = 1, ['3'] = 1,
    ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,  ['-'] = 1, ['.'] = 1,
    ['_'] = 1, ['~'] = 1, ['!'] = 1, ['$'] = 1, ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1,
    ['*'] = 1, ['+'] = 1, [','] = 1, [';'] = 1, ['='] = 1,
};

static bool is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (lower(c) >= 'a' && lower(c) <= 'f');
}

static bool unreserved(unsigned char c)
{
    return (c >= '0' && c <= '9') || (lower(c) >= 'a' && lower(c) <= 'z') || c == '-' || c == '.' ||
           c == '_' || c == '~';
}

bool mh_authority_valid(const char *s, size_t len)
{
    size_t i = 0;
    if (len > 0 && s[0] == '[') {
        /* IP-literal: IPv6 (hex, ':' and '.') or IPvFuture ("v", unreserved, sub-delims, ':') */
        i = 1;
        while (i < len && s[i] != ']' && s[i] != '%') {
            unsigned char c = (unsigned char)s[i];
            if (!regname[c] && c != ':')
                return false;
            i++;
        }
        if (i < len && s[i] == '%' && i > 1) {
            /*
             * A zone identifier, "[fe80::1%25eth0]" (RFC 6874: "%25" and
             * 1*(unreserved / pct-encoded)): Go's Host check takes it, and
             * so does its mux (the port is stripped around the brackets).
             */
            if (i + 3 >= len || s[i + 1] != '2' || s[i + 2] != '5' || s[i + 3] == ']')
                return false;
            for (i += 3; i < len && s[i] != ']';) {
                unsigned char c = (unsigned char)s[i];
                if (c == '%' && i + 2 < len && is_hex((unsigned char)s[i + 1]) &&
                    is_hex((unsigned char)s[i + 2]))
                    i += 3;
                else if (unreserved(c))
                    i++;
                else
                    return false;
            }
        }
        if (i >= len || i == 1 || s[i] != ']')
            return false;
        i++; /* ']' */
    } else {
        /* A run of plain bytes is one table load each, four per test (this is on every request). */
        const unsigned char *u = (const unsigned char *)s;
        for (;;) {
            while (i + 4 <= len &&
                   (regname[u[i]] & regname[u[i + 1]] & regname[u[i + 2]] & regname[u[i + 3]]))
                i += 4;
            while (i < len && regname[u[i]])
                i++;
            if (i == len || s[i] != '%')
                break;
            if (i + 2 >= len || !is_hex((unsigned char)s[i + 1]) ||
                !is_hex((unsigned char)s[i + 2]))
                return false;
            i += 3;
        }
    }
    if (i == len)
        return true;
    if (s[i] != ':')
        return false;
    for (i++; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = lower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

size_t mh_form_unescape(const char *in, size_t len, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = in[i];
        if (c == '+') {
            out[o++] = ' ';
        } else if (c == '%' && i + 2 < len && hexval((unsigned char)in[i + 1]) >= 0 &&
                   hexval((unsigned char)in[i + 2]) >= 0) {
            out[o++] =
                (char)(hexval((unsigned char)in[i + 1]) * 16 + hexval((unsigned char)in[i + 2]));
            i += 2;
        } else {
            out[o++] = c;
        }
    }
    return o;
}
