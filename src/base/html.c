#include "html.h"

#include <string.h>

/* Entity for each byte that needs one, NULL for the rest. */
static const char *entity(unsigned char c)
{
    switch (c) {
    case '&':
        return "&amp;";
    case '<':
        return "&lt;";
    case '>':
        return "&gt;";
    case '"':
        return "&quot;";
    case '\'':
        return "&#39;";
    default:
        return NULL;
    }
}

size_t mh_html_escaped_len(const char *s, size_t len)
{
    size_t n = len;
    for (size_t i = 0; i < len; i++) {
        const char *e = entity((unsigned char)s[i]);
        if (e)
            n += strlen(e) - 1;
    }
    return n;
}

void mh_html_escape(const char *s, size_t len, char *out)
{
    for (size_t i = 0; i < len; i++) {
        const char *e = entity((unsigned char)s[i]);
        if (!e) {
            *out++ = s[i];
            continue;
        }
        size_t n = strlen(e);
        memcpy(out, e, n);
        out += n;
    }
}
