#include "path.h"

#include <string.h>

int mh_path_is_clean(const char *p, size_t len)
{
    if (len == 0 || p[0] != '/')
        return 0;
    /* Look at each segment start (the byte after a '/'). */
    for (size_t i = 0; i < len; i++) {
        if (p[i] != '/')
            continue;
        size_t s = i + 1;
        if (s == len)
            return 1; /* trailing slash is kept */
        if (p[s] == '/')
            return 0;
        if (p[s] == '.') {
            if (s + 1 == len || p[s + 1] == '/')
                return 0;
            if (p[s + 1] == '.' && (s + 2 == len || p[s + 2] == '/'))
                return 0;
        }
    }
    return 1;
}

/*
 * The rooted case of Go's path.Clean (lazybuf without the laziness: we always
 * write, the caller only calls us when mh_path_is_clean said no), followed by
 * cleanPath's trailing-slash restoration.
 */
size_t mh_path_clean(const char *p, size_t len, char *out)
{
    size_t r = 0, w = 1;
    out[0] = '/';
    if (len > 0 && p[0] == '/')
        r = 1;
    while (r < len) {
        if (p[r] == '/') {
            r++;
        } else if (p[r] == '.' && (r + 1 == len || p[r + 1] == '/')) {
            r++;
        } else if (p[r] == '.' && p[r + 1] == '.' && (r + 2 == len || p[r + 2] == '/')) {
            r += 2;
            /* Back up to the previous '/', but never past the root. */
            if (w > 1) {
                w--;
                while (w > 1 && out[w] != '/')
                    w--;
            }
        } else {
            if (w != 1)
                out[w++] = '/';
            while (r < len && p[r] != '/')
                out[w++] = p[r++];
        }
    }
    /* cleanPath: a trailing slash in the input survives, except on "/". */
    if (len > 0 && p[len - 1] == '/' && w != 1)
        out[w++] = '/';
    return w;
}

long mh_path_unescape(const char *in, size_t len, char *out)
{
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        if (in[i] != '%') {
            out[w++] = in[i];
            continue;
        }
        if (i + 2 >= len)
            return -1;
        int hi = mh_path_hexval((unsigned char)in[i + 1]);
        int lo = mh_path_hexval((unsigned char)in[i + 2]);
        if (hi < 0 || lo < 0)
            return -1;
        out[w++] = (char)(hi << 4 | lo);
        i += 2;
    }
    return (long)w;
}

long mh_path_seg_decoded_len(const char *s, size_t len, int *has_pct)
{
    const char *pct = memchr(s, '%', len);
    *has_pct = pct != NULL;
    if (!pct)
        return (long)len;
    size_t n = 0;
    for (size_t i = 0; i < len; i++, n++) {
        if (s[i] != '%')
            continue;
        if (i + 2 >= len || mh_path_hexval((unsigned char)s[i + 1]) < 0 ||
            mh_path_hexval((unsigned char)s[i + 2]) < 0)
            return -1;
        i += 2;
    }
    return (long)n;
}
