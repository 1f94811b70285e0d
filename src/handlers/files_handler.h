#ifndef MH_FILES_HANDLER_H
#define MH_FILES_HANDLER_H
/*
 * The static-file C handler: a mounted directory (files.h) behind the
 * handler interface. It answers in start, at once: the head from the plan,
 * then the body as file-range chunks (sent with sendfile on plain TCP) and,
 * for multipart ranges, small memory pieces. Each file chunk holds a
 * reference on its open-file cache entry, dropped when the chunk is
 * written or dropped, so an fd is never closed under a response.
 *
 * The handler owns its files object and open-file cache; the MIME table is
 * shared (not owned). Mounted on "GET /static/" or "/static/{path...}",
 * it serves the request path after the pattern's literal prefix. Methods
 * other than GET and HEAD get 405.
 */
#include "files.h"
#include "handler.h"

#define MH_FILES_CACHE_ENTRIES 1024
#define MH_FILES_CACHE_TTL     1.0 /* seconds a cached open/stat is trusted */

struct mh_files_handler {
    struct mh_handler base; /* first: the router's table points here */
    struct mh_files *files;
    struct mh_file_cache *cache;
    const struct mh_mime *mime;
};

/*
 * Mounts `dir` (opened now: a missing directory fails here, not per
 * request). NULL with a message in err.
 */
struct mh_files_handler *mh_files_handler_new(const char *dir, const struct mh_files_opts *opts,
                                              const struct mh_mime *mime, char *err, size_t errlen);
/* Frees the handler; responses still sending keep their entries until written. */
void mh_files_handler_free(struct mh_files_handler *h);

#endif
