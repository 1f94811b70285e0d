/* Validators and conditional headers: dates both ways, If-None-Match, If-Modified-Since, If-Range.
 */
#include "conditional.h"
#include "unit.h"

static const time_t T = 784111777; /* Sun, 06 Nov 1994 08:49:37 GMT */

static const struct {
    const char *s;
    int ok; /* 1: parses to T */
} dates[] = {
    {"Sun, 06 Nov 1994 08:49:37 GMT", 1},
    {"Sunday, 06-Nov-94 08:49:37 GMT", 1},
    {"Sun Nov  6 08:49:37 1994", 1},
    {"Sun, 06 Nov 1994 08:49:37 UTC", 0},
    {"Sun, 06 Nov 1994 08:49:37", 0},
    {"Sun, 06 Nov 1994 08:49:37 GMT ", 0},
    {"Sun, 6 Nov 1994 08:49:37 GMT", 0},
    {"Sun, 06 Foo 1994 08:49:37 GMT", 0},
    {"Sun, 06 Nov 1994 25:49:37 GMT", 0},
    {"Sun, 32 Nov 1994 08:49:37 GMT", 0},
    {"", 0},
    {"Su", 0},
    {"yesterday", 0},
};

static const char ETAG[] = "\"abc-10-0\"";

static const struct {
    const char *inm, *ims;
    bool want;
} cond_rows[] = {
    {NULL, NULL, false},
    {"\"abc-10-0\"", NULL, true},
    {"W/\"abc-10-0\"", NULL, true},
    {"\"x\", \"abc-10-0\"", NULL, true},
    {"\"x\",W/\"abc-10-0\" ", NULL, true},
    {"*", NULL, true},
    {" * ", NULL, true},
    {"\"x\"", NULL, false},
    {"abc-10-0", NULL, false},
    {"\"abc-10-0", NULL, false},
    {"\"x\" junk, \"abc-10-0\"", NULL, false},
    {"\"x\"", "Sun, 06 Nov 1994 08:49:37 GMT", false}, /* If-None-Match decides alone */
    {NULL, "Sun, 06 Nov 1994 08:49:37 GMT", true},
    {NULL, "Sun, 06 Nov 1994 08:49:38 GMT", true},
    {NULL, "Sun, 06 Nov 1994 08:49:36 GMT", false},
    {NULL, "not a date", false},
};

static const struct {
    const char *v;
    bool want;
} if_range_rows[] = {
    {"\"abc-10-0\"", true},
    {" \"abc-10-0\" ", true},
    {"W/\"abc-10-0\"", false},
    {"\"abc\"", false},
    {"Sun, 06 Nov 1994 08:49:37 GMT", true},
    {"Sun, 06 Nov 1994 08:49:38 GMT", false},
    {"garbage", false},
    {"", false},
};

int main(void)
{
    char buf[MH_HTTP_DATE_LEN + 1];
    CHECK(mh_http_date_format(buf, T) == MH_HTTP_DATE_LEN);
    CHECK_STR(buf, "Sun, 06 Nov 1994 08:49:37 GMT");
    mh_http_date_format(buf, 0);
    CHECK_STR(buf, "Thu, 01 Jan 1970 00:00:00 GMT");
    for (size_t i = 0; i < sizeof dates / sizeof dates[0]; i++) {
        time_t t = 0;
        int rc = mh_http_date_parse(dates[i].s, strlen(dates[i].s), &t);
        CHECKF((rc == 0 && t == T) == (dates[i].ok == 1), "date row %zu (%s): rc %d t %ld", i,
               dates[i].s, rc, (long)t);
    }
    char etag[MH_ETAG_MAX], etag2[MH_ETAG_MAX];
    size_t n = mh_etag_format(etag, 1024, T, 5);
    CHECK(n > 2 && etag[0] == '"' && etag[n - 1] == '"');
    CHECK(mh_etag_format(etag2, 1025, T, 5) == n && strcmp(etag, etag2) != 0);
    mh_etag_format(etag2, 1024, T, 6);
    CHECK(strcmp(etag, etag2) != 0);
    CHECK(mh_etag_format(etag2, UINT64_MAX, INT64_MAX, 999999999) < MH_ETAG_MAX);
    for (size_t i = 0; i < sizeof cond_rows / sizeof cond_rows[0]; i++) {
        const char *inm = cond_rows[i].inm, *ims = cond_rows[i].ims;
        bool got = mh_cond_not_modified(inm, inm ? strlen(inm) : 0, ims, ims ? strlen(ims) : 0,
                                        ETAG, strlen(ETAG), T);
        CHECKF(got == cond_rows[i].want, "cond row %zu", i);
    }
    for (size_t i = 0; i < sizeof if_range_rows / sizeof if_range_rows[0]; i++) {
        const char *v = if_range_rows[i].v;
        CHECKF(mh_cond_if_range(v, strlen(v), ETAG, strlen(ETAG), T) == if_range_rows[i].want,
               "if-range row %zu (%s)", i, v);
    }
    return unit_report();
}
