/*
 * libFuzzer target for the conditional headers: HTTP dates, If-None-Match,
 * If-Modified-Since and If-Range over the same bytes. A date that parses
 * must print back to a date that parses to the same time.
 */
#include "conditional.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *v = (const char *)data;
    time_t t;
    if (mh_http_date_parse(v, size, &t) == 0 && t >= 0 && t < 253402300800) { /* < year 10000 */
        char buf[MH_HTTP_DATE_LEN + 1];
        time_t back;
        size_t n = mh_http_date_format(buf, t);
        if (n != MH_HTTP_DATE_LEN || mh_http_date_parse(buf, n, &back) != 0 || back != t)
            abort();
    }
    char etag[MH_ETAG_MAX];
    size_t elen = mh_etag_format(etag, size, 784111777, (long)size);
    (void)mh_cond_not_modified(v, size, NULL, 0, etag, elen, 784111777);
    (void)mh_cond_not_modified(NULL, 0, v, size, etag, elen, 784111777);
    (void)mh_cond_if_range(v, size, etag, elen, 784111777);
    /* The input as the tag itself: a quoted value always matches itself. */
    if (size >= 2 && v[0] == '"' && v[size - 1] == '"' && !memchr(v + 1, '"', size - 2) &&
        !mh_cond_none_match(v, size, v, size))
        abort();
    return 0;
}
