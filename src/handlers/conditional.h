#ifndef MH_CONDITIONAL_H
#define MH_CONDITIONAL_H
/*
 * Validators and conditional requests (RFC 9110 §8.8, §13) for responses
 * whose representation is a file: an entity tag made from size and
 * modification time, the Last-Modified date, and the decisions of
 * If-None-Match, If-Modified-Since and If-Range. Pure functions over header
 * values: nothing here allocates or reads a clock.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Room for an ETag: "\"" 16 hex "-" 16 hex "-" 8 hex "\"" + NUL. */
#define MH_ETAG_MAX 48
/* An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") + NUL. */
#define MH_HTTP_DATE_LEN 29

/*
 * Writes the strong ETag of a file of `size` bytes modified at
 * mtime_sec.mtime_nsec, quoted, into out (MH_ETAG_MAX bytes). Returns its
 * length. A change of size or of modification time changes the tag.
 */
size_t mh_etag_format(char *out, uint64_t size, int64_t mtime_sec, long mtime_nsec);

/* Writes t as an IMF-fixdate into out (MH_HTTP_DATE_LEN + 1 bytes); returns the length. */
size_t mh_http_date_format(char *out, time_t t);

/*
 * Parses an HTTP date in any of the three forms a recipient must accept
 * (IMF-fixdate, RFC 850, asctime). Returns 0 and sets *t, or -1.
 */
int mh_http_date_parse(const char *s, size_t len, time_t *t);

/*
 * Whether an If-None-Match value (a list of entity tags, or "*") matches
 * `etag` (quoted, as mh_etag_format writes it) under the weak comparison
 * the header uses: W/"x" matches "x". A malformed list matches nothing.
 */
bool mh_cond_none_match(const char *v, size_t len, const char *etag, size_t etag_len);

/*
 * Whether a GET or HEAD gets 304 Not Modified: If-None-Match when present
 * (it alone decides, §13.2.2), otherwise If-Modified-Since against
 * `mtime` (an unparseable date is ignored). NULL values mean the header
 * was absent.
 */
bool mh_cond_not_modified(const char *inm, size_t inm_len, const char *ims, size_t ims_len,
                          const char *etag, size_t etag_len, time_t mtime);

/*
 * Whether an If-Range value lets a Range apply: a strong entity tag equal
 * to `etag`, or an HTTP date equal to `mtime` (the Last-Modified sent). A
 * weak tag, another tag or a bad date means "send the whole file".
 */
bool mh_cond_if_range(const char *v, size_t len, const char *etag, size_t etag_len, time_t mtime);

#endif
