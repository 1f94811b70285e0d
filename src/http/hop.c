#include "hop.h"

#include <strings.h>

/* By length first: most field names are none of these lengths, and the rest differ early. */
bool mh_hop_is_standard(const char *n, size_t len)
{
    switch (len) {
    case 2:
        return strncasecmp(n, "te", 2) == 0;
    case 7:
        return strncasecmp(n, "trailer", 7) == 0 || strncasecmp(n, "upgrade", 7) == 0;
    case 10:
        return strncasecmp(n, "connection", 10) == 0 || strncasecmp(n, "keep-alive", 10) == 0;
    case 16:
        return strncasecmp(n, "proxy-connection", 16) == 0;
    case 17:
        return strncasecmp(n, "transfer-encoding", 17) == 0;
    case 18:
        return strncasecmp(n, "proxy-authenticate", 18) == 0;
    case 19:
        return strncasecmp(n, "proxy-authorization", 19) == 0;
    default:
        return false;
    }
}

bool mh_hop_is_connection(const char *name, size_t len)
{
    return len == 10 && strncasecmp(name, "connection", 10) == 0;
}

bool mh_hop_add_connection(struct mh_hop *h, const char *value, size_t len)
{
    if (h->n == MH_HOP_MAX_CONNECTION)
        return false;
    h->value[h->n] = value;
    h->len[h->n] = len;
    h->n++;
    return true;
}

/* The separators of hop.lua's "[^,%s]+": a comma and Lua's %s (C isspace in the C locale). */
static bool is_sep(char c)
{
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool mh_hop_named(const struct mh_hop *h, const char *name, size_t len)
{
    for (unsigned k = 0; k < h->n; k++) {
        const char *p = h->value[k], *end = p + h->len[k];
        while (p < end) {
            while (p < end && is_sep(*p))
                p++;
            const char *tok = p;
            while (p < end && !is_sep(*p))
                p++;
            if (p > tok && (size_t)(p - tok) == len && strncasecmp(tok, name, len) == 0)
                return true;
        }
    }
    return false;
}

bool mh_hop_drops(const struct mh_hop *h, const char *name, size_t len)
{
    return mh_hop_is_standard(name, len) || (h->n && mh_hop_named(h, name, len));
}
