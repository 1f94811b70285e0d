#ifndef MH_FILES_H
#define MH_FILES_H
/*
 * The static-file handler's decisions, apart from any protocol: given the
 * path below the mount point and the request's conditional, Range and
 * Accept-Encoding headers, mh_files_plan says what to answer: a status,
 * header pairs, and a body made of file ranges and small memory pieces
 * (the multipart/byteranges separators). The request binding turns that
 * into the protocol's response and output queue.
 *
 * Rules, in the order they apply:
 *   - the path is decoded by mh_file_path_decode: a NUL, an encoded '/',
 *     a "." or ".." segment or a bad escape is 400; a dotfile (unless
 *     allowed) is 404; a name too long is 414;
 *   - the name is opened beneath the root (mh_file_open_beneath, through
 *     the open-file cache): missing, not a regular file, or a symlink
 *     out of the root is 404; unreadable is 403; the server out of fds or
 *     the disk failing is 503, never 500;
 *   - a directory without a trailing '/' is a 301 to the name with one
 *     (query kept); with one it serves its index file, or 404 (no
 *     listings);
 *   - with `precompressed`, a "name.br" or "name.gz" sibling is sent
 *     instead when Accept-Encoding prefers it (Content-Encoding and
 *     "Vary: Accept-Encoding"; its own ETag and length);
 *   - If-None-Match / If-Modified-Since → 304;
 *   - Range (GET only), subject to If-Range: one range → 206 with
 *     Content-Range; several → one 206 multipart/byteranges (sorted,
 *     merged, at most MH_RANGE_MAX); none satisfiable → 416 with
 *     "Content-Range: bytes * /size"; a malformed Range → 200 whole;
 *   - otherwise 200 with the whole file. HEAD gets the same head, no body.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accept_encoding.h"
#include "buf.h"
#include "file_cache.h"
#include "range.h"

struct mh_mime;

struct mh_files_opts {
    const char *index; /* file served for "dir/", NULL = none */
    long max_age;      /* Cache-Control: max-age=N; -1 = no Cache-Control */
    bool precompressed;
    bool dotfiles;
};

/*
 * A mounted directory: its root fd (opened once, O_PATH), options, and the
 * worker's MIME table and file cache (not owned: they outlive it).
 */
struct mh_files {
    int rootfd;
    char *index;
    size_t index_len;
    long max_age;
    bool precompressed, dotfiles;
    char cache_control[32]; /* "max-age=3600", or "" */
};

/*
 * Opens `dir` (a directory) as a root. Returns NULL and a message in err
 * when it is not a readable directory or memory runs out.
 */
struct mh_files *mh_files_new(const char *dir, const struct mh_files_opts *opts, char *err,
                              size_t errlen);
void mh_files_free(struct mh_files *f);

/* The request as the planner sees it. NULL header values mean absent. */
struct mh_files_input {
    bool head;            /* HEAD: the head only */
    const char *path;     /* escaped path below the mount point */
    size_t path_len;      /* (may be 0: the mount point itself) */
    const char *location; /* the whole escaped request path, for redirects */
    size_t location_len;  /* (without query) */
    const char *query;    /* raw query, without '?', or NULL */
    size_t query_len;
    const char *if_none_match, *if_modified_since, *range, *if_range;
    size_t if_none_match_len, if_modified_since_len, range_len, if_range_len;
    struct mh_accept_encoding accept; /* all Accept-Encoding fields added */
};

#define MH_FILES_MAX_HEADERS 10

struct mh_files_header {
    const char *name;
    const char *value;
    size_t value_len;
};

/* One piece of the body: memory bytes, then file bytes (either may be empty). */
struct mh_files_part {
    const char *mem;
    size_t mem_len;
    uint64_t offset, len; /* in reply->entry's fd */
};

/*
 * What to answer. Header values point into the reply, the entry or the
 * files object: the reply must stay alive (and the entry referenced) until
 * the headers are copied, the parts until they are written.
 */
struct mh_files_reply {
    int status;
    struct mh_file_entry *entry; /* the file sent (referenced), or NULL */
    bool has_body;               /* false: HEAD, 304, errors without a body */
    uint64_t content_length;     /* of the body as sent (also for HEAD) */
    enum mh_coding coding;       /* of a precompressed sibling, else identity */
    bool varies;                 /* Accept-Encoding chose the representation */
    const char *error_body;      /* short text for error statuses, or NULL */
    unsigned nheaders;
    struct mh_files_header headers[MH_FILES_MAX_HEADERS];
    unsigned nparts;
    struct mh_files_part parts[MH_RANGE_MAX + 1]; /* +1: the closing boundary */
    /* private */
    struct mh_range _ranges[MH_RANGE_MAX];
    struct mh_buf _text; /* multipart separators, Content-Range, Location */
    char _len_buf[24];
    char _name[4096 + 64];
};

void mh_files_reply_init(struct mh_files_reply *r);
/* Releases the entry and the reply's memory; r may be planned again. */
void mh_files_reply_reset(struct mh_files_reply *r, struct mh_file_cache *cache);
/* Releases the entry and frees the reply's memory. */
void mh_files_reply_free(struct mh_files_reply *r, struct mh_file_cache *cache);

/*
 * Plans the answer to `in` at loop time `now` (for the cache's TTL). The
 * reply's previous contents must have been reset. Returns 0, or -1 when
 * memory ran out (answer 503).
 */
int mh_files_plan(const struct mh_files *f, struct mh_file_cache *cache, const struct mh_mime *mime,
                  const struct mh_files_input *in, double now, struct mh_files_reply *r);

#endif
