/*
 * wire/redis_resp.c: replies as data (whole, refused), every prefix of a whole
 * reply asking for more with a bound it keeps, the items' fields, numbers
 * at int64's edges and arrays at the nesting limit.
 */
#include "redis_resp.h"
#include "unit.h"

#include <stdlib.h>
#include <string.h>

/* want: the reply's size, or MH_RESP_BAD; a row's input is whole or refused */
static const struct {
    const char *in;
    long want;
} replies[] = {
    {"+OK\r\n", 5},
    {"+\r\n", 3},
    {"+OK\n", 4},     /* '\r' is optional, as the Lua reader's "l" */
    {"+OK\r\r\n", 6}, /* only one '\r' is dropped: the text is "OK\r" */
    {"-ERR bad\r\n", 10},
    {":0\r\n", 4},
    {":-42\r\n", 6},
    {":007\r\n", 6},
    {":9223372036854775807\r\n", 22},
    {":-9223372036854775808\r\n", 23},
    {"$0\r\n\r\n", 6},
    {"$5\r\nhello\r\n", 11},
    {"$5\r\nhe\r\no\r\n", 11}, /* a bulk's bytes may hold CRLF */
    {"$-1\r\n", 5},
    {"*-1\r\n", 5},
    {"*0\r\n", 4},
    {"*2\r\n:1\r\n$1\r\nx\r\n", 15},
    {"*2\r\n*1\r\n:1\r\n-ERR x\r\n", 20},
    {"*1\r\n*0\r\n", 8},
    {"+OK\r\n+NEXT\r\n", 5}, /* one reply at a time */
    {"\r\n", MH_RESP_BAD},
    {"\n", MH_RESP_BAD},
    {"!5\r\n", MH_RESP_BAD},
    {":\r\n", MH_RESP_BAD},
    {":-\r\n", MH_RESP_BAD},
    {":12x\r\n", MH_RESP_BAD},
    {":+1\r\n", MH_RESP_BAD},
    {": 1\r\n", MH_RESP_BAD},
    {":1.5\r\n", MH_RESP_BAD},
    {":9223372036854775808\r\n", MH_RESP_BAD},
    {":-9223372036854775809\r\n", MH_RESP_BAD},
    {"$abc\r\n", MH_RESP_BAD},
    {"$-5\r\n", MH_RESP_BAD},
    {"$-2\r\n", MH_RESP_BAD},
    {"$99999999999\r\n", MH_RESP_BAD},
    {"$536870913\r\n", MH_RESP_BAD},
    {"$2\r\nabcd\r\n", MH_RESP_BAD},
    {"*-2\r\n", MH_RESP_BAD},
    {"*536870913\r\n", MH_RESP_BAD},
    {"*2\r\n:1\r\n!\r\n", MH_RESP_BAD},
};

static void test_replies(void)
{
    for (size_t i = 0; i < sizeof replies / sizeof replies[0]; i++) {
        const char *in = replies[i].in;
        size_t len = strlen(in), need = 0;
        long got = mh_resp_reply(in, len, &need);
        CHECKF(got == replies[i].want, "\"%s\": %ld, want %ld", in, got, replies[i].want);
    }
}

/* Every prefix of a whole reply is "more", with a need past the prefix and within the reply. */
static void test_prefixes(void)
{
    for (size_t i = 0; i < sizeof replies / sizeof replies[0]; i++) {
        long whole = replies[i].want;
        if (whole <= 0)
            continue;
        for (size_t cut = 0; cut < (size_t)whole; cut++) {
            char *copy = malloc(cut + 1); /* exactly the prefix, for ASan */
            memcpy(copy, replies[i].in, cut);
            size_t need = 0;
            long got = mh_resp_reply(copy, cut, &need);
            CHECKF(got == MH_RESP_MORE && need > cut && need <= (size_t)whole,
                   "\"%s\" cut at %zu: %ld, need %zu", replies[i].in, cut, got, need);
            free(copy);
        }
    }
    /* a bulk's head is in: the need is the whole bulk, exactly */
    size_t need = 0;
    CHECK(mh_resp_reply("$10\r\nabc", 8, &need) == MH_RESP_MORE && need == 17);
    CHECK(mh_resp_reply("*2\r\n:1\r\n$4\r\n", 12, &need) == MH_RESP_MORE && need == 18);
}

static void test_items(void)
{
    struct mh_resp_item it;
    CHECK(mh_resp_item("-ERR x\r\n", 8, &it) == 8);
    CHECK(it.type == '-' && it.len == 5 && memcmp(it.data, "ERR x", 5) == 0);
    CHECK(mh_resp_item("+OK\r\r\n", 6, &it) == 6 && it.len == 3 && memcmp(it.data, "OK\r", 3) == 0);
    CHECK(mh_resp_item(":-9223372036854775808\r\n", 23, &it) == 23 && it.n == INT64_MIN);
    CHECK(mh_resp_item("$3\r\nabc\r\n", 9, &it) == 9);
    CHECK(it.type == '$' && it.n == 3 && it.len == 3 && memcmp(it.data, "abc", 3) == 0);
    CHECK(mh_resp_item("$-1\r\n", 5, &it) == 5 && it.n == -1 && it.data == NULL);
    CHECK(mh_resp_item("*3\r\n:1\r\n", 8, &it) == 4 && it.type == '*' && it.n == 3);
    CHECK(mh_resp_item("+OK", 3, &it) == MH_RESP_MORE && it.need == 4);
}

/* depth arrays, each holding the next, around a last "*0" */
static char *nested(int depth, const char *inner)
{
    size_t n = (size_t)depth * 4 + strlen(inner) + 1;
    char *s = malloc(n), *p = s;
    for (int i = 0; i < depth; i++, p += 4)
        memcpy(p, "*1\r\n", 4);
    strcpy(p, inner);
    return s;
}

static void test_depth(void)
{
    size_t need;
    /* arrays at depths 0..32 are allowed, one at 33 is refused (a null one is a value) */
    char *ok = nested(MH_RESP_MAX_DEPTH, "*0\r\n");
    CHECK(mh_resp_reply(ok, strlen(ok), &need) == (long)strlen(ok));
    char *deep = nested(MH_RESP_MAX_DEPTH + 1, "*0\r\n");
    CHECK(mh_resp_reply(deep, strlen(deep), &need) == MH_RESP_BAD);
    char *null = nested(MH_RESP_MAX_DEPTH + 1, "*-1\r\n");
    CHECK(mh_resp_reply(null, strlen(null), &need) == (long)strlen(null));
    char *scalar = nested(MH_RESP_MAX_DEPTH + 1, ":1\r\n");
    CHECK(mh_resp_reply(scalar, strlen(scalar), &need) == (long)strlen(scalar));
    free(ok);
    free(deep);
    free(null);
    free(scalar);
}

int main(void)
{
    test_replies();
    test_prefixes();
    test_items();
    test_depth();
    return unit_report();
}
