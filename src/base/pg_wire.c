/*
 * PostgreSQL protocol 3.0 messages and DataRow fields: see pg_wire.h.
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
