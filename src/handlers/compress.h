#ifndef MH_COMPRESS_H
#define MH_COMPRESS_H
/*
 * Response compression settings and the per-response decision. Settings
 * are parsed once (config.c turns http.server{ compress = {...} } into a
 * struct mh_compress_conf); per response only the Content-Type is matched
 * against the compiled type list, and the rest are integer compares.
 *
 * A response is gzipped when all of these hold: compression is on; the
 * method is not HEAD; the status is neither 1xx, 204, 206 nor 304; the
 * response has no Content-Encoding (or Content-Range) of its own and no
 * "Cache-Control: no-transform"; its type matches; its length, when
 * known, is at least min_bytes; and the client's Accept-Encoding takes
 * gzip (q > 0). "Vary: Accept-Encoding" goes on every response that
 * passed all but the last test, so a cache keeps both variants apart.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accept_encoding.h"

#define MH_COMPRESS_MAX_TYPES 32
#define MH_COMPRESS_TYPE_MAX  64

struct mh_compress_type {
    char name[MH_COMPRESS_TYPE_MAX]; /* lower case; "text/" for "text/..." */
    uint8_t len;
    bool prefix;
};

struct mh_compress_conf {
    bool on;
    int level;          /* zlib level 1..9 */
    uint64_t min_bytes; /* smaller bodies of known length are sent as they are */
    size_t ntypes;
    struct mh_compress_type types[MH_COMPRESS_MAX_TYPES];
};

/* Off, level 1, min_bytes 1024, and the default types (text/..., JSON, JavaScript, SVG). */
void mh_compress_conf_init(struct mh_compress_conf *c);
/* Drops the type list (before a user's own list replaces the defaults). */
void mh_compress_conf_clear_types(struct mh_compress_conf *c);

/*
 * Adds a media type ("application/json") or a type wildcard ("text/" followed by "*").
 * Returns NULL, or a message: not of the form type/subtype, too long, too
 * many types.
 */
const char *mh_compress_conf_add_type(struct mh_compress_conf *c, const char *s, size_t len);

/* Whether a Content-Type value (parameters ignored, any case) is in the list. */
bool mh_compress_type_matches(const struct mh_compress_conf *c, const char *type, size_t len);

/* A response head as the decision sees it. */
struct mh_compress_input {
    bool head; /* HEAD request */
    int status;
    const char *type; /* Content-Type value, NULL = none */
    size_t type_len;
    bool encoded;      /* has Content-Encoding or Content-Range */
    bool no_transform; /* Cache-Control: no-transform */
    bool length_known;
    uint64_t length;
    const struct mh_accept_encoding *accept;
};

struct mh_compress_verdict {
    bool gzip; /* compress this response */
    bool vary; /* add "Vary: Accept-Encoding" */
};

struct mh_compress_verdict mh_compress_decide(const struct mh_compress_conf *c,
                                              const struct mh_compress_input *in);

/* Whether a Cache-Control value has the no-transform directive. */
bool mh_compress_no_transform(const char *v, size_t len);

#endif
