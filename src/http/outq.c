#include "outq.h"

#include "log.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Called once per reference or file chunk leaving the queue (not when moved). */
static void release(struct mh_outq *q, struct mh_chunk *c)
{
    if (c->kind == MH_CHUNK_MEM)
        return;
    q->_nrel--;
    if (c->release) {
        mh_chunk_release_fn fn = c->release;
        c->release = NULL;
        fn(c->release_ud, c->release_token);
    }
}

void mh_outq_clear_slow(struct mh_outq *q)
{
    for (uint32_t i = 0; i < q->_n; i++)
        release(q, &q->_chunks[q->_head + i]);
    q->_head = q->_n = 0;
    q->_mem.len = 0;
    q->bytes = 0;
}

void mh_outq_free(struct mh_outq *q)
{
    mh_outq_clear(q);
    free(q->_chunks);
    mh_buf_free(&q->_mem);
    memset(q, 0, sizeof *q);
}

/* A slot at the end; the array slides back to 0 before it grows. */
static struct mh_chunk *push(struct mh_outq *q)
{
    if (q->_head + q->_n == q->_cap) {
        if (q->_head > 0) {
            memmove(q->_chunks, q->_chunks + q->_head, q->_n * sizeof *q->_chunks);
            q->_head = 0;
        } else {
            uint32_t cap = q->_cap ? q->_cap * 2 : 8;
            struct mh_chunk *v = realloc(q->_chunks, cap * sizeof *v);
            if (!v)
                return NULL;
            q->_chunks = v;
            q->_cap = cap;
        }
    }
    struct mh_chunk *c = &q->_chunks[q->_head + q->_n];
    c->len = 0;
    c->release = NULL;
    return c;
}

static struct mh_chunk *last(struct mh_outq *q)
{
    return q->_n ? &q->_chunks[q->_head + q->_n - 1] : NULL;
}

/*
 * Memory chunks are offsets into one buffer that only empties when the whole
 * queue does; a stream that never drains completely would grow it, so before
 * growing, the bytes already consumed at its front are dropped.
 */
static void compact(struct mh_outq *q)
{
    size_t first = q->_mem.len;
    for (uint32_t i = 0; i < q->_n; i++) {
        const struct mh_chunk *c = &q->_chunks[q->_head + i];
        if (c->kind == MH_CHUNK_MEM) {
            first = c->u.mem_off;
            break;
        }
    }
    if (first == 0)
        return;
    memmove(q->_mem.data, q->_mem.data + first, q->_mem.len - first);
    q->_mem.len -= first;
    for (uint32_t i = 0; i < q->_n; i++) {
        struct mh_chunk *c = &q->_chunks[q->_head + i];
        if (c->kind == MH_CHUNK_MEM)
            c->u.mem_off -= first;
    }
}

char *mh_outq_reserve_slow(struct mh_outq *q, size_t n)
{
    if (q->_mem.cap - q->_mem.len < n && q->_mem.len > 0)
        compact(q);
    if (mh_buf_reserve(&q->_mem, n) < 0)
        return NULL;
    struct mh_chunk *l = last(q);
    /* Appends extend the last memory chunk when it ends where the buffer does. */
    if (!(l && l->kind == MH_CHUNK_MEM && l->u.mem_off + l->len == q->_mem.len)) {
        struct mh_chunk *c = push(q);
        if (!c)
            return NULL;
        c->kind = MH_CHUNK_MEM;
        c->u.mem_off = q->_mem.len;
        q->_n++;
    }
    return q->_mem.data + q->_mem.len;
}

int mh_outq_append_ref(struct mh_outq *q, const char *p, size_t n, mh_chunk_release_fn fn, void *ud,
                       uintptr_t token)
{
    struct mh_chunk *c = push(q);
    if (!c)
        return -1;
    c->kind = MH_CHUNK_REF;
    c->len = n;
    c->u.ref = p;
    c->release = fn;
    c->release_ud = ud;
    c->release_token = token;
    q->_n++;
    q->_nrel++;
    q->bytes += n;
    return 0;
}

int mh_outq_append_file(struct mh_outq *q, int fd, off_t off, uint64_t len, mh_chunk_release_fn fn,
                        void *ud, uintptr_t token)
{
    struct mh_chunk *c = push(q);
    if (!c)
        return -1;
    c->kind = MH_CHUNK_FILE;
    c->len = len;
    c->u.file.fd = fd;
    c->u.file.off = off;
    c->release = fn;
    c->release_ud = ud;
    c->release_token = token;
    q->_n++;
    q->_nrel++;
    q->bytes += len;
    return 0;
}

