#include "shm_dict.h"

#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

const char mh_shm_dict_err_no_memory[] = "no memory";
const char mh_shm_dict_err_exists[] = "exists";
const char mh_shm_dict_err_not_found[] = "not found";
const char mh_shm_dict_err_not_number[] = "not a number";
const char mh_shm_dict_err_lock[] = "lock lost";

#define BLOCK        64
#define ZONE_MAGIC   0x6d68736864696375ULL /* "mhshdicu": entries carry an owner */
#define EVICT_SCAN   32 /* expired entries looked for near the LRU tail before evicting live ones */
#define EXPIRE_SWEEP 2  /* expired entries freed from the LRU tail on each write */

/*
 * The zone: this header, then buckets[nbuckets], links[nblocks + 1],
 * marks[nblocks + 1 bits] and the blocks, all found by offset. Block indices
 * start at 1 so that 0 means "none" everywhere. links[i] chains the blocks
 * of an entry (0 after its last) and, for free blocks, the free list.
 */
struct zone {
    uint64_t magic;
    uint64_t size;
    pthread_mutex_t lock;
    uint32_t nblocks, nbuckets; /* nbuckets: a power of two */
    uint32_t free_head, nfree;
    uint32_t lru_head, lru_tail; /* head: most recently used */
    uint32_t nentries;
    uint64_t recoveries;
    uint64_t buckets_off, links_off, marks_off, blocks_off;
};

/* The head block of an entry: these fields, then the first bytes of key and string value. */
struct entry {
    uint32_t hnext; /* next entry in the bucket */
    uint32_t lprev, lnext;
    uint32_t hash;
    uint32_t klen, vlen;
    uint8_t type;
    int32_t owner;   /* mh_shm_value.owner: a pid, or 0 */
    int64_t expires; /* clock ms; 0: never */
    int64_t num;     /* MH_SHM_INT / MH_SHM_BOOL value, or a double's bits: one aligned store */
};
#define HEAD_DATA (BLOCK - (uint32_t)sizeof(struct entry))
_Static_assert(sizeof(struct entry) <= BLOCK - 8, "entry header leaves room for data");

struct mh_shm_dict {
    struct zone *z;
    size_t size;
    mh_shm_clock_fn now;
    void (*hook)(const char *key, size_t klen);
};

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint32_t *buckets(struct zone *z)
{
    return (uint32_t *)((char *)z + z->buckets_off);
}
static uint32_t *links(struct zone *z)
{
    return (uint32_t *)((char *)z + z->links_off);
}
static uint8_t *marks(struct zone *z)
{
    return (uint8_t *)z + z->marks_off;
}
static char *blk(struct zone *z, uint32_t i)
{
    return (char *)z + z->blocks_off + (size_t)(i - 1) * BLOCK;
}
static struct entry *E(struct zone *z, uint32_t i)
{
    return (struct entry *)blk(z, i);
}

static uint32_t hash_key(const char *k, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a, then a murmur finalizer for the low bits */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)k[i]) * 16777619u;
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    return h ^ (h >> 16);
}

static uint32_t blocks_for(size_t klen, size_t vlen)
{
    size_t data = klen + vlen;
    return data <= HEAD_DATA ? 1 : 1 + (uint32_t)((data - HEAD_DATA + BLOCK - 1) / BLOCK);
}

size_t mh_shm_dict_entry_bytes(size_t klen, size_t vlen)
{
    return (size_t)blocks_for(klen, vlen) * BLOCK;
}

/*
 * Walks the entry's data (key, then string value) from byte `off`, n bytes,
 * copying out (to) or in (from). Data after the head block's share continues
 * in whole blocks along links.
 */
static void data_copy(struct zone *z, uint32_t head, size_t off, char *to, const char *from,
                      size_t n)
{
    uint32_t i = head;
    size_t base = sizeof(struct entry), room = HEAD_DATA;
    while (n) {
        if (off >= room) {
            off -= room;
            i = links(z)[i];
            base = 0;
            room = BLOCK;
            continue;
        }
        size_t k = room - off < n ? room - off : n;
        char *p = blk(z, i) + base + off;
        if (to) {
            memcpy(to, p, k);
            to += k;
        } else {
            memcpy(p, from, k);
            from += k;
        }
        n -= k;
        off += k;
    }
}

