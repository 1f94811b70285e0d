#ifndef MH_OUTQ_H
#define MH_OUTQ_H
/*
 * An output chunk queue: the bytes of a response body (or of a connection's
 * wire output) in order, as three kinds of chunk:
 *
 *   memory     bytes copied into the queue's own buffer (small writes, heads,
 *              chunk-size lines: copying a few bytes is cheaper than tracking them)
 *   reference  bytes owned by someone else (a Lua string), not copied: the
 *              owner is told through `release` once they are written or dropped
 *   file       a range of an open file (fd, offset, length): sent with sendfile
 *              on plain TCP, read into a pooled buffer on TLS; `release` is
 *              called when the range is done, so the owner may close or
 *              recycle the fd (the queue never closes it)
 *
 * Contract:
 * - Order is kept across kinds. Adjacent memory appends share one chunk.
 * - Every `release` is called exactly once: when the chunk is fully consumed
 *   (mh_outq_consume), moved away and then consumed in the destination queue,
 *   or when the queue is cleared (mh_outq_clear, mh_outq_free). It is never
 *   called from inside an append.
 * - Errors: appends return 0, or -1 on OOM with the queue unchanged; a failed
 *   reference or file append does NOT call release (the caller still owns it).
 * - The queue keeps its memory between uses (mh_outq_clear keeps capacity),
 *   so a pooled connection in steady state allocates nothing per request.
 * - Nothing here does I/O: the protocol layer gathers iovecs (mh_outq_iov)
 *   or takes the file chunk at the front (mh_outq_front_file), writes, and
 *   reports progress with mh_outq_consume.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "buf.h"

/* Called once for a reference or file chunk when the queue is done with it. */
typedef void (*mh_chunk_release_fn)(void *ud, uintptr_t token);

enum mh_chunk_kind {
    MH_CHUNK_MEM,
    MH_CHUNK_REF,
    MH_CHUNK_FILE,
};

struct mh_chunk {
    uint8_t kind; /* enum mh_chunk_kind */
    uint64_t len; /* bytes of this chunk not yet consumed */
    union {
        size_t mem_off;  /* MEM: offset of the first unconsumed byte in the queue's buffer */
        const char *ref; /* REF: first unconsumed byte */
        struct {
            int fd;
            off_t off; /* next unconsumed byte in the file */
        } file;
    } u;
    mh_chunk_release_fn release; /* REF and FILE; may be NULL */
    void *release_ud;
    uintptr_t release_token;
};

struct mh_outq {
    uint64_t bytes; /* bytes queued and not consumed, all kinds */
    struct mh_chunk *_chunks;
    uint32_t _head, _n, _cap; /* live chunks are _chunks[_head .. _head + _n) */
    uint32_t _nrel;           /* live reference and file chunks (memory-only queues are fast) */
    struct mh_buf _mem;       /* backs MEM chunks */
};

/* A zeroed struct is an empty queue. Frees everything (calling pending releases). */
void mh_outq_free(struct mh_outq *q);
void mh_outq_clear_slow(struct mh_outq *q);

/* Drops every chunk (calling pending releases), keeps the memory for reuse. */
static inline void mh_outq_clear(struct mh_outq *q)
{
    if (q->_nrel) {
        mh_outq_clear_slow(q);
        return;
    }
    q->_head = q->_n = 0;
    q->_mem.len = 0;
    q->bytes = 0;
}
/*
 * Pooled memory for the queue's buffer (a connection's wire queue): acquire
 * before appending (-1 on OOM), release when the queue is empty (a no-op
 * otherwise), e.g. when the connection goes idle.
 */
static inline int mh_outq_acquire(struct mh_outq *q, struct mh_buf_pool *p)
{
    return q->_mem.data ? 0 : mh_buf_acquire(&q->_mem, p);
}

static inline void mh_outq_release(struct mh_outq *q, struct mh_buf_pool *p)
{
    if (q->_n == 0 && q->_mem.data) {
        q->_mem.len = 0;
        mh_buf_release(&q->_mem, p);
    }
}

static inline bool mh_outq_empty(const struct mh_outq *q)
{
    return q->_n == 0;
}

char *mh_outq_reserve_slow(struct mh_outq *q, size_t n);

/*
 * Room for n bytes at the end, written in place (head serializers): returns
 * a pointer, then mh_outq_commit(q, used) with used <= n. NULL on OOM.
 * Inline: every response goes through here several times.
 */
