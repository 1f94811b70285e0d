#include "shm_channel.h"

#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

const char mh_shm_chan_err_too_large[] = "too large";
const char mh_shm_chan_err_too_many[] = "too many channels";
const char mh_shm_chan_err_lock[] = "lock lost";
const char mh_shm_chan_err_no_slot[] = "no slot";
const char mh_shm_chan_err_stale[] = "stale";

#define ZONE_MAGIC 0x6d686368616e6e6cULL /* "mhchannl" */

/*
 * A record in the ring: this header, then len bytes, padded to 8. id 0:
 * padding to the end. GAP in len: a gap notice (no bytes).
 */
struct record {
    uint32_t len;
    uint32_t id;
    uint64_t seq;
};
#define HDR ((uint64_t)sizeof(struct record))
#define GAP 0x80000000u

struct slot {
    pid_t pid;           /* 0: free */
    atomic_uint pending; /* its eventfd was written and not read yet */
};

/*
 * An entry: len 0 is unused, and ends a probe chain unless it is `retired`
 * (a name was there: the chain goes on past it). An id is the entry's
 * index + 1 in its low 16 bits and its generation, counted up each time the
 * entry takes a name, in the high 16.
 */
struct chan {
    uint32_t len;
    char name[MH_SHM_CHAN_NAME_MAX];
    uint16_t gen;
    bool retired;
    uint64_t seq;       /* of its last record */
    uint64_t listeners; /* bit i: slot i has a subscriber */
};
_Static_assert(MH_SHM_CHAN_SLOTS <= 64, "a channel's listeners fit one word");
_Static_assert((MH_SHM_CHAN_MAX & (MH_SHM_CHAN_MAX - 1)) == 0, "the table is a power of two");
_Static_assert(MH_SHM_CHAN_MAX < 0xffff, "an entry's index + 1 fits an id's low 16 bits");

/*
 * head and tail are byte offsets that only grow (the ring position is
 * offset % cap): records live in [head, tail). tail is written with one
 * release store, after the record it makes visible.
 */
struct zone {
    uint64_t magic;
    pthread_mutex_t lock;
    uint64_t cap;
    uint64_t head;
    _Atomic uint64_t tail;
    uint64_t recoveries;
    uint64_t listen_version;   /* see mh_shm_chan_listen_version */
    _Atomic uint64_t relays;   /* see mh_shm_chan_relay_started */
    uint32_t nchans;           /* entries holding a name */
    struct slot slots[MH_SHM_CHAN_SLOTS];
    struct chan chans[MH_SHM_CHAN_MAX];
};

struct mh_shm_chan {
    struct zone *z;
    char *ring;
    size_t size;
    int fds[MH_SHM_CHAN_SLOTS];
    void (*hook)(const char *msg, size_t len);
    void (*rearm_hook)(struct mh_shm_chan *c);
};

static size_t align8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

static const char *lock(struct zone *z)
{
    int rc = pthread_mutex_lock(&z->lock);
    if (rc == EOWNERDEAD) {
        /* Every store leaves the zone consistent (see the header): nothing to rebuild. */
        pthread_mutex_consistent(&z->lock);
        z->recoveries++;
        mh_log(MH_LOG_WARN, "channels: a process died holding their lock; going on");
        rc = 0;
    }
    return rc ? mh_shm_chan_err_lock : NULL;
}

static void unlock(struct zone *z)
{
    pthread_mutex_unlock(&z->lock);
}

