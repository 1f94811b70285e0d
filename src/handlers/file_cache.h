#ifndef MH_FILE_CACHE_H
#define MH_FILE_CACHE_H
/*
 * A small per-worker cache of opened files, as nginx's open_file_cache: a
 * hot file costs one hash probe per request instead of an open and a stat.
 * Keyed by (root fd, relative name); an entry holds the open fd, what stat
 * said, and the validators derived from it (ETag, Last-Modified). Failed
 * opens (ENOENT, EACCES...) are cached too, so a flood of 404s does not
 * walk the file system either.
 *
 * An entry is trusted for `ttl` seconds after it was opened; a file
 * changed or replaced on disk is seen at the latest that long after. The
 * cache holds at most `max_entries`; the least recently used unreferenced
 * entry makes room. An entry in use (a response still sending from its fd)
 * is referenced and is never closed under the response: when it expires or
 * is evicted it leaves the table and is freed by its last release.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "conditional.h"

struct mh_file_entry {
    int err;     /* 0, or -errno of the open (-ENOENT, -EACCES, ...) */
    int fd;      /* O_RDONLY fd of a regular file; -1 for a directory or an error */
    bool is_dir; /* the name is a directory (err 0, fd -1) */
    uint64_t size;
    time_t mtime;
    char etag[MH_ETAG_MAX];
    char last_modified[MH_HTTP_DATE_LEN + 1];
    uint8_t etag_len;
    const char *type; /* NULL when made; for the caller to fill (the Content-Type) */
    /* private */
    unsigned _refs;
    bool _linked; /* in the table (false: evicted or expired, freed by the last release) */
    double _expires;
    unsigned long _hash;
    int _rootfd;
    struct mh_file_entry *_hnext, *_lprev, *_lnext;
    size_t _klen;
    char _key[]; /* the relative name, NUL-terminated */
};

struct mh_file_cache_stats {
    unsigned long hits, misses, evictions;
    size_t entries;
};

struct mh_file_cache;

/* max_entries 0 disables caching (every get opens). NULL on OOM. */
struct mh_file_cache *mh_file_cache_new(size_t max_entries, double ttl);
/* Frees the cache; every entry must have been released. NULL is a no-op. */
void mh_file_cache_free(struct mh_file_cache *c);

/*
 * The entry for `rel` beneath `rootfd` at time `now` (seconds, any
 * monotonic base), opened with mh_file_open_beneath when not cached or
 * expired. Referenced: give it back with mh_file_cache_release. NULL only
 * when out of memory. Never yields; an open happens on the caller's stack.
 */
struct mh_file_entry *mh_file_cache_get(struct mh_file_cache *c, int rootfd, const char *rel,
                                        size_t len, double now);
void mh_file_cache_release(struct mh_file_cache *c, struct mh_file_entry *e);
/* One more reference on an entry already held (one per queued file chunk). */
void mh_file_cache_retain(struct mh_file_entry *e);

/* Drops every entry from the table; those still referenced are freed by their last release. */
void mh_file_cache_clear(struct mh_file_cache *c);

void mh_file_cache_stats(const struct mh_file_cache *c, struct mh_file_cache_stats *out);

#endif
