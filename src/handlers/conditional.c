#define _GNU_SOURCE /* timegm */
#include "conditional.h"

#include <stdio.h>
#include <string.h>

size_t mh_etag_format(char *out, uint64_t size, int64_t mtime_sec, long mtime_nsec)
{
    int n = snprintf(out, MH_ETAG_MAX, "\"%llx-%llx-%lx\"", (unsigned long long)mtime_sec,
                     (unsigned long long)size, (unsigned long)mtime_nsec);
    return n > 0 && n < MH_ETAG_MAX ? (size_t)n : 0;
}

static const char wdays[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                   "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

static char *put2(char *p, int v)
{
    *p++ = (char)('0' + v / 10 % 10);
    *p++ = (char)('0' + v % 10);
    return p;
}

size_t mh_http_date_format(char *out, time_t t)
{
    struct tm tm;
    gmtime_r(&t, &tm);
    char *p = out;
    memcpy(p, wdays[tm.tm_wday], 3);
    p += 3;
    *p++ = ',';
    *p++ = ' ';
    p = put2(p, tm.tm_mday);
    *p++ = ' ';
    memcpy(p, months[tm.tm_mon], 3);
    p += 3;
    *p++ = ' ';
    int y = tm.tm_year + 1900;
    p = put2(p, y / 100);
    p = put2(p, y % 100);
    *p++ = ' ';
    p = put2(p, tm.tm_hour);
    *p++ = ':';
    p = put2(p, tm.tm_min);
    *p++ = ':';
    p = put2(p, tm.tm_sec);
    memcpy(p, " GMT", 4);
    p += 4;
    *p = '\0';
    return (size_t)(p - out);
}

/* A cursor over a date string: each reader consumes and reports failure by returning -1. */
struct cur {
    const char *p, *end;
};

static int digits(struct cur *c, int min, int max, int *v)
{
    int n = 0, x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9' && n < max) {
        x = x * 10 + (*c->p++ - '0');
        n++;
    }
    *v = x;
    return n >= min ? 0 : -1;
}

static int lit(struct cur *c, const char *s)
{
    size_t n = strlen(s);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0)
        return -1;
    c->p += n;
    return 0;
}

static int month(struct cur *c, int *m)
{
    if (c->end - c->p < 3)
        return -1;
    for (int i = 0; i < 12; i++)
        if (memcmp(c->p, months[i], 3) == 0) {
            *m = i;
            c->p += 3;
            return 0;
        }
    return -1;
}

static int clock_part(struct cur *c, struct tm *tm)
{
    return digits(c, 2, 2, &tm->tm_hour) < 0 || lit(c, ":") < 0 ||
                   digits(c, 2, 2, &tm->tm_min) < 0 || lit(c, ":") < 0 ||
                   digits(c, 2, 2, &tm->tm_sec) < 0
               ? -1
               : 0;
}

int mh_http_date_parse(const char *s, size_t len, time_t *t)
{
    struct cur c = {s, s + len};
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    const char *comma = memchr(s, ',', len);
    if (comma && comma - s == 3) { /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
        c.p = comma + 1;
        if (lit(&c, " ") < 0 || digits(&c, 2, 2, &tm.tm_mday) < 0 || lit(&c, " ") < 0 ||
            month(&c, &tm.tm_mon) < 0 || lit(&c, " ") < 0 || digits(&c, 4, 4, &tm.tm_year) < 0 ||
            lit(&c, " ") < 0 || clock_part(&c, &tm) < 0 || lit(&c, " GMT") < 0)
            return -1;
        tm.tm_year -= 1900;
    } else if (comma) { /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
        c.p = comma + 1;
        if (lit(&c, " ") < 0 || digits(&c, 2, 2, &tm.tm_mday) < 0 || lit(&c, "-") < 0 ||
            month(&c, &tm.tm_mon) < 0 || lit(&c, "-") < 0 || digits(&c, 2, 2, &tm.tm_year) < 0 ||
            lit(&c, " ") < 0 || clock_part(&c, &tm) < 0 || lit(&c, " GMT") < 0)
            return -1;
        if (tm.tm_year < 70)
            tm.tm_year += 100; /* two-digit years: 1970..2069 */
    } else {                   /* asctime: Sun Nov  6 08:49:37 1994 */
        if (len < 3)
            return -1;
        c.p += 3;
        if (lit(&c, " ") < 0 || month(&c, &tm.tm_mon) < 0 || lit(&c, " ") < 0)
            return -1;
        if (c.p < c.end && *c.p == ' ')
            c.p++;
        if (digits(&c, 1, 2, &tm.tm_mday) < 0 || lit(&c, " ") < 0 || clock_part(&c, &tm) < 0 ||
            lit(&c, " ") < 0 || digits(&c, 4, 4, &tm.tm_year) < 0)
            return -1;
        tm.tm_year -= 1900;
    }
    if (c.p != c.end || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
        tm.tm_sec > 60)
        return -1;
    *t = timegm(&tm);
    return 0;
}

static bool ows(char c)
{
    return c == ' ' || c == '\t';
}

bool mh_cond_none_match(const char *v, size_t len, const char *etag, size_t etag_len)
{
    size_t i = 0;
    while (i < len && ows(v[i]))
        i++;
    size_t j = len;
    while (j > i && ows(v[j - 1]))
        j--;
    if (j - i == 1 && v[i] == '*')
        return true;
    while (i < j) {
        while (i < j && (ows(v[i]) || v[i] == ','))
            i++;
        if (i == j)
            break;
        if (j - i >= 2 && v[i] == 'W' && v[i + 1] == '/')
            i += 2;
        if (i == j || v[i] != '"')
            return false;
        const char *close = memchr(v + i + 1, '"', j - i - 1);
        if (!close)
            return false;
        size_t tl = (size_t)(close - (v + i)) + 1;
        if (tl == etag_len && memcmp(v + i, etag, tl) == 0)
            return true;
        i += tl;
        while (i < j && ows(v[i]))
            i++;
        if (i < j && v[i] != ',')
            return false;
    }
    return false;
}

bool mh_cond_not_modified(const char *inm, size_t inm_len, const char *ims, size_t ims_len,
                          const char *etag, size_t etag_len, time_t mtime)
{
    if (inm)
        return mh_cond_none_match(inm, inm_len, etag, etag_len);
    time_t since;
    if (ims && mh_http_date_parse(ims, ims_len, &since) == 0)
        return mtime <= since;
    return false;
}

bool mh_cond_if_range(const char *v, size_t len, const char *etag, size_t etag_len, time_t mtime)
{
    while (len && ows(*v)) {
        v++;
        len--;
    }
    while (len && ows(v[len - 1]))
        len--;
    if (len && v[0] == '"')
        return len == etag_len && memcmp(v, etag, len) == 0;
    if (len >= 2 && v[0] == 'W' && v[1] == '/')
        return false; /* weak tags never satisfy If-Range */
    time_t t;
    return mh_http_date_parse(v, len, &t) == 0 && t == mtime;
}
