/*
 * wire/pg_wire.c: message heads at every split of a buffer, DataRows whole,
 * short, long and with NULLs, integer text at int64's edges, and Bind +
 * Execute + Sync batches byte for byte against messages written out by hand.
 */
#include "pg_wire.h"
#include "unit.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A message: type, then big-endian length 4 + n, then body. Returns its size. */
static size_t put_msg(char *out, char type, const char *body, size_t n)
{
    uint32_t len = (uint32_t)n + 4;
    out[0] = type;
    out[1] = (char)(len >> 24);
    out[2] = (char)(len >> 16);
    out[3] = (char)(len >> 8);
    out[4] = (char)len;
    memcpy(out + 5, body, n);
    return n + 5;
}

/* A DataRow body of two fields: "42" and NULL. */
static const char ROW[] = "\0\2"
                          "\0\0\0\002"
                          "42"
                          "\xff\xff\xff\xff";
#define ROW_LEN (sizeof ROW - 1)

static void test_messages(void)
{
    char buf[64];
    size_t n = put_msg(buf, 'D', ROW, ROW_LEN);
    n += put_msg(buf + n, 'Z', "I", 1);
    struct mh_pg_msg m;
    /* every prefix of the first message is "more"; the whole is one message */
    for (size_t cut = 0; cut < 5 + ROW_LEN; cut++)
        CHECKF(mh_pg_message(buf, cut, &m) == MH_PG_MORE, "cut %zu", cut);
    CHECK(mh_pg_message(buf, 5 + ROW_LEN, &m) == (long)(5 + ROW_LEN));
    CHECK(m.type == 'D' && m.body == buf + 5 && m.len == ROW_LEN);
    CHECK(mh_pg_message(buf, n, &m) == (long)(5 + ROW_LEN));
    CHECK(mh_pg_message(buf + 5 + ROW_LEN, 6, &m) == 6);
    CHECK(m.type == 'Z' && m.len == 1 && m.body[0] == 'I');
    /* lengths that cannot be: below 4 (counts itself), above 1 GiB */
    static const char short_len[] = "C\0\0\0\3xxxx";
    CHECK(mh_pg_message(short_len, sizeof short_len - 1, &m) == MH_PG_BAD);
    static const char huge[] = "D\x40\0\0\1";
    CHECK(mh_pg_message(huge, 5, &m) == MH_PG_BAD);
    static const char gib[] = "D\x40\0\0\0";
    CHECK(mh_pg_message(gib, 5, &m) == MH_PG_MORE);
    static const char empty[] = "Z\0\0\0\4";
    CHECK(mh_pg_message(empty, 5, &m) == 5 && m.len == 0);
}

static void test_datarow(void)
{
    struct mh_pg_row row;
    const char *v;
    size_t len;
    CHECK(mh_pg_datarow(ROW, ROW_LEN, 2, &row));
    mh_pg_field(&row, &v, &len);
    CHECK(v && len == 2 && memcmp(v, "42", 2) == 0);
    mh_pg_field(&row, &v, &len);
    CHECK(v == NULL && len == 0);
    /* another column count than the statement's */
    CHECK(!mh_pg_datarow(ROW, ROW_LEN, 1, &row));
    CHECK(!mh_pg_datarow(ROW, ROW_LEN, 3, &row));
    /* cut anywhere: never accepted */
    for (size_t cut = 0; cut < ROW_LEN; cut++)
        CHECKF(!mh_pg_datarow(ROW, cut, 2, &row), "cut %zu", cut);
    /* a byte past the last field */
    char longer[ROW_LEN + 1];
    memcpy(longer, ROW, ROW_LEN);
    longer[ROW_LEN] = 'x';
    CHECK(!mh_pg_datarow(longer, sizeof longer, 2, &row));
    /* a field length past the body, and a negative one other than -1 */
    static const char past[] = "\0\1\0\0\0\011abc";
    CHECK(!mh_pg_datarow(past, sizeof past - 1, 1, &row));
    static const char neg[] = "\0\1\xff\xff\xff\xfe";
    CHECK(!mh_pg_datarow(neg, sizeof neg - 1, 1, &row));
    /* no fields, and an empty (not NULL) value */
    CHECK(mh_pg_datarow("\0\0", 2, 0, &row) && row.nfields == 0);
    static const char blank[] = "\0\1\0\0\0\0";
    CHECK(mh_pg_datarow(blank, sizeof blank - 1, 1, &row));
    mh_pg_field(&row, &v, &len);
    CHECK(v != NULL && len == 0);
}