int mh_outq_move(struct mh_outq *dst, struct mh_outq *src)
{
    if (src->_n == 0)
        return 0;
    if (src->_n == 1 && src->_nrel == 0) { /* one memory chunk: a small body */
        const struct mh_chunk *c = &src->_chunks[src->_head];
        if (mh_outq_append(dst, src->_mem.data + c->u.mem_off, (size_t)c->len) < 0)
            return -1;
        mh_outq_clear(src);
        return 0;
    }
    /* Reserve first so nothing fails halfway: memory bytes, then chunk slots. */
    if (mh_buf_reserve(&dst->_mem, src->_mem.len) < 0)
        return -1;
    if (dst->_head + dst->_n + src->_n > dst->_cap) {
        if (dst->_head) {
            memmove(dst->_chunks, dst->_chunks + dst->_head, dst->_n * sizeof *dst->_chunks);
            dst->_head = 0;
        }
        uint32_t cap = dst->_cap ? dst->_cap : 8;
        while (cap < dst->_n + src->_n)
            cap *= 2;
        if (cap > dst->_cap) {
            struct mh_chunk *v = realloc(dst->_chunks, cap * sizeof *v);
            if (!v)
                return -1;
            dst->_chunks = v;
            dst->_cap = cap;
        }
    }
    for (uint32_t i = 0; i < src->_n; i++) {
        struct mh_chunk *c = &src->_chunks[src->_head + i];
        if (c->kind == MH_CHUNK_MEM) {
            char *p = mh_outq_reserve(dst, (size_t)c->len); /* cannot fail: reserved above */
            memcpy(p, src->_mem.data + c->u.mem_off, (size_t)c->len);
            mh_outq_commit(dst, (size_t)c->len);
        } else {
            dst->_chunks[dst->_head + dst->_n++] = *c;
            dst->bytes += c->len;
            dst->_nrel++;
        }
    }
    src->_nrel = 0;
    src->_head = src->_n = 0;
    src->_mem.len = 0;
    src->bytes = 0;
    return 0;
}

int mh_outq_iov(const struct mh_outq *q, struct iovec *iov, int max, size_t *bytes)
{
    int n = 0;
    size_t total = 0;
    for (uint32_t i = 0; i < q->_n && n < max; i++) {
        const struct mh_chunk *c = &q->_chunks[q->_head + i];
        if (c->kind == MH_CHUNK_FILE)
            break;
        iov[n].iov_base =
            (void *)(c->kind == MH_CHUNK_MEM ? q->_mem.data + c->u.mem_off : c->u.ref);
        iov[n].iov_len = (size_t)c->len;
        total += (size_t)c->len;
        n++;
    }
    *bytes = total;
    return n;
}

bool mh_outq_front_file(const struct mh_outq *q, int *fd, off_t *off, uint64_t *len)
{
    if (q->_n == 0)
        return false;
    const struct mh_chunk *c = &q->_chunks[q->_head];
    if (c->kind != MH_CHUNK_FILE)
        return false;
    *fd = c->u.file.fd;
    *off = c->u.file.off;
    *len = c->len;
    return true;
}

void mh_outq_consume_slow(struct mh_outq *q, uint64_t n)
{
    while (n > 0 && q->_n > 0) {
        struct mh_chunk *c = &q->_chunks[q->_head];
        uint64_t take = n < c->len ? n : c->len;
        c->len -= take;
        q->bytes -= take;
        n -= take;
        switch (c->kind) {
        case MH_CHUNK_MEM:
            c->u.mem_off += (size_t)take;
            break;
        case MH_CHUNK_REF:
            c->u.ref += take;
            break;
        case MH_CHUNK_FILE:
            c->u.file.off += (off_t)take;
            break;
        }
        if (c->len > 0)
            break;
        release(q, c);
        q->_head++;
        q->_n--;
    }
    /* Drop zero-length chunks left at the front (an empty file range). */
    while (q->_n > 0 && q->_chunks[q->_head].len == 0) {
        release(q, &q->_chunks[q->_head]);
        q->_head++;
        q->_n--;
    }
    if (q->_n == 0) {
        q->_head = 0;
        q->_mem.len = 0;
    }
}

ssize_t mh_outq_read_front(struct mh_outq *q, void *dst, size_t n)
{
    size_t done = 0;
    char *out = dst;
    while (done < n && q->_n > 0) {
        struct mh_chunk *c = &q->_chunks[q->_head];
        size_t take = c->len < n - done ? (size_t)c->len : n - done;
        if (c->kind == MH_CHUNK_FILE) {
            ssize_t r = pread(c->u.file.fd, out + done, take, c->u.file.off);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return done ? (ssize_t)done : -1;
            if (r == 0) { /* the file shrank: what was promised cannot be sent */
                mh_outq_file_ran_dry(c->u.file.fd, c->u.file.off, c->len);
                errno = EIO;
                return done ? (ssize_t)done : -1;
            }
            take = (size_t)r;
        } else {
            memcpy(out + done, c->kind == MH_CHUNK_MEM ? q->_mem.data + c->u.mem_off : c->u.ref,
                   take);
        }
        mh_outq_consume(q, take);
        done += take;
    }
    return (ssize_t)done;
}

void mh_outq_file_ran_dry(int fd, off_t off, uint64_t left)
{
    /* The chunk holds an fd, not a name: /proc has it, and this path is rare. */
    char link[40], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    if (n < 0)
        n = snprintf(path, sizeof path, "(fd %d)", fd);
    path[n] = '\0';
    mh_log(MH_LOG_WARN,
           "file %s shrank while being sent: it ended at byte %lld, %llu bytes short; "
           "the response is cut and the connection closed",
           path, (long long)off, (unsigned long long)left);
}
