/*
 * libFuzzer target for base/pg_wire.c, what moonhttp.pg's C fast path
 * (src/lua/lua_pgrows.c) reads a server's answer with. The first byte
 * gives the column count a DataRow must have (0..7), the rest is a stream
 * of messages. Besides not crashing: a message and every field must lie
 * inside the input, the message sizes must add up, and an integer
 * accepted by mh_pg_int must be the one strtoll reads from the same text.
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
    free(buf);
    return 0;
}
