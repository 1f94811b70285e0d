#include "hop.h"

#include <strings.h>

#define NAME(s)                                                                                    \
    {                                                                                              \
        s, sizeof s - 1                                                                            \
    }
/* The standard ones and the older ones still seen (Keep-Alive, Proxy-Connection). */
const struct mh_hop_name mh_hop_standard[] = {
    NAME("connection"),
    NAME("keep-alive"),
    NAME("proxy-connection"),
    NAME("te"),
    NAME("trailer"),
    NAME("transfer-encoding"),
    NAME("upgrade"),
    NAME("proxy-authenticate"),
    NAME("proxy-authorization"),
};
#undef NAME
const size_t mh_hop_nstandard = sizeof mh_hop_standard / sizeof mh_hop_standard[0];

/* Lengths first: most field names match none, and an integer compare is all they cost. */
bool mh_hop_is_standard(const char *n, size_t len)
{
    for (size_t i = 0; i < mh_hop_nstandard; i++)
        if (mh_hop_standard[i].len == len && strncasecmp(n, mh_hop_standard[i].name, len) == 0)
            return true;
    return false;
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

/* The separators of a Connection value's tokens: a comma and white space (isspace in the C locale). */
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
