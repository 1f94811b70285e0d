#ifndef MH_PATH_H
#define MH_PATH_H
/*
 * Request-path helpers shared by the router and the request code. All of them
 * work on the escaped path (as it arrived on the wire), so that "%2F" stays
 * data and never becomes a separator, and none of them allocates.
 */
#include <stddef.h>

/*
 * Returns 1 when `p` is already canonical, i.e. mh_path_clean would return it
 * unchanged: it starts with '/', has no empty segment ("//") and no "." or
 * ".." segment. Lets the hot path skip the copy for the common case.
 */
int mh_path_is_clean(const char *p, size_t len);

/*
 * Go's cleanPath on an escaped path: adds a leading '/', collapses "//",
 * drops "." segments, resolves ".." (never above the root) and keeps a
 * trailing slash. `out` needs len + 1 bytes (a leading '/' may be added);
 * `out` must not overlap `p`. Returns the cleaned length (at least 1).
 */
size_t mh_path_clean(const char *p, size_t len, char *out);

/*
 * Decodes %XX escapes of a path segment value into out (at least len bytes).
 * Returns the decoded length, or -1 on a malformed escape. '+' is kept, as in
 * a path (not a query). Same declaration as in router.h.
 */
long mh_path_unescape(const char *in, size_t len, char *out);

/*
 * Scans an escaped segment: returns its decoded length, or -1 when an escape
 * is malformed (then Go compares the raw bytes, and so do we). Sets *has_pct
 * when the segment contains '%'.
 */
long mh_path_seg_decoded_len(const char *s, size_t len, int *has_pct);

/* Value of a hex digit, or -1. */
static inline int mh_path_hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

#endif