struct mh_shm_chan *mh_shm_chan_new(size_t ring_bytes)
{
    ring_bytes = align8(ring_bytes);
    if (ring_bytes < MH_SHM_CHAN_MIN_RING) {
        errno = EINVAL;
        return NULL;
    }
    struct mh_shm_chan *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    for (int i = 0; i < MH_SHM_CHAN_SLOTS; i++)
        c->fds[i] = -1;
    size_t zsize = align8(sizeof(struct zone));
    c->size = zsize + ring_bytes;
    void *p = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(c);
        return NULL;
    }
    c->z = p;
    c->ring = (char *)p + zsize;
    c->z->magic = ZONE_MAGIC;
    c->z->cap = ring_bytes;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&c->z->lock, &a);
    pthread_mutexattr_destroy(&a);
    for (int i = 0; !rc && i < MH_SHM_CHAN_SLOTS; i++)
        if ((c->fds[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
            rc = errno;
    if (rc) {
        mh_shm_chan_free(c);
        errno = rc;
        return NULL;
    }
    return c;
}

void mh_shm_chan_free(struct mh_shm_chan *c)
{
    if (!c)
        return;
    for (int i = 0; i < MH_SHM_CHAN_SLOTS; i++)
        if (c->fds[i] >= 0)
            close(c->fds[i]);
    munmap(c->z, c->size);
    free(c);
}

static void drain_fd(int fd)
{
    uint64_t n;
    ssize_t r = read(fd, &n, sizeof n); /* EAGAIN when nothing was written: fine */
    (void)r;
}

/* Under the lock: the entry gives its name up (ids of it become stale). */
static void retire(struct zone *z, struct chan *ch)
{
    ch->len = 0;
    ch->retired = true;
    if (--z->nchans == 0) /* no name left: no chain to keep, so misses stop at once again */
        for (uint32_t k = 0; k < MH_SHM_CHAN_MAX; k++)
            z->chans[k].retired = false;
}

/* Under the lock: clears the listening bits `bits` of ch; the name goes when none is left. */
static void unlisten(struct zone *z, struct chan *ch, uint64_t bits)
{
    if (!ch->len || !(ch->listeners & bits))
        return;
    ch->listeners &= ~bits;
    if (!ch->listeners) {
        z->listen_version++;
        retire(z, ch);
    }
}

/* Under the lock: slot i no longer listens anywhere and has nothing pending. */
static void clear_slot(struct mh_shm_chan *c, int i)
{
    struct zone *z = c->z;
    for (uint32_t k = 0; k < MH_SHM_CHAN_MAX; k++)
        unlisten(z, &z->chans[k], (uint64_t)1 << i);
    atomic_store(&z->slots[i].pending, 0);
    drain_fd(c->fds[i]);
}

int mh_shm_chan_claim(struct mh_shm_chan *c, pid_t pid)
{
    if (lock(c->z))
        return -1;
    int slot = -1;
    for (int i = 0; i < MH_SHM_CHAN_SLOTS && slot < 0; i++)
        if (c->z->slots[i].pid == 0)
            slot = i;
    if (slot >= 0) {
        clear_slot(c, slot);
        c->z->slots[slot].pid = pid;
    }
    unlock(c->z);
    return slot;
}

void mh_shm_chan_release(struct mh_shm_chan *c, int slot)
{
    if (slot < 0 || slot >= MH_SHM_CHAN_SLOTS || lock(c->z))
        return;
    clear_slot(c, slot);
    c->z->slots[slot].pid = 0;
    unlock(c->z);
}

void mh_shm_chan_forget(struct mh_shm_chan *c, pid_t pid)
{
    if (pid <= 0 || lock(c->z))
        return;
    for (int i = 0; i < MH_SHM_CHAN_SLOTS; i++) {
        if (c->z->slots[i].pid == pid) {
            clear_slot(c, i);
            c->z->slots[i].pid = 0;
        }
    }
    unlock(c->z);
}

int mh_shm_chan_fd(const struct mh_shm_chan *c, int slot)
{
    return slot >= 0 && slot < MH_SHM_CHAN_SLOTS ? c->fds[slot] : -1;
}

static uint32_t hash_name(const char *k, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)k[i]) * 16777619u;
    return h ^ (h >> 15);
}

static uint32_t id_of(const struct zone *z, const struct chan *ch)
{
    return (uint32_t)ch->gen << 16 | (uint32_t)(ch - z->chans + 1);
}

/* Under the lock: the entry of name, or NULL; *slot gets the first entry a new name may take. */
static struct chan *find(struct zone *z, const char *name, size_t len, struct chan **slot)
{
    uint32_t mask = MH_SHM_CHAN_MAX - 1, i = hash_name(name, len) & mask;
    *slot = NULL;
    for (uint32_t probes = 0; probes < MH_SHM_CHAN_MAX; probes++, i = (i + 1) & mask) {
        struct chan *ch = &z->chans[i];
        if (ch->len == 0) {
            if (!*slot)
                *slot = ch;
            if (!ch->retired)
                return NULL; /* the chain ends */
        } else if (ch->len == len && !memcmp(ch->name, name, len)) {
            return ch;
        }
    }
    return NULL;
}

/* Under the lock: retires every name nobody listens to (only publishers used them). */
static void sweep(struct zone *z)
{
    for (uint32_t k = 0; k < MH_SHM_CHAN_MAX; k++)
        if (z->chans[k].len && !z->chans[k].listeners)
            retire(z, &z->chans[k]);
}