static bool key_equals(struct zone *z, uint32_t i, const char *key, size_t klen, uint32_t hash)
{
    struct entry *e = E(z, i);
    if (e->hash != hash || e->klen != klen)
        return false;
    if (klen <= HEAD_DATA) { /* short keys: a loop beats a call to memcmp */
        const char *p = (const char *)e + sizeof *e;
        for (size_t j = 0; j < klen; j++)
            if (p[j] != key[j])
                return false;
        return true;
    }
    char tmp[BLOCK];
    for (size_t off = 0; off < klen; off += BLOCK) {
        size_t k = klen - off < BLOCK ? klen - off : BLOCK;
        data_copy(z, i, off, tmp, NULL, k);
        if (memcmp(tmp, key + off, k))
            return false;
    }
    return true;
}

/* The slot (bucket or predecessor's hnext) that points at key's entry, or NULL. */
static uint32_t *find_slot(struct zone *z, const char *key, size_t klen, uint32_t hash)
{
    uint32_t *slot = &buckets(z)[hash & (z->nbuckets - 1)];
    while (*slot) {
        if (key_equals(z, *slot, key, klen, hash))
            return slot;
        slot = &E(z, *slot)->hnext;
    }
    return NULL;
}

static bool expired(const struct entry *e, int64_t now)
{
    return e->expires && e->expires <= now;
}

/*
 * expired() that reads the clock only for an entry that can expire, and
 * once per operation (*now: 0 until read): the hot get and incr of keys
 * without a TTL then never pay for clock_gettime.
 */
static bool expired_lazy(const struct mh_shm_dict *d, const struct entry *e, int64_t *now)
{
    if (!e->expires)
        return false;
    if (!*now)
        *now = d->now();
    return e->expires <= *now;
}

static void lru_unlink(struct zone *z, uint32_t i)
{
    struct entry *e = E(z, i);
    if (e->lprev)
        E(z, e->lprev)->lnext = e->lnext;
    else
        z->lru_head = e->lnext;
    if (e->lnext)
        E(z, e->lnext)->lprev = e->lprev;
    else
        z->lru_tail = e->lprev;
    e->lprev = e->lnext = 0;
}

static void lru_push(struct zone *z, uint32_t i)
{
    struct entry *e = E(z, i);
    e->lprev = 0;
    e->lnext = z->lru_head;
    if (z->lru_head)
        E(z, z->lru_head)->lprev = i;
    else
        z->lru_tail = i;
    z->lru_head = i;
}

static void lru_touch(struct zone *z, uint32_t i)
{
    if (z->lru_head != i) {
        lru_unlink(z, i);
        lru_push(z, i);
    }
}

static void free_blocks(struct zone *z, uint32_t head, uint32_t n)
{
    uint32_t last = head;
    for (uint32_t k = 1; k < n; k++)
        last = links(z)[last];
    links(z)[last] = z->free_head;
    z->free_head = head;
    z->nfree += n;
}

/* Unlinks the entry at *slot (one store: the hash table stays whole), then frees it. */
static void remove_at(struct zone *z, uint32_t *slot)
{
    uint32_t i = *slot;
    struct entry *e = E(z, i);
    __atomic_store_n(slot, e->hnext, __ATOMIC_RELEASE);
    lru_unlink(z, i);
    z->nentries--;
    free_blocks(z, i, blocks_for(e->klen, e->vlen));
}

static uint32_t *slot_of(struct zone *z, uint32_t i)
{
    struct entry *e = E(z, i);
    uint32_t *slot = &buckets(z)[e->hash & (z->nbuckets - 1)];
    while (*slot && *slot != i)
        slot = &E(z, *slot)->hnext;
    return *slot ? slot : NULL;
}

static void evict(struct zone *z, uint32_t i)
{
    remove_at(z, slot_of(z, i));
}

/* Frees up to `max` expired entries near the LRU tail, never `pin`. Returns how many. */
static int sweep_expired(struct zone *z, int64_t now, int scan, int max, uint32_t pin)
{
    int freed = 0;
    uint32_t i = z->lru_tail;
    while (i && scan-- > 0 && freed < max) {
        uint32_t prev = E(z, i)->lprev;
        if (i != pin && expired(E(z, i), now)) {
            evict(z, i);
            freed++;
        }
        i = prev;
    }
    return freed;
}

