/*
 * libFuzzer target for wire/pg_wire.c, what moonhttp.pg's C fast path
 * (src/lua/lua_pgrows.c) reads a server's answer with. The first byte
 * gives the column count a DataRow must have (0..7), the rest is a stream
 * of messages. Besides not crashing: a message and every field must lie
 * inside the input, the message sizes must add up, and an integer
 * accepted by mh_pg_int must be the one strtoll reads from the same text.
 * The same bytes also make the parameters of a Bind (check_bind), which
 * must read back as they were: three whole messages (Bind, Execute, Sync)
 * and in the Bind each value, NULL and format where it was put.
 */
#include "pg_wire.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_int(const char *v, size_t len)
{
    int64_t got;
    if (!mh_pg_int(v, len, &got))
        return;
    char text[24];
    if (len >= sizeof text)
        abort();
    memcpy(text, v, len);
    text[len] = '\0';
    errno = 0;
    char *end;
    long long want = strtoll(text, &end, 10);
    if (errno || *end || want != got || text[0] == '+' || text[0] == ' ')
        abort();
}

static uint32_t be32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;
    return (uint32_t)u[0] << 24 | (uint32_t)u[1] << 16 | (uint32_t)u[2] << 8 | u[3];
}

/* Up to 16 parameters cut from buf: each piece's first byte gives its length (0..15), NULL (bit 4),
 * binary (bit 5). */
static void check_bind(const char *buf, size_t n)
{
    struct mh_pg_param p[16];
    unsigned np = 0;
    size_t at = 0;
    while (np < 16 && at < n) {
        unsigned char c = (unsigned char)buf[at++];
        size_t len = c & 15;
        if (len > n - at)
            len = n - at;
        p[np].v = (c & 16) ? NULL : buf + at;
        p[np].len = len;
        p[np].binary = (c & 32) != 0;
        at += len;
        np++;
    }
    size_t size = mh_pg_bind_size(3, p, np);
    char *out = malloc(size ? size : 1);
    if (!size || !out)
        abort();
    mh_pg_bind(out, "mh7", 3, p, np);
    struct mh_pg_msg b, e, sy;
    long lb = mh_pg_message(out, size, &b);
    if (lb <= 0 || b.type != 'B')
        abort();
    long le = mh_pg_message(out + lb, size - (size_t)lb, &e);
    if (le != 10 || e.type != 'E')
        abort();
    long ls = mh_pg_message(out + lb + le, size - (size_t)(lb + le), &sy);
    if (ls != 5 || sy.type != 'S' || (size_t)(lb + le + ls) != size)
        abort();
    const char *q = b.body;
    if (memcmp(q, "\0mh7\0", 5) != 0)
        abort();
    q += 5;
    unsigned nf = (unsigned char)q[0] << 8 | (unsigned char)q[1];
    q += 2;
    bool any = false;
    for (unsigned i = 0; i < np; i++)
        any = any || p[i].binary;
    if (nf != (any ? np : 0))
        abort();
    for (unsigned i = 0; i < nf; i++, q += 2)
        if (q[0] != 0 || q[1] != (p[i].binary ? 1 : 0))
            abort();
    if (((unsigned)(unsigned char)q[0] << 8 | (unsigned char)q[1]) != np)
        abort();
    q += 2;
    for (unsigned i = 0; i < np; i++) {
        uint32_t len = be32(q);
        q += 4;
        if (!p[i].v) {
            if (len != UINT32_MAX)
                abort();
            continue;
        }
        if (len != p[i].len || memcmp(q, p[i].v, len) != 0)
            abort();
        q += len;
    }
    if (q[0] != 0 || q[1] != 0 || q + 2 != b.body + b.len)
        abort();
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned ncols = data[0] % 8;
    /* a copy of exactly the stream, so ASan sees any read past the end */
    size_t n = size - 1;
    char *buf = malloc(n ? n : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, n);
    size_t at = 0;
    for (;;) {
        struct mh_pg_msg m;
        long got = mh_pg_message(buf + at, n - at, &m);
        if (got <= 0)
            break;
        if ((size_t)got > n - at || m.body != buf + at + 5 || m.len + 5 != (size_t)got)
            abort();
        struct mh_pg_row row;
        if (m.type == 'D' && mh_pg_datarow(m.body, m.len, ncols, &row)) {
            if (row.nfields != ncols)
                abort();
            for (unsigned i = 0; i < row.nfields; i++) {
                const char *v;
                size_t len;
                mh_pg_field(&row, &v, &len);
                if (v && (v < m.body || v + len > m.body + m.len))
                    abort();
                if (v)
                    check_int(v, len);
            }
        }
        at += (size_t)got;
    }
    check_bind(buf, n);
    free(buf);
    return 0;
}
