/*
 * libFuzzer target for http/hop.c: what a client or an upstream puts in its
 * Connection fields. The input is NUL-separated: a field name, then the
 * Connection values (more than MH_HOP_MAX_CONNECTION of them are refused).
 * mh_hop_named must agree with a plain model (split on commas and white
 * space, compare without case), and every token it finds must be named.
 */
#include "hop.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool sep(char c)
{
    return c == ',' || (c != 0 && strchr(" \t\n\v\f\r", c) != NULL);
}

/* The model: is name among the tokens of v[0..len)? */
static bool model(const char *v, size_t len, const char *name, size_t nlen)
{
    size_t i = 0;
    while (i < len) {
        while (i < len && sep(v[i]))
            i++;
        size_t start = i;
        while (i < len && !sep(v[i]))
            i++;
        if (i > start && i - start == nlen) {
            size_t k = 0;
            while (k < nlen &&
                   tolower((unsigned char)v[start + k]) == tolower((unsigned char)name[k]))
                k++;
            if (k == nlen)
                return true;
        }
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size;
    const char *nul = memchr(p, 0, size);
    const char *name = p;
    size_t nlen = nul ? (size_t)(nul - p) : size;
    p = nul ? nul + 1 : end;
    struct mh_hop h = {0};
    bool expect = false;
    unsigned count = 0;
    while (p < end) {
        const char *v = p;
        const char *vend = memchr(p, 0, (size_t)(end - p));
        size_t vlen = vend ? (size_t)(vend - v) : (size_t)(end - v);
        p = vend ? vend + 1 : end;
        bool added = mh_hop_add_connection(&h, v, vlen);
        if (added != (count < MH_HOP_MAX_CONNECTION))
            abort();
        if (!added)
            break;
        count++;
        expect |= model(v, vlen, name, nlen);
    }
    if (mh_hop_named(&h, name, nlen) != expect)
        abort();
    if (mh_hop_drops(&h, name, nlen) != (expect || mh_hop_is_standard(name, nlen)))
        abort();
    /* every token of every value is named */
    for (unsigned k = 0; k < h.n; k++) {
        const char *v = h.value[k], *ve = v + h.len[k];
        while (v < ve) {
            while (v < ve && sep(*v))
                v++;
            const char *t = v;
            while (v < ve && !sep(*v))
                v++;
            if (v > t && !mh_hop_named(&h, t, (size_t)(v - t)))
                abort();
        }
    }
    return 0;
}