/*
 * Takes n blocks off the free list, chained, the last linked to 0: expired
 * entries go first, then the least recently used ones (but never `pin`, the
 * entry a write replaces). 0 when n blocks cannot exist at all.
 */
static uint32_t alloc_blocks(struct zone *z, uint32_t n, int64_t now, uint32_t pin, bool *forced)
{
    if (n > z->nblocks)
        return 0;
    sweep_expired(z, now, EXPIRE_SWEEP, EXPIRE_SWEEP, pin);
    if (z->nfree < n)
        while (z->nfree < n && sweep_expired(z, now, EVICT_SCAN, 1, pin))
            ;
    while (z->nfree < n) {
        uint32_t victim = z->lru_tail;
        if (victim == pin)
            victim = E(z, victim)->lprev;
        if (!expired(E(z, victim), now))
            *forced = true;
        evict(z, victim);
    }
    uint32_t head = z->free_head, last = head;
    for (uint32_t k = 1; k < n; k++)
        last = links(z)[last];
    z->free_head = links(z)[last];
    links(z)[last] = 0;
    z->nfree -= n;
    return head;
}

/* ---- locking and recovery ------------------------------------------------- */

static void mark(struct zone *z, uint32_t i)
{
    marks(z)[i >> 3] |= (uint8_t)(1u << (i & 7));
}
static bool marked(struct zone *z, uint32_t i)
{
    return marks(z)[i >> 3] >> (i & 7) & 1;
}

/* Checks entry i's header and block chain without changing anything. */
static bool entry_valid(struct zone *z, uint32_t i, uint32_t bucket)
{
    if (i < 1 || i > z->nblocks || marked(z, i))
        return false;
    struct entry *e = E(z, i);
    if ((e->hash & (z->nbuckets - 1)) != bucket || e->klen < 1 || e->klen > MH_SHM_DICT_MAX_KEY ||
        e->type < MH_SHM_STRING || e->type > MH_SHM_BOOL || e->vlen > (size_t)z->nblocks * BLOCK)
        return false;
    uint32_t n = blocks_for(e->klen, e->vlen), b = i;
    if (n > z->nblocks)
        return false;
    for (uint32_t k = 1; k < n; k++) {
        b = links(z)[b];
        if (b < 1 || b > z->nblocks || marked(z, b))
            return false;
    }
    return links(z)[b] == 0;
}

static void mark_entry(struct zone *z, uint32_t i)
{
    uint32_t n = blocks_for(E(z, i)->klen, E(z, i)->vlen);
    for (uint32_t k = 0; k < n; k++, i = links(z)[i])
        mark(z, i);
}

/*
 * The previous owner died holding the lock, somewhere inside an operation.
 * The hash chains are consistent by construction (see the header); the LRU
 * list, free list and counters may be half-updated. Rebuild them from the
 * hash table: every entry reachable from a bucket is kept (its recency order
 * is lost), every other block is free. A chain that is not sound is cut
 * there, as a last defence; the ordering of writes means it does not happen.
 */
static void recover(struct zone *z)
{
    memset(marks(z), 0, (z->nblocks >> 3) + 1);
    z->lru_head = z->lru_tail = 0;
    z->nentries = 0;
    for (uint32_t b = 0; b < z->nbuckets; b++) {
        uint32_t *slot = &buckets(z)[b];
        while (*slot) {
            if (!entry_valid(z, *slot, b)) {
                *slot = 0;
                break;
            }
            mark_entry(z, *slot);
            lru_push(z, *slot);
            z->nentries++;
            slot = &E(z, *slot)->hnext;
        }
    }
    z->free_head = 0;
    z->nfree = 0;
    for (uint32_t i = z->nblocks; i >= 1; i--) {
        if (!marked(z, i)) {
            links(z)[i] = z->free_head;
            z->free_head = i;
            z->nfree++;
        }
    }
    z->recoveries++;
}

static const char *lock(struct zone *z)
{
    int rc = pthread_mutex_lock(&z->lock);
    if (rc == EOWNERDEAD) {
        recover(z);
        pthread_mutex_consistent(&z->lock);
        mh_log(MH_LOG_WARN,
               "shared dict: a process died holding its lock; free and LRU lists rebuilt, %u "
               "entries kept",
               z->nentries);
        rc = 0;
    }
    return rc ? mh_shm_dict_err_lock : NULL;
}

