#include "file_cache.h"

#include "file_open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct mh_file_cache {
    struct mh_file_entry **buckets;
    size_t nbuckets; /* a power of two */
    size_t max, n;
    double ttl;
    struct mh_file_entry *lru_head, *lru_tail; /* head: most recently used */
    struct mh_file_cache_stats stats;
};

struct mh_file_cache *mh_file_cache_new(size_t max_entries, double ttl)
{
    struct mh_file_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->nbuckets = 16;
    while (c->nbuckets < max_entries * 2)
        c->nbuckets *= 2;
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return NULL;
    }
    c->max = max_entries;
    c->ttl = ttl;
    return c;
}

static unsigned long hash_key(int rootfd, const char *s, size_t n)
{
    unsigned long h = 14695981039346656037UL ^ (unsigned long)rootfd;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211UL;
    return h;
}

static void destroy(struct mh_file_entry *e)
{
    if (e->fd >= 0)
        close(e->fd);
    free(e);
}

static void lru_unlink(struct mh_file_cache *c, struct mh_file_entry *e)
{
    if (e->_lprev)
        e->_lprev->_lnext = e->_lnext;
    else
        c->lru_head = e->_lnext;
    if (e->_lnext)
        e->_lnext->_lprev = e->_lprev;
    else
        c->lru_tail = e->_lprev;
    e->_lprev = e->_lnext = NULL;
}

static void lru_push_front(struct mh_file_cache *c, struct mh_file_entry *e)
{
    e->_lprev = NULL;
    e->_lnext = c->lru_head;
    if (c->lru_head)
        c->lru_head->_lprev = e;
    c->lru_head = e;
    if (!c->lru_tail)
        c->lru_tail = e;
}

/* Takes e out of the table; frees it now unless a response still holds it. */
static void unlink_entry(struct mh_file_cache *c, struct mh_file_entry *e)
{
    struct mh_file_entry **pp = &c->buckets[e->_hash & (c->nbuckets - 1)];
    while (*pp != e)
        pp = &(*pp)->_hnext;
    *pp = e->_hnext;
    lru_unlink(c, e);
    e->_linked = false;
    c->n--;
    if (!e->_refs)
        destroy(e);
}

static struct mh_file_entry *open_entry(int rootfd, const char *rel, size_t len)
{
    struct mh_file_entry *e = calloc(1, sizeof *e + len + 1);
    if (!e)
        return NULL;
    memcpy(e->_key, rel, len);
    e->_key[len] = '\0';
    e->_klen = len;
    e->_rootfd = rootfd;
    e->fd = -1;
    /* O_NONBLOCK: opening a FIFO someone left in the root must not block the worker. */
    int fd = mh_file_open_beneath(rootfd, e->_key, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        e->err = fd;
        return e;
    }
    if (fstat(fd, &st) < 0) {
        e->err = -errno;
        close(fd);
        return e;
    }
    if (S_ISDIR(st.st_mode)) {
        e->is_dir = true;
        close(fd);
    } else if (S_ISREG(st.st_mode)) {
        e->fd = fd;
    } else {
        e->err = -ENOENT; /* devices, FIFOs, sockets are not files to serve */
        close(fd);
        return e;
    }
    e->size = (uint64_t)st.st_size;
    e->mtime = st.st_mtim.tv_sec;
    e->etag_len = (uint8_t)mh_etag_format(e->etag, e->size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    mh_http_date_format(e->last_modified, st.st_mtim.tv_sec);
    return e;
}

struct mh_file_entry *mh_file_cache_get(struct mh_file_cache *c, int rootfd, const char *rel,
                                        size_t len, double now)
{
    unsigned long h = hash_key(rootfd, rel, len);
    struct mh_file_entry *e = c->buckets[h & (c->nbuckets - 1)];
    for (; e; e = e->_hnext)
        if (e->_hash == h && e->_rootfd == rootfd && e->_klen == len &&
            memcmp(e->_key, rel, len) == 0)
            break;
    if (e && now < e->_expires) {
        c->stats.hits++;
        if (c->lru_head != e) {
            lru_unlink(c, e);
            lru_push_front(c, e);
        }
        e->_refs++;
        return e;
    }
    if (e)
        unlink_entry(c, e);
    c->stats.misses++;
    e = open_entry(rootfd, rel, len);
    if (!e)
        return NULL;
    e->_hash = h;
    e->_refs = 1;
    if (c->max == 0)
        return e;
    if (c->n >= c->max) {
        struct mh_file_entry *victim = c->lru_tail;
        while (victim && victim->_refs)
            victim = victim->_lprev;
        if (!victim)
            return e; /* every entry is in use: serve this one uncached */
        unlink_entry(c, victim);
        c->stats.evictions++;
    }
    e->_expires = now + c->ttl;
    e->_linked = true;
    struct mh_file_entry **b = &c->buckets[h & (c->nbuckets - 1)];
    e->_hnext = *b;
    *b = e;
    lru_push_front(c, e);
    c->n++;
    return e;
}

void mh_file_cache_release(struct mh_file_cache *c, struct mh_file_entry *e)
{
    (void)c;
    if (--e->_refs == 0 && !e->_linked)
        destroy(e);
}

void mh_file_cache_retain(struct mh_file_entry *e)
{
    e->_refs++;
}

void mh_file_cache_clear(struct mh_file_cache *c)
{
    struct mh_file_entry *e = c->lru_head;
    while (e) {
        struct mh_file_entry *next = e->_lnext;
        unlink_entry(c, e);
        e = next;
    }
}

void mh_file_cache_free(struct mh_file_cache *c)
{
    if (!c)
        return;
    mh_file_cache_clear(c);
    free(c->buckets);
    free(c);
}

void mh_file_cache_stats(const struct mh_file_cache *c, struct mh_file_cache_stats *out)
{
    *out = c->stats;
    out->entries = c->n;
}
