#include "buf.h"

#include <stdlib.h>

void mh_buf_pool_init(struct mh_buf_pool *p, size_t max_cached)
{
    p->items = NULL;
    p->n = p->cap = 0;
    p->max = max_cached;
}

void mh_buf_pool_destroy(struct mh_buf_pool *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->items[i]);
    free(p->items);
    p->items = NULL;
    p->n = p->cap = 0;
}

void mh_buf_pool_trim(struct mh_buf_pool *p, size_t keep)
{
    while (p->n > keep)
        free(p->items[--p->n]);
}

int mh_buf_acquire(struct mh_buf *b, struct mh_buf_pool *p)
{
    if (b->data)
        return 0;
    if (p->n > 0) {
        b->data = p->items[--p->n];
    } else if (!(b->data = malloc(MH_BUF_CHUNK))) {
        return -1;
    }
    b->cap = MH_BUF_CHUNK;
    b->len = 0;
    return 0;
}

void mh_buf_release(struct mh_buf *b, struct mh_buf_pool *p)
{
    if (!b->data)
        return;
    if (b->cap == MH_BUF_CHUNK && p->n < p->max) {
        if (p->n == p->cap) {
            size_t ncap = p->cap ? p->cap * 2 : 64;
            void **items = realloc(p->items, ncap * sizeof *items);
            if (!items)
                goto drop;
            p->items = items;
            p->cap = ncap;
        }
        p->items[p->n++] = b->data;
        b->data = NULL;
        b->len = b->cap = 0;
        return;
    }
drop:
    mh_buf_free(b);
}

int mh_buf_reserve(struct mh_buf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap - b->len < extra)
        ncap *= 2;
    char *d = realloc(b->data, ncap);
    if (!d)
        return -1;
    b->data = d;
    b->cap = ncap;
    return 0;
}

int mh_buf_append(struct mh_buf *b, const void *p, size_t n)
{
    if (mh_buf_reserve(b, n) < 0)
        return -1;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void mh_buf_consume(struct mh_buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

void mh_buf_free(struct mh_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