static void unlock(struct zone *z)
{
    pthread_mutex_unlock(&z->lock);
}

/* ---- the zone ------------------------------------------------------------- */

static void reset(struct zone *z)
{
    memset(buckets(z), 0, (size_t)z->nbuckets * sizeof(uint32_t));
    z->free_head = 0;
    for (uint32_t i = z->nblocks; i >= 1; i--) {
        links(z)[i] = z->free_head;
        z->free_head = i;
    }
    z->nfree = z->nblocks;
    z->lru_head = z->lru_tail = 0;
    z->nentries = 0;
}

static size_t align(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

/* Lays out n blocks in a zone of `size` bytes; false if they do not fit. */
static bool layout(struct zone *z, size_t size, uint32_t n)
{
    uint32_t nb = 1;
    while (nb < n / 2)
        nb <<= 1;
    size_t off = align(sizeof *z, 64);
    z->buckets_off = off;
    off = align(off + (size_t)nb * 4, 8);
    z->links_off = off;
    off = align(off + ((size_t)n + 1) * 4, 8);
    z->marks_off = off;
    off = align(off + (n >> 3) + 1, BLOCK);
    z->blocks_off = off;
    z->nblocks = n;
    z->nbuckets = nb;
    return off + (size_t)n * BLOCK <= size;
}

struct mh_shm_dict *mh_shm_dict_new(size_t size)
{
    if (size < MH_SHM_DICT_MIN_SIZE || size / BLOCK > UINT32_MAX / 2) {
        errno = EINVAL;
        return NULL;
    }
    struct mh_shm_dict *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(d);
        return NULL;
    }
    struct zone *z = p;
    uint32_t n = (uint32_t)((size - align(sizeof *z, 64)) / (BLOCK + 4 + 2 + 1));
    while (!layout(z, size, n))
        n--;
    z->magic = ZONE_MAGIC;
    z->size = size;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&z->lock, &a);
    pthread_mutexattr_destroy(&a);
    if (rc) {
        munmap(p, size);
        free(d);
        errno = rc;
        return NULL;
    }
    reset(z);
    d->z = z;
    d->size = size;
    d->now = monotonic_ms;
    return d;
}

void mh_shm_dict_free(struct mh_shm_dict *d)
{
    if (!d)
        return;
    munmap(d->z, d->size);
    free(d);
}

size_t mh_shm_dict_size(const struct mh_shm_dict *d)
{
    return d->size;
}

void mh_shm_dict_set_clock(struct mh_shm_dict *d, mh_shm_clock_fn now)
{
    d->now = now ? now : monotonic_ms;
}

void mh_shm_dict_set_write_hook(struct mh_shm_dict *d, void (*hook)(const char *key, size_t klen))
{
    d->hook = hook;
}

/* ---- operations ----------------------------------------------------------- */

static void read_value(struct zone *z, uint32_t i, struct mh_shm_value *v, char *buf, size_t cap)
{
    struct entry *e = E(z, i);
    v->type = (enum mh_shm_type)e->type;
    v->len = e->vlen;
    v->str = buf;
    v->i = e->num;
    v->owner = e->owner;
    memcpy(&v->d, &e->num, sizeof v->d);
    if (e->type == MH_SHM_STRING && buf)
        data_copy(z, i, e->klen, buf, NULL, e->vlen < cap ? e->vlen : cap);
}

const char *mh_shm_dict_get(struct mh_shm_dict *d, const char *key, size_t klen,
                            struct mh_shm_value *v, char *buf, size_t cap)
{
    struct zone *z = d->z;
    uint32_t hash = hash_key(key, klen);
    int64_t now = 0;
    const char *err = lock(z);
    if (err)
        return err;
    uint32_t *slot = find_slot(z, key, klen, hash);
    if (!slot || expired_lazy(d, E(z, *slot), &now)) {
        v->type = MH_SHM_NONE;
    } else {
        read_value(z, *slot, v, buf, cap);
        lru_touch(z, *slot);
    }
    unlock(z);
    return NULL;
}

static int64_t num_bits(const struct mh_shm_value *v)
{
    if (v->type != MH_SHM_FLOAT)
        return v->type == MH_SHM_BOOL ? (v->i != 0) : v->i;
    int64_t bits;
    memcpy(&bits, &v->d, sizeof bits);
    return bits;
}

