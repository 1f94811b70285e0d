/*
 * libFuzzer target for Accept-Encoding. The first byte is the mask of
 * codings available; the rest is split at the first '\n' into two fields.
 * The choice must always be identity or an available coding.
 */
#include "accept_encoding.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned available = data[0] & (MH_CODING_BIT(MH_CODING_GZIP) | MH_CODING_BIT(MH_CODING_BR));
    const char *v = (const char *)data + 1;
    size_t len = size - 1;
    const char *nl = memchr(v, '\n', len);
    struct mh_accept_encoding a;
    mh_accept_encoding_init(&a);
    if (nl) {
        mh_accept_encoding_add(&a, v, (size_t)(nl - v));
        mh_accept_encoding_add(&a, nl + 1, len - (size_t)(nl - v) - 1);
    } else {
        mh_accept_encoding_add(&a, v, len);
    }
    enum mh_coding c = mh_accept_encoding_choose(&a, available);
    if (c >= MH_CODING_COUNT)
        abort();
    if (c != MH_CODING_IDENTITY && !(available & MH_CODING_BIT(c)))
        abort();
    for (int k = 0; k < MH_CODING_COUNT; k++)
        if (a.q[k] > 1000)
            abort();
    return 0;
}
