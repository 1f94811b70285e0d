/*
 * libFuzzer target for the Range parser. The first 8 input bytes are the
 * body size (little endian, small sizes made likely), the rest the header
 * value. Any result must be a valid answer: ranges inside the body, sorted,
 * disjoint and not adjacent, at most MH_RANGE_MAX.
 */
#include "range.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t body = 0;
    for (int i = 7; i >= 0; i--)
        body = body << 8 | data[i];
    if (data[7] < 0x80)
        body %= 100000; /* mostly sizes ranges can hit */
    struct mh_range r[MH_RANGE_MAX];
    unsigned n = 0;
    enum mh_range_result res = mh_range_parse((const char *)data + 8, size - 8, body, r, &n);
    if (res != MH_RANGE_OK)
        return 0;
    if (n < 1 || n > MH_RANGE_MAX)
        abort();
    for (unsigned k = 0; k < n; k++) {
        if (r[k].first > r[k].last || r[k].last >= body)
            abort();
        if (k && r[k].first <= r[k - 1].last + 1)
            abort();
    }
    return 0;
}