/*
 * The one writer, with the lock held. A new entry is always built in fresh
 * blocks and then linked in with a single store in place of the old one (if
 * any), so a writer killed at any point leaves either the old entry or the
 * new one reachable.
 */
static const char *write_locked(struct mh_shm_dict *d, enum mh_shm_mode mode, const char *key,
                                size_t klen, uint32_t hash, const struct mh_shm_value *v,
                                int64_t expires, int64_t now, bool *forced)
{
    struct zone *z = d->z;
    uint32_t *slot = find_slot(z, key, klen, hash);
    bool live = slot && !expired(E(z, *slot), now);
    if (mode == MH_SHM_ADD && live)
        return mh_shm_dict_err_exists;
    if (mode == MH_SHM_REPLACE && !live)
        return mh_shm_dict_err_not_found;
    size_t vlen = v->type == MH_SHM_STRING ? v->len : 0;
    uint32_t old = slot ? *slot : 0;
    uint32_t n = blocks_for(klen, vlen);
    if (old && n + blocks_for(E(z, old)->klen, E(z, old)->vlen) > z->nblocks) {
        /* Old and new cannot both exist: the key is absent for a moment. */
        remove_at(z, slot);
        old = 0;
    }
    uint32_t i = alloc_blocks(z, n, now, old, forced);
    if (!i)
        return mh_shm_dict_err_no_memory;
    struct entry *e = E(z, i);
    e->lprev = e->lnext = 0;
    e->hash = hash;
    e->klen = (uint32_t)klen;
    e->vlen = (uint32_t)vlen;
    e->type = (uint8_t)v->type;
    e->owner = v->owner;
    e->expires = expires;
    e->num = num_bits(v);
    data_copy(z, i, 0, NULL, key, klen);
    if (vlen)
        data_copy(z, i, klen, NULL, v->str, vlen);
    if (d->hook)
        d->hook(key, klen);
    /* Eviction may have moved old's predecessor: find its slot again. */
    slot = old ? slot_of(z, old) : &buckets(z)[hash & (z->nbuckets - 1)];
    e->hnext = old ? E(z, old)->hnext : *slot;
    __atomic_store_n(slot, i, __ATOMIC_RELEASE);
    lru_push(z, i);
    if (old) {
        lru_unlink(z, old);
        free_blocks(z, old, blocks_for(E(z, old)->klen, E(z, old)->vlen));
    } else {
        z->nentries++;
    }
    return NULL;
}

static int64_t expiry(int64_t now, int64_t ttl_ms)
{
    return ttl_ms > 0 ? now + ttl_ms : 0;
}

const char *mh_shm_dict_write(struct mh_shm_dict *d, enum mh_shm_mode mode, const char *key,
                              size_t klen, const struct mh_shm_value *v, int64_t ttl_ms,
                              bool *forced)
{
    bool f = false;
    struct zone *z = d->z;
    uint32_t hash = hash_key(key, klen);
    int64_t now = d->now();
    const char *err = lock(z);
    if (err)
        return err;
    err = write_locked(d, mode, key, klen, hash, v, expiry(now, ttl_ms), now, &f);
    unlock(z);
    if (forced)
        *forced = f;
    return err;
}

static void add_numbers(const struct mh_shm_value *a, const struct mh_shm_value *b,
                        struct mh_shm_value *out)
{
    memset(out, 0, sizeof *out);
    if (a->type == MH_SHM_INT && b->type == MH_SHM_INT) {
        out->type = MH_SHM_INT;
        out->i = (int64_t)((uint64_t)a->i + (uint64_t)b->i); /* wraps, as Lua integers */
    } else {
        out->type = MH_SHM_FLOAT;
        out->d = (a->type == MH_SHM_INT ? (double)a->i : a->d) +
                 (b->type == MH_SHM_INT ? (double)b->i : b->d);
    }
}

