#ifndef MH_MIME_H
#define MH_MIME_H
/*
 * File name extension → Content-Type, from a mime.types file (Debian's
 * media-types package installs /etc/mime.types). Loaded once, when the first
 * files handler is created, and read-only afterwards: lookups allocate
 * nothing. Text types (text/..., application/javascript,
 * application/xml) get "; charset=utf-8" appended at load time, so the hot
 * path only copies a pointer. application/json gets none: RFC 8259 defines
 * no charset parameter for it.
 */
#include <stddef.h>

struct mh_mime;

/* The type of names without a known extension. */
extern const char mh_mime_default[]; /* "application/octet-stream" */

/*
 * Reads `path` ("type ext ext ..." lines, '#' comments). A missing or
 * unreadable file gives a table that knows a few common types built in, so
 * a machine without media-types still serves HTML as HTML; NULL only when
 * out of memory. The first file line naming an extension wins.
 */
struct mh_mime *mh_mime_load(const char *path);
void mh_mime_free(struct mh_mime *m);

/*
 * The Content-Type for file name `name` (its last '.'-suffix, compared
 * ASCII case-insensitively), or mh_mime_default. A name whose only dot is
 * its first byte (".bashrc") has no extension. The result lives as long as
 * the table.
 */
const char *mh_mime_lookup(const struct mh_mime *m, const char *name, size_t len);

/* Number of extensions known, for tests and logs. */
size_t mh_mime_count(const struct mh_mime *m);

#endif