static inline char *mh_outq_reserve(struct mh_outq *q, size_t n)
{
    if (q->_n) {
        const struct mh_chunk *l = &q->_chunks[q->_head + q->_n - 1];
        if (l->kind == MH_CHUNK_MEM && l->u.mem_off + l->len == q->_mem.len &&
            q->_mem.cap - q->_mem.len >= n)
            return q->_mem.data + q->_mem.len;
    } else if (q->_cap && q->_mem.cap >= n) {
        /* An empty queue (its buffer is then empty too) that has been used before. */
        struct mh_chunk *c = &q->_chunks[0];
        c->kind = MH_CHUNK_MEM;
        c->len = 0;
        c->u.mem_off = 0;
        q->_head = 0;
        q->_n = 1;
        return q->_mem.data;
    }
    return mh_outq_reserve_slow(q, n);
}

static inline void mh_outq_commit(struct mh_outq *q, size_t used)
{
    struct mh_chunk *l = &q->_chunks[q->_head + q->_n - 1];
    l->len += used;
    q->_mem.len += used;
    q->bytes += used;
    if (l->len == 0) /* reserved and nothing used: no empty chunk */
        q->_n--;
}

/* Copies n bytes to the end of the queue. */
static inline int mh_outq_append(struct mh_outq *q, const void *p, size_t n)
{
    if (n == 0)
        return 0;
    char *dst = mh_outq_reserve(q, n);
    if (!dst)
        return -1;
    memcpy(dst, p, n);
    mh_outq_commit(q, n);
    return 0;
}

/* Queues n bytes at p without copying; p must stay valid until release is called. */
int mh_outq_append_ref(struct mh_outq *q, const char *p, size_t n, mh_chunk_release_fn release,
                       void *ud, uintptr_t token);
/* Queues len bytes of fd from off; fd must stay open until release is called. */
int mh_outq_append_file(struct mh_outq *q, int fd, off_t off, uint64_t len,
                        mh_chunk_release_fn release, void *ud, uintptr_t token);

/*
 * Moves every chunk of src to the end of dst, in order; src ends empty.
 * Memory chunks are copied (they live in src's buffer), references and file
 * ranges move without copying their bytes. -1 on OOM (both unchanged).
 */
int mh_outq_move(struct mh_outq *dst, struct mh_outq *src);

/*
 * Fills up to max iovecs with the memory and reference chunks at the front,
 * stopping at the first file chunk. Returns the number filled (0 when the
 * queue is empty or starts with a file chunk); *bytes gets their total.
 */
int mh_outq_iov(const struct mh_outq *q, struct iovec *iov, int max, size_t *bytes);

/* If the queue is one memory or reference chunk (a whole small response): its bytes. */
static inline bool mh_outq_single(const struct mh_outq *q, const char **p, size_t *len)
{
    if (q->_n != 1)
        return false;
    const struct mh_chunk *c = &q->_chunks[q->_head];
    if (c->kind == MH_CHUNK_FILE)
        return false;
    *p = c->kind == MH_CHUNK_MEM ? q->_mem.data + c->u.mem_off : c->u.ref;
    *len = (size_t)c->len;
    return true;
}

/* If the front chunk is a file range: true, with its fd, offset and remaining length. */
bool mh_outq_front_file(const struct mh_outq *q, int *fd, off_t *off, uint64_t *len);

/*
 * A file chunk's fd ran dry at `off` with `left` bytes still promised (the
 * file shrank while it was being sent; the caller fails the write with EIO
 * and the connection closes): logs a warning with the file's path and the
 * bytes of it sent, the only trace the operator gets of a cut response.
 */
void mh_outq_file_ran_dry(int fd, off_t off, uint64_t left);

void mh_outq_consume_slow(struct mh_outq *q, uint64_t n);

/* Marks n bytes from the front as written, releasing chunks that are done. */
static inline void mh_outq_consume(struct mh_outq *q, uint64_t n)
{
    if (n >= q->bytes && q->_nrel == 0) { /* all of a memory-only queue: the common write */
        mh_outq_clear(q);
        return;
    }
    mh_outq_consume_slow(q, n);
}

/*
 * Copies up to n bytes from the front into dst, whatever their kind (file
 * ranges are read with pread), and consumes them. For TLS (which encrypts
 * from memory) and for filters. Returns the count (0: empty), or -1 with
 * errno when a file read failed (nothing consumed from that chunk).
 */
ssize_t mh_outq_read_front(struct mh_outq *q, void *dst, size_t n);

/* Visits the chunks in order (unit tests, filters that read every chunk). */
static inline const struct mh_chunk *mh_outq_chunk(const struct mh_outq *q, uint32_t i)
{
    return i < q->_n ? &q->_chunks[q->_head + i] : NULL;
}
static inline uint32_t mh_outq_count(const struct mh_outq *q)
{
    return q->_n;
}
/* The bytes of a memory chunk returned by mh_outq_chunk. */
static inline const char *mh_outq_chunk_mem(const struct mh_outq *q, const struct mh_chunk *c)
{
    return c->kind == MH_CHUNK_MEM ? q->_mem.data + c->u.mem_off : c->u.ref;
}

#endif