const char *mh_shm_dict_incr(struct mh_shm_dict *d, const char *key, size_t klen,
                             const struct mh_shm_value *by, const struct mh_shm_value *init,
                             int64_t init_ttl_ms, struct mh_shm_value *out)
{
    struct zone *z = d->z;
    uint32_t hash = hash_key(key, klen);
    int64_t now = 0;
    const char *err = lock(z);
    if (err)
        return err;
    uint32_t *slot = find_slot(z, key, klen, hash);
    bool forced = false;
    if (!slot || expired_lazy(d, E(z, *slot), &now)) {
        now = now ? now : d->now();
        if (!init) {
            err = mh_shm_dict_err_not_found;
        } else {
            add_numbers(init, by, out);
            err = write_locked(d, MH_SHM_SET, key, klen, hash, out, expiry(now, init_ttl_ms), now,
                               &forced);
        }
    } else {
        struct entry *e = E(z, *slot);
        struct mh_shm_value cur;
        read_value(z, *slot, &cur, NULL, 0);
        if (e->type != MH_SHM_INT && e->type != MH_SHM_FLOAT) {
            err = mh_shm_dict_err_not_number;
        } else {
            add_numbers(&cur, by, out);
            out->owner = e->owner; /* a count stays its owner's */
            if (out->type == e->type) {
                __atomic_store_n(&e->num, num_bits(out), __ATOMIC_RELEASE);
                lru_touch(z, *slot);
            } else { /* integer to float: a new entry, so type and bits change together */
                now = now ? now : d->now();
                err = write_locked(d, MH_SHM_SET, key, klen, hash, out, e->expires, now, &forced);
            }
        }
    }
    unlock(z);
    return err;
}

const char *mh_shm_dict_update(struct mh_shm_dict *d, const char *key, size_t klen,
                               mh_shm_dict_update_fn fn, void *ud)
{
    struct zone *z = d->z;
    uint32_t hash = hash_key(key, klen);
    const char *err = lock(z);
    if (err)
        return err;
    int64_t now = d->now();
    uint32_t *slot = find_slot(z, key, klen, hash);
    struct mh_shm_value cur = {.type = MH_SHM_NONE}, out = {.type = MH_SHM_NONE};
    if (slot && !expired(E(z, *slot), now))
        read_value(z, *slot, &cur, NULL, 0);
    int64_t ttl = 0;
    bool forced = false;
    if (fn(ud, &cur, now, &out, &ttl))
        err = write_locked(d, MH_SHM_SET, key, klen, hash, &out, expiry(now, ttl), now, &forced);
    unlock(z);
    return err;
}

const char *mh_shm_dict_delete(struct mh_shm_dict *d, const char *key, size_t klen)
{
    struct zone *z = d->z;
    uint32_t hash = hash_key(key, klen);
    const char *err = lock(z);
    if (err)
        return err;
    uint32_t *slot = find_slot(z, key, klen, hash);
    if (slot)
        remove_at(z, slot);
    unlock(z);
    return NULL;
}

/* Takes the lock and finds key's live entry (*slot NULL: absent or expired). Unlock after. */
static const char *lock_find(struct mh_shm_dict *d, const char *key, size_t klen, int64_t now,
                             uint32_t **slot)
{
    uint32_t hash = hash_key(key, klen);
    const char *err = lock(d->z);
    if (err)
        return err;
    *slot = find_slot(d->z, key, klen, hash);
    if (*slot && expired(E(d->z, **slot), now))
        *slot = NULL;
    return NULL;
}

const char *mh_shm_dict_ttl(struct mh_shm_dict *d, const char *key, size_t klen, int64_t *ms)
{
    int64_t now = d->now();
    uint32_t *slot;
    const char *err = lock_find(d, key, klen, now, &slot);
    if (err)
        return err;
    if (!slot)
        err = mh_shm_dict_err_not_found;
    else
        *ms = E(d->z, *slot)->expires ? E(d->z, *slot)->expires - now : 0;
    unlock(d->z);
    return err;
}

const char *mh_shm_dict_expire(struct mh_shm_dict *d, const char *key, size_t klen, int64_t ttl_ms)
{
    int64_t now = d->now();
    uint32_t *slot;
    const char *err = lock_find(d, key, klen, now, &slot);
    if (err)
        return err;
    if (!slot)
        err = mh_shm_dict_err_not_found;
    else
        __atomic_store_n(&E(d->z, *slot)->expires, expiry(now, ttl_ms), __ATOMIC_RELEASE);
    unlock(d->z);
    return err;
}