static void test_int(void)
{
    static const struct {
        const char *s;
        int ok;
        int64_t v;
    } cases[] = {
        {"0", 1, 0},
        {"-0", 1, 0},
        {"7", 1, 7},
        {"-42", 1, -42},
        {"10000", 1, 10000},
        {"9223372036854775807", 1, INT64_MAX},
        {"-9223372036854775808", 1, INT64_MIN},
        {"9223372036854775808", 0, 0},
        {"-9223372036854775809", 0, 0},
        {"99999999999999999999", 0, 0},
        {"00000000000000000001", 0, 0},
        {"", 0, 0},
        {"-", 0, 0},
        {"+1", 0, 0},
        {"1.5", 0, 0},
        {"12a", 0, 0},
        {" 1", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t v = -1;
        bool ok = mh_pg_int(cases[i].s, strlen(cases[i].s), &v);
        CHECKF(ok == (bool)cases[i].ok, "\"%s\": ok %d", cases[i].s, ok);
        if (ok && cases[i].ok)
            CHECKF(v == cases[i].v, "\"%s\": %lld", cases[i].s, (long long)v);
    }
}

/* Builds the batch of p[0..n) on statement stmt; checks it equals want (wlen bytes). */
static void check_bind(const char *what, const char *stmt, const struct mh_pg_param *p, unsigned n,
                       const char *want, size_t wlen)
{
    char out[256];
    size_t size = mh_pg_bind_size(strlen(stmt), p, n);
    CHECKF(size == wlen, "%s: size %zu, want %zu", what, size, wlen);
    if (size != wlen || size > sizeof out)
        return;
    memset(out, '?', sizeof out);
    mh_pg_bind(out, stmt, strlen(stmt), p, n);
    CHECKF(memcmp(out, want, wlen) == 0, "%s: bytes differ", what);
    CHECKF(out[wlen] == '?', "%s: wrote past its size", what);
}

/* Execute of the unnamed portal with no row limit, then Sync: every batch's tail. */
#define EXEC_SYNC "E\0\0\0\x09\0\0\0\0\0S\0\0\0\x04"

static void test_bind(void)
{
    static const char none[] = "B\0\0\0\x0f"
                               "\0"
                               "mh1\0"
                               "\0\0" /* no format codes: all text */
                               "\0\0" /* no parameters */
                               "\0\0" /* results in text */
        EXEC_SYNC;
    check_bind("no parameters", "mh1", NULL, 0, none, sizeof none - 1);

    struct mh_pg_param text[] = {{"42", 2, false}, {NULL, 0, false}, {"", 0, false}};
    static const char text_want[] = "B\0\0\0\x1e"
                                    "\0"
                                    "mh12\0"
                                    "\0\0"
                                    "\0\x03"
                                    "\0\0\0\x02"
                                    "42"
                                    "\xff\xff\xff\xff" /* NULL */
                                    "\0\0\0\0"         /* the empty string */
                                    "\0\0" EXEC_SYNC;
    check_bind("text, NULL, empty", "mh12", text, 3, text_want, sizeof text_want - 1);

    /* one binary parameter: a format code for each, bytes kept as they are (a NUL inside) */
    struct mh_pg_param bin[] = {{"a", 1, false}, {"\0\xff", 2, true}};
    static const char bin_want[] = "B\0\0\0\x1b"
                                   "\0"
                                   "\0" /* the unnamed statement */
                                   "\0\x02"
                                   "\0\0"
                                   "\0\x01"
                                   "\0\x02"
                                   "\0\0\0\x01"
                                   "a"
                                   "\0\0\0\x02"
                                   "\0\xff"
                                   "\0\0" EXEC_SYNC;
    check_bind("a binary parameter", "", bin, 2, bin_want, sizeof bin_want - 1);

    /* the bounds: 65535 parameters fit (NULLs: 4 bytes each), one more does not; nor a value over 1
     * GiB */
    static struct mh_pg_param many[MH_PG_MAX_PARAMS + 1];
    size_t size = mh_pg_bind_size(3, many, MH_PG_MAX_PARAMS);
    CHECKF(size == 1 + 4 + 1 + 4 + 2 + 2 + (size_t)MH_PG_MAX_PARAMS * 4 + 2 + 15, "65535: %zu",
           size);
    CHECK(mh_pg_bind_size(3, many, MH_PG_MAX_PARAMS + 1) == 0);
    struct mh_pg_param huge = {"x", (size_t)MH_PG_MAX_MESSAGE, false};
    CHECK(mh_pg_bind_size(3, &huge, 1) == 0);
    struct mh_pg_param two_halves[] = {{"x", MH_PG_MAX_MESSAGE / 2, false},
                                       {"x", MH_PG_MAX_MESSAGE / 2, false}};
    CHECK(mh_pg_bind_size(3, two_halves, 2) == 0);
}

static void test_int_text(void)
{
    static const int64_t cases[] = {0,     7,          -7,        10,        -10,          42,
                                    99999, 1000000007, INT64_MAX, INT64_MIN, INT64_MIN + 1};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[32], got[MH_PG_INT_TEXT + 1];
        int wlen = snprintf(want, sizeof want, "%lld", (long long)cases[i]);
        size_t len = mh_pg_int_text(cases[i], got);
        got[len] = '\0';
        CHECKF(len == (size_t)wlen && strcmp(got, want) == 0, "%s: got %s", want, got);
    }
}

int main(void)
{
    test_int_text();
    test_messages();
    test_datarow();
    test_int();
    test_bind();
    return unit_report();
}