const char *mh_shm_chan_lookup(struct mh_shm_chan *c, const char *name, size_t len, uint32_t *id,
                               uint64_t *seq)
{
    struct zone *z = c->z;
    if (len == 0 || len > MH_SHM_CHAN_NAME_MAX)
        return mh_shm_chan_err_too_large;
    const char *err = lock(z);
    if (err)
        return err;
    struct chan *slot, *ch = find(z, name, len, &slot);
    if (!ch && z->nchans >= MH_SHM_CHAN_MAX / 2) { /* keep probe chains short */
        sweep(z);
        find(z, name, len, &slot);
    }
    if (!ch && slot && z->nchans < MH_SHM_CHAN_MAX / 2) {
        ch = slot;
        memcpy(ch->name, name, len);
        ch->seq = 0;
        ch->listeners = 0;
        ch->gen++;
        ch->len = (uint32_t)len; /* last: a dying creator leaves no half entry */
        z->nchans++;
    }
    if (ch) {
        *id = id_of(z, ch);
        if (seq)
            *seq = ch->seq;
    }
    unlock(z);
    return ch ? NULL : mh_shm_chan_err_too_many;
}

uint32_t mh_shm_chan_find(struct mh_shm_chan *c, const char *name, size_t len)
{
    struct zone *z = c->z;
    if (len == 0 || len > MH_SHM_CHAN_NAME_MAX || lock(z))
        return 0;
    struct chan *slot, *ch = find(z, name, len, &slot);
    uint32_t id = ch ? id_of(z, ch) : 0;
    unlock(z);
    return id;
}

/* Under the lock: the entry id names, or NULL when its name was retired. */
static struct chan *chan_of(struct zone *z, uint32_t id)
{
    uint32_t i = id & 0xffff;
    struct chan *ch = i >= 1 && i <= MH_SHM_CHAN_MAX ? &z->chans[i - 1] : NULL;
    return ch && ch->len && ch->gen == id >> 16 ? ch : NULL;
}

const char *mh_shm_chan_listen(struct mh_shm_chan *c, int slot, uint32_t id, bool on, uint64_t *seq)
{
    struct zone *z = c->z;
    if (slot < 0 || slot >= MH_SHM_CHAN_SLOTS)
        return mh_shm_chan_err_no_slot;
    const char *err = lock(z);
    if (err)
        return err;
    struct chan *ch = chan_of(z, id);
    uint64_t bit = (uint64_t)1 << slot;
    if (ch && seq)
        *seq = ch->seq;
    if (ch && on) {
        if (!ch->listeners)
            z->listen_version++;
        ch->listeners |= bit;
    } else if (ch) {
        unlisten(z, ch, bit);
    }
    unlock(z);
    return ch || !on ? NULL : mh_shm_chan_err_stale;
}

/* Bytes the thing at ring offset pos takes: a record, or the padding to the ring's end. */
static uint64_t size_at(const struct mh_shm_chan *c, uint64_t pos)
{
    uint64_t cap = c->z->cap, off = pos % cap, rem = cap - off;
    if (rem < HDR)
        return rem;
    const struct record *r = (const struct record *)(c->ring + off);
    return r->id == 0 ? rem : HDR + align8(r->len & ~GAP);
}

/*
 * The order of stores is what makes a killed publisher harmless (see the
 * header): evict by moving head, write past the tail where no reader looks,
 * bump the channel's number, then publish the record with one store of tail.
 */
const char *mh_shm_chan_publish(struct mh_shm_chan *c, uint32_t id, const void *msg, size_t len,
                                unsigned *woken)
{
    struct zone *z = c->z;
    if (woken)
        *woken = 0;
    if (len > MH_SHM_CHAN_MSG_MAX)
        return mh_shm_chan_err_too_large;
    if (!msg)
        len = 0;
    const char *err = lock(z);
    if (err)
        return err;
    struct chan *ch = chan_of(z, id);
    if (!ch) {
        unlock(z);
        return mh_shm_chan_err_stale;
    }
    uint64_t cap = z->cap, tail = atomic_load_explicit(&z->tail, memory_order_relaxed);
    uint64_t need = HDR + align8(len), rem = cap - tail % cap;
    uint64_t pad = rem < need ? rem : 0;
    while (tail + pad + need - z->head > cap)
        z->head += size_at(c, z->head);
    if (pad >= HDR)
        memset(c->ring + tail % cap, 0, HDR); /* id 0: the rest of the ring is padding */
    struct record *r = (struct record *)(c->ring + (tail + pad) % cap);
    r->len = msg ? (uint32_t)len : GAP;
    r->id = id;
    r->seq = ch->seq + 1;
    if (msg)
        memcpy(r + 1, msg, len);
    if (c->hook)
        c->hook(msg, len);
    ch->seq = r->seq;
    atomic_store_explicit(&z->tail, tail + pad + need, memory_order_release);
    uint64_t wake = ch->listeners;
    unlock(z);
    for (int i = 0; wake; i++, wake >>= 1) {
        if (!(wake & 1) || atomic_exchange(&z->slots[i].pending, 1))
            continue;
        uint64_t one = 1;
        if (write(c->fds[i], &one, sizeof one) == sizeof one && woken)
            (*woken)++;
    }
    return NULL;
}