const char *mh_shm_dict_keys(struct mh_shm_dict *d, size_t max,
                             void (*fn)(void *ud, const char *key, size_t klen), void *ud)
{
    struct zone *z = d->z;
    int64_t now = d->now();
    const char *err = lock(z);
    if (err)
        return err;
    char small[BLOCK];
    size_t n = 0;
    for (uint32_t i = z->lru_head; i && (max == 0 || n < max); i = E(z, i)->lnext) {
        struct entry *e = E(z, i);
        if (expired(e, now))
            continue;
        if (e->klen <= HEAD_DATA) {
            fn(ud, (char *)e + sizeof *e, e->klen);
        } else {
            char *k = e->klen <= sizeof small ? small : malloc(e->klen);
            if (k) {
                data_copy(z, i, 0, k, NULL, e->klen);
                fn(ud, k, e->klen);
                if (k != small)
                    free(k);
            }
        }
        n++;
    }
    unlock(z);
    return NULL;
}

const char *mh_shm_dict_forget_owner(struct mh_shm_dict *d, int32_t owner, size_t *removed)
{
    struct zone *z = d->z;
    size_t n = 0;
    const char *err = owner ? lock(z) : NULL;
    if (err || !owner) {
        if (removed)
            *removed = 0;
        return err;
    }
    for (uint32_t b = 0; b < z->nbuckets; b++) {
        uint32_t *slot = &buckets(z)[b];
        while (*slot) {
            if (E(z, *slot)->owner == owner) {
                remove_at(z, slot); /* *slot is the next entry now */
                n++;
            } else {
                slot = &E(z, *slot)->hnext;
            }
        }
    }
    unlock(z);
    if (removed)
        *removed = n;
    return NULL;
}

const char *mh_shm_dict_flush_all(struct mh_shm_dict *d)
{
    const char *err = lock(d->z);
    if (err)
        return err;
    reset(d->z);
    unlock(d->z);
    return NULL;
}

size_t mh_shm_dict_free_space(struct mh_shm_dict *d)
{
    return (size_t)__atomic_load_n(&d->z->nfree, __ATOMIC_RELAXED) * BLOCK;
}

size_t mh_shm_dict_count(struct mh_shm_dict *d)
{
    return __atomic_load_n(&d->z->nentries, __ATOMIC_RELAXED);
}

uint64_t mh_shm_dict_recoveries(struct mh_shm_dict *d)
{
    return __atomic_load_n(&d->z->recoveries, __ATOMIC_RELAXED);
}

static const char *check_locked(struct zone *z)
{
    memset(marks(z), 0, (z->nblocks >> 3) + 1);
    uint32_t entries = 0, used = 0;
    for (uint32_t b = 0; b < z->nbuckets; b++) {
        for (uint32_t i = buckets(z)[b]; i; i = E(z, i)->hnext) {
            if (!entry_valid(z, i, b))
                return "a hash chain holds an unsound entry";
            mark_entry(z, i);
            entries++;
            used += blocks_for(E(z, i)->klen, E(z, i)->vlen);
        }
    }
    if (entries != z->nentries)
        return "entry count differs from the hash table";
    uint32_t nfree = 0;
    for (uint32_t i = z->free_head; i; i = links(z)[i]) {
        if (i > z->nblocks || marked(z, i))
            return "the free list holds a used or bad block";
        mark(z, i);
        if (++nfree > z->nblocks)
            return "the free list loops";
    }
    if (nfree != z->nfree || used + nfree != z->nblocks)
        return "blocks are leaked or counted twice";
    uint32_t n = 0, prev = 0;
    for (uint32_t i = z->lru_head; i; prev = i, i = E(z, i)->lnext) {
        if (E(z, i)->lprev != prev)
            return "LRU back link is wrong";
        if (++n > entries)
            return "the LRU list is longer than the hash table";
        uint32_t *slot = slot_of(z, i);
        if (!slot)
            return "an LRU entry is not in the hash table";
    }
    if (n != entries || z->lru_tail != prev)
        return "the LRU list misses entries";
    return NULL;
}

const char *mh_shm_dict_check(struct mh_shm_dict *d)
{
    const char *err = lock(d->z);
    if (err)
        return err;
    err = check_locked(d->z);
    unlock(d->z);
    return err;
}

struct mh_shm_dict *mh_shm_dicts_find(const struct mh_shm_dicts *s, const char *name)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (strcmp(s->v[i].name, name) == 0)
            return s->v[i].dict;
    return NULL;
}
