#ifndef MH_URL_H
#define MH_URL_H
/*
 * Absolute http:// and https:// URLs as http.fetch takes them. The parse is
 * strict and never allocates: the authority and path are slices of the
 * input; only the host is copied (without IPv6 brackets), NUL-terminated, so
 * it can go straight to the resolver and the TLS name check.
 */
#include <stdbool.h>
#include <stddef.h>

struct mh_url {
    bool tls;
    char host[256];
    unsigned port;                /* 1..65535; 80 or 443 when the URL names none */
    const char *authority, *path; /* slices of the input; path includes the query */
    size_t authority_len, path_len;
};

/*
 * Parses s[0..len). Returns NULL, or a static message ("invalid URL: ...")
 * fit to hand to Lua as the error of a failed fetch.
 */
const char *mh_url_parse(const char *s, size_t len, struct mh_url *u);

#endif