const char *mh_shm_chan_cursor_init(struct mh_shm_chan *c, struct mh_shm_chan_cursor *cur)
{
    const char *err = lock(c->z);
    if (err)
        return err;
    cur->pos = atomic_load(&c->z->tail);
    unlock(c->z);
    return NULL;
}

const char *mh_shm_chan_read(struct mh_shm_chan *c, int slot, struct mh_shm_chan_cursor *cur,
                             mh_shm_chan_fn fn, void *ud, bool *lapped)
{
    struct zone *z = c->z;
    if (lapped)
        *lapped = false;
    /*
     * Re-armed before reading, in this order: drain the eventfd, then clear
     * pending. A publish that finds pending clear writes the eventfd after
     * the drain, so it cannot be lost; one that still finds it set made its
     * record visible before the read below takes the lock. (The other order
     * let a drain swallow a write made between the two steps, leaving
     * pending set with nothing to wake the reader: the slot slept for good.)
     */
    if (slot >= 0 && slot < MH_SHM_CHAN_SLOTS) {
        drain_fd(c->fds[slot]);
        if (c->rearm_hook)
            c->rearm_hook(c);
        atomic_store(&z->slots[slot].pending, 0);
    }
    const char *err = lock(z);
    if (err)
        return err;
    uint64_t tail = atomic_load(&z->tail);
    if (cur->pos < z->head) {
        cur->pos = z->head;
        if (lapped)
            *lapped = true;
    }
    while (cur->pos < tail) {
        uint64_t n = size_at(c, cur->pos), off = cur->pos % z->cap;
        const struct record *r = (const struct record *)(c->ring + off);
        if (z->cap - off >= HDR && r->id != 0)
            fn(ud, r->id, r->seq, r->len & GAP ? NULL : (const char *)(r + 1), r->len & ~GAP);
        cur->pos += n;
    }
    unlock(z);
    return NULL;
}

void mh_shm_chan_usage(struct mh_shm_chan *c, size_t *bytes, size_t *records)
{
    struct zone *z = c->z;
    *bytes = *records = 0;
    if (lock(z))
        return;
    uint64_t tail = atomic_load(&z->tail);
    *bytes = (size_t)(tail - z->head);
    for (uint64_t pos = z->head; pos < tail; pos += size_at(c, pos)) {
        uint64_t off = pos % z->cap;
        if (z->cap - off >= HDR && ((const struct record *)(c->ring + off))->id != 0)
            (*records)++;
    }
    unlock(z);
}

uint64_t mh_shm_chan_listen_version(struct mh_shm_chan *c)
{
    if (lock(c->z))
        return 0;
    uint64_t v = c->z->listen_version;
    unlock(c->z);
    return v;
}

const char *mh_shm_chan_listened(struct mh_shm_chan *c,
                                 void (*fn)(void *ud, const char *name, size_t len), void *ud)
{
    struct zone *z = c->z;
    const char *err = lock(z);
    if (err)
        return err;
    for (uint32_t k = 0; k < MH_SHM_CHAN_MAX; k++)
        if (z->chans[k].len && z->chans[k].listeners)
            fn(ud, z->chans[k].name, z->chans[k].len);
    unlock(z);
    return NULL;
}

uint64_t mh_shm_chan_relay_started(struct mh_shm_chan *c)
{
    return atomic_fetch_add(&c->z->relays, 1);
}

uint64_t mh_shm_chan_recoveries(struct mh_shm_chan *c)
{
    return c->z->recoveries;
}

void mh_shm_chan_set_publish_hook(struct mh_shm_chan *c, void (*hook)(const char *msg, size_t len))
{
    c->hook = hook;
}

void mh_shm_chan_set_rearm_hook(struct mh_shm_chan *c, void (*hook)(struct mh_shm_chan *c))
{
    c->rearm_hook = hook;
}
