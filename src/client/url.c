#include "url.h"

#include <string.h>
#include <strings.h>

const char *mh_url_parse(const char *s, size_t len, struct mh_url *u)
{
    const char *end = s + len, *p;
    if (len >= 7 && strncasecmp(s, "http://", 7) == 0) {
        u->tls = false;
        p = s + 7;
    } else if (len >= 8 && strncasecmp(s, "https://", 8) == 0) {
        u->tls = true;
        p = s + 8;
    } else {
        return "invalid URL: only http:// and https:// are supported";
    }
    u->authority = p;
    while (p < end && *p != '/' && *p != '?' && *p != '#')
        p++;
    u->authority_len = (size_t)(p - u->authority);
    u->path = p;
    while (p < end && *p != '#')
        p++;
    u->path_len = (size_t)(p - u->path);
    const char *a = u->authority, *aend = a + u->authority_len, *hend;
    if (memchr(a, '@', u->authority_len))
        return "invalid URL: user info is not supported";
    u->port = u->tls ? 443 : 80;
    const char *portp = NULL;
    if (a < aend && *a == '[') {
        hend = memchr(a, ']', u->authority_len);
        if (!hend)
            return "invalid URL: bad IPv6 address";
        a++;
        if (hend + 1 < aend) {
            if (hend[1] != ':')
                return "invalid URL: bad authority";
            portp = hend + 2;
        }
    } else {
        hend = memchr(a, ':', u->authority_len);
        if (hend)
            portp = hend + 1;
        else
            hend = aend;
    }
    size_t hl = (size_t)(hend - a);
    if (hl == 0 || hl >= sizeof u->host)
        return "invalid URL: bad host";
    for (size_t i = 0; i < hl; i++)
        if ((unsigned char)a[i] <= ' ' || a[i] == '\x7f')
            return "invalid URL: bad host";
    memcpy(u->host, a, hl);
    u->host[hl] = 0;
    if (portp) {
        unsigned port = 0;
        if (portp == aend)
            return "invalid URL: bad port";
        for (const char *q = portp; q < aend; q++) {
            if (*q < '0' || *q > '9' || (port = port * 10 + (unsigned)(*q - '0')) > 65535)
                return "invalid URL: bad port";
        }
        if (port == 0)
            return "invalid URL: bad port";
        u->port = port;
    }
    for (size_t i = 0; i < u->path_len; i++)
        if ((unsigned char)u->path[i] <= ' ' || u->path[i] == '\x7f')
            return "invalid URL: bad character in the path";
    return NULL;
}
