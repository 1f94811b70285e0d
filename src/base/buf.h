#ifndef MH_BUF_H
#define MH_BUF_H
/*
 * Growable byte buffers and a free list of fixed-size ones. Connections take
 * their read and output buffers from the worker's pool and give them back
 * when idle, so a keep-alive connection in steady state allocates nothing and
 * an idle one holds no buffer at all.
 */
#include <stddef.h>
#include <string.h>

#define MH_BUF_CHUNK (16 * 1024) /* size of pooled buffers */

struct mh_buf {
    char *data;
    size_t len; /* bytes used */
    size_t cap; /* bytes allocated */
};

/* A free list of MH_BUF_CHUNK-sized allocations. */
struct mh_buf_pool {
    void **items;
    size_t n, cap, max;
};

void mh_buf_pool_init(struct mh_buf_pool *p, size_t max_cached);
void mh_buf_pool_destroy(struct mh_buf_pool *p);
/* Frees cached allocations past the first `keep` (memory back after a spike). */
void mh_buf_pool_trim(struct mh_buf_pool *p, size_t keep);

/* Gives b a pooled MH_BUF_CHUNK allocation if it has none. -1 on OOM. */
int mh_buf_acquire(struct mh_buf *b, struct mh_buf_pool *p);
/* Returns b's memory to the pool (or frees it if it grew past the chunk size). */
void mh_buf_release(struct mh_buf *b, struct mh_buf_pool *p);

/* Ensures room for `extra` more bytes, growing by doubling. -1 on OOM. */
int mh_buf_reserve(struct mh_buf *b, size_t extra);
/* Appends n bytes. -1 on OOM (b unchanged). */
int mh_buf_append(struct mh_buf *b, const void *p, size_t n);
/* Drops the first n bytes, moving the rest to the front. */
void mh_buf_consume(struct mh_buf *b, size_t n);
void mh_buf_free(struct mh_buf *b);

static inline int mh_buf_append_str(struct mh_buf *b, const char *s)
{
    return mh_buf_append(b, s, strlen(s));
}

#endif
