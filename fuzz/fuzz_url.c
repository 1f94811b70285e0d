/*
 * libFuzzer target for the URL parser of http.fetch (src/client/url.c).
 * Besides not crashing, an accepted URL must keep the parser's promises: a
 * non-empty printable host, a port in range, and slices inside the input.
 */
#include "url.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly `size` bytes, so ASan sees any read past the end. */
    char *s = malloc(size ? size : 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    struct mh_url u;
    if (mh_url_parse(s, size, &u) == NULL) {
        size_t hl = strlen(u.host);
        if (hl == 0 || hl >= sizeof u.host || u.port == 0 || u.port > 65535)
            abort();
        for (size_t i = 0; i < hl; i++)
            if ((unsigned char)u.host[i] <= ' ')
                abort();
        if (u.authority < s || u.authority + u.authority_len > s + size || u.path < s ||
            u.path + u.path_len > s + size)
            abort();
    }
    free(s);
    return 0;
}
