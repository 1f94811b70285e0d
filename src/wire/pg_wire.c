/*
 * PostgreSQL protocol 3.0 messages: the Bind batch and, from the answer,
 * message heads and DataRow fields: see pg_wire.h.
 */
#include "pg_wire.h"

#include <string.h>

static uint32_t be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

long mh_pg_message(const char *buf, size_t n, struct mh_pg_msg *m)
{
    if (n < 5)
        return MH_PG_MORE;
    uint32_t len = be32(buf + 1);
    if (len < 4 || len > MH_PG_MAX_MESSAGE)
        return MH_PG_BAD;
    if (n - 1 < len)
        return MH_PG_MORE;
    m->type = buf[0];
    m->body = buf + 5;
    m->len = len - 4;
    return (long)len + 1;
}

bool mh_pg_datarow(const char *body, size_t len, unsigned ncols, struct mh_pg_row *row)
{
    if (len < 2)
        return false;
    const unsigned char *u = (const unsigned char *)body;
    unsigned count = (unsigned)u[0] << 8 | u[1];
    if (count != ncols)
        return false;
    const char *p = body + 2;
    size_t left = len - 2;
    for (unsigned i = 0; i < count; i++) {
        if (left < 4)
            return false;
        uint32_t flen = be32(p);
        p += 4;
        left -= 4;
        if (flen == UINT32_MAX) /* -1: NULL */
            continue;
        if (flen > left)
            return false; /* also every negative length but -1 */
        p += flen;
        left -= flen;
    }
    if (left != 0)
        return false;
    row->_p = body + 2;
    row->_left = len - 2;
    row->nfields = count;
    return true;
}

void mh_pg_field(struct mh_pg_row *row, const char **v, size_t *len)
{
    uint32_t flen = be32(row->_p);
    row->_p += 4;
    row->_left -= 4;
    if (flen == UINT32_MAX) {
        *v = NULL;
        *len = 0;
        return;
    }
    *v = row->_p;
    *len = flen;
    row->_p += flen;
    row->_left -= flen;
}

bool mh_pg_int(const char *s, size_t n, int64_t *out)
{
    bool neg = n > 0 && s[0] == '-';
    size_t i = neg ? 1 : 0;
    if (n == i || n - i > 19)
        return false;
    /* accumulated as a negative number: -INT64_MIN does not fit */
    int64_t v = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9)
            return false;
        if (v < (INT64_MIN + (int64_t)d) / 10)
            return false;
        v = v * 10 - (int64_t)d;
    }
    if (!neg) {
        if (v == INT64_MIN)
            return false;
        v = -v;
    }
    *out = v;
    return true;
}

size_t mh_pg_int_text(int64_t v, char *out)
{
    char tmp[MH_PG_INT_TEXT];
    char *end = tmp + sizeof tmp, *p = end;
    /* the magnitude in unsigned arithmetic: -INT64_MIN does not fit int64 */
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    size_t len = (size_t)(end - p);
    memcpy(out, p, len);
    return len;
}

static char *put32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
    return p + 4;
}

static char *put16(char *p, unsigned v)
{
    p[0] = (char)(v >> 8);
    p[1] = (char)v;
    return p + 2;
}

static bool any_binary(const struct mh_pg_param *p, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (p[i].binary)
            return true;
    return false;
}

/* Execute of the unnamed portal with no row limit, then Sync. */
static const char EXECUTE_SYNC[] = "E\0\0\0\x09\0\0\0\0\0S\0\0\0\x04";
#define EXECUTE_SYNC_LEN (sizeof EXECUTE_SYNC - 1)

/* The Bind message's length field (itself and the body), or 0 when too long. */
static size_t bind_len(size_t slen, const struct mh_pg_param *p, unsigned n)
{
    /* length, portal "", stmt and its NUL, format count, parameter count, result format count */
    size_t len = 4 + 1 + slen + 1 + 2 + 2 + 2;
    if (any_binary(p, n))
        len += 2 * (size_t)n;
    for (unsigned i = 0; i < n; i++) {
        len += 4;
        if (p[i].v) {
            if (p[i].len > MH_PG_MAX_MESSAGE)
                return 0;
            len += p[i].len;
        }
        if (len > MH_PG_MAX_MESSAGE)
            return 0;
    }
    return len > MH_PG_MAX_MESSAGE ? 0 : len;
}

size_t mh_pg_bind_size(size_t slen, const struct mh_pg_param *p, unsigned n)
{
    if (n > MH_PG_MAX_PARAMS)
        return 0;
    size_t len = bind_len(slen, p, n);
    return len ? 1 + len + EXECUTE_SYNC_LEN : 0;
}

void mh_pg_bind(char *out, const char *stmt, size_t slen, const struct mh_pg_param *p, unsigned n)
{
    char *o = out;
    *o++ = 'B';
    o = put32(o, (uint32_t)bind_len(slen, p, n));
    *o++ = '\0'; /* the unnamed portal */
    memcpy(o, stmt, slen);
    o += slen;
    *o++ = '\0';
    if (any_binary(p, n)) {
        o = put16(o, n);
        for (unsigned i = 0; i < n; i++)
            o = put16(o, p[i].binary ? 1 : 0);
    } else {
        o = put16(o, 0); /* all text */
    }
    o = put16(o, n);
    for (unsigned i = 0; i < n; i++) {
        if (!p[i].v) {
            o = put32(o, UINT32_MAX); /* -1: NULL */
            continue;
        }
        o = put32(o, (uint32_t)p[i].len);
        memcpy(o, p[i].v, p[i].len);
        o += p[i].len;
    }
    o = put16(o, 0); /* every result column in text */
    memcpy(o, EXECUTE_SYNC, EXECUTE_SYNC_LEN);
}
