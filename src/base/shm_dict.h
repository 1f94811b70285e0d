#ifndef MH_SHM_DICT_H
#define MH_SHM_DICT_H
/*
 * A key/value dictionary in one shared-memory zone, for processes that map
 * the zone before they fork (the master maps one zone per declared dict, and
 * every worker sees the same entries). It knows nothing of Lua or servers.
 *
 * Memory: the zone is exactly the declared size and everything lives inside
 * it (header, hash buckets, block links, a recovery bitmap and the blocks);
 * nothing is malloc'd per entry. An entry is a chain of fixed 64-byte blocks,
 * so any free block serves any entry and there is no fragmentation: a write
 * that needs k blocks evicts expired entries near the least-recently-used end
 * (as OpenResty does, from the tail), then least-recently-used ones, until k
 * blocks are free. Only an entry larger than the whole zone fails
 * with mh_shm_dict_err_no_memory.
 *
 * Everything inside the zone refers to blocks by index, never by pointer,
 * so the structure would stay valid if two processes mapped it at different
 * addresses (after fork they do not, but nothing relies on it).
 *
 * Crashes: operations take a robust process-shared mutex. A process killed
 * while holding it leaves the lock to the next taker with EOWNERDEAD; that
 * taker rebuilds the free list and the LRU list from the hash table before
 * going on (see recover() in shm_dict.c). Updates are ordered so that the
 * hash table is always consistent: a new entry is written completely before
 * one aligned store links it in; an entry is unlinked by one store before its
 * blocks are reused. A killed writer's operation therefore either happened
 * or did not; at worst its blocks are leaked until the rebuild reclaims them.
 *
 * Errors are the static strings below, compared by identity.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MH_SHM_DICT_MIN_SIZE (8 * 1024)
#define MH_SHM_DICT_MAX_KEY  65535

extern const char mh_shm_dict_err_no_memory[];  /* "no memory": one entry cannot fit at all */
extern const char mh_shm_dict_err_exists[];     /* "exists": add on a live key */
extern const char mh_shm_dict_err_not_found[];  /* "not found" */
extern const char mh_shm_dict_err_not_number[]; /* "not a number": incr on a non-number */
extern const char mh_shm_dict_err_lock[];       /* "lock lost": the mutex is unrecoverable */

enum mh_shm_type {
    MH_SHM_NONE = 0, /* no such key (or expired) */
    MH_SHM_STRING,
    MH_SHM_INT,
    MH_SHM_FLOAT,
    MH_SHM_BOOL,
};

/* A value going in or coming out. For strings, str/len point at caller memory. */
struct mh_shm_value {
    enum mh_shm_type type;
    const char *str;
    size_t len;
    int64_t i;     /* MH_SHM_INT; MH_SHM_BOOL: 0 or 1 */
    double d;      /* MH_SHM_FLOAT */
    int32_t owner; /* the process whose exit removes the entry (mh_shm_dict_forget_owner); 0: none */
};

/* How a write treats an existing key. */
enum mh_shm_mode {
    MH_SHM_SET,     /* insert or overwrite */
    MH_SHM_ADD,     /* only if absent (or expired): else mh_shm_dict_err_exists */
    MH_SHM_REPLACE, /* only if present: else mh_shm_dict_err_not_found */
};

/* Milliseconds on a clock every process shares (CLOCK_MONOTONIC by default). */
typedef int64_t (*mh_shm_clock_fn)(void);

/*
 * A process-local handle on a zone. Copies made by fork stay valid: the
 * mapping is inherited at the same address.
 */
struct mh_shm_dict;

/* Maps a new zone of exactly `size` bytes (>= MH_SHM_DICT_MIN_SIZE). NULL with errno. */
struct mh_shm_dict *mh_shm_dict_new(size_t size);
/* Unmaps this process's view; other processes keep theirs. */
void mh_shm_dict_free(struct mh_shm_dict *d);
/* The size the zone was made with. */
size_t mh_shm_dict_size(const struct mh_shm_dict *d);
/* For tests: replaces the clock (NULL: the default). */
void mh_shm_dict_set_clock(struct mh_shm_dict *d, mh_shm_clock_fn now);

/*
 * The value of key, copied out: a string into buf (up to cap bytes; v->len
 * tells the full length, so a caller whose buf was too small calls again
 * with a bigger one). Marks the entry recently used. v->type is MH_SHM_NONE
 * for a missing or expired key. Returns NULL or an error.
 */
const char *mh_shm_dict_get(struct mh_shm_dict *d, const char *key, size_t klen,
                            struct mh_shm_value *v, char *buf, size_t cap);

/*
 * Writes key = v, expiring after ttl_ms (0: never). *forced (may be NULL)
 * tells whether live entries were evicted to make room.
 */
const char *mh_shm_dict_write(struct mh_shm_dict *d, enum mh_shm_mode mode, const char *key,
                              size_t klen, const struct mh_shm_value *v, int64_t ttl_ms,
                              bool *forced);

/*
 * Adds by (an MH_SHM_INT or MH_SHM_FLOAT) to the number at key, into *out.
 * A missing key is created from init (when not NULL) with ttl init_ttl_ms,
 * otherwise mh_shm_dict_err_not_found. Integers stay integers (wrapping as
 * Lua's do); a float on either side gives a float.
 */
const char *mh_shm_dict_incr(struct mh_shm_dict *d, const char *key, size_t klen,
                             const struct mh_shm_value *by, const struct mh_shm_value *init,
                             int64_t init_ttl_ms, struct mh_shm_value *out);

/*
 * A read-modify-write of key under the dict's lock, for a rule that incr
 * cannot state (moonhttp.ratelimit's GCRA). fn gets key's live value (type
 * MH_SHM_NONE when absent or expired; a string's bytes are not passed,
 * only its type and length) and the dict's clock (ms); it returns true to
 * store *out (a string in fn's own memory) with ttl *ttl_ms (0: never), or
 * false to leave key as it is. fn runs with the lock held: it must not call
 * into the dict, and it must not fail (no Lua error may escape it).
 */
typedef bool (*mh_shm_dict_update_fn)(void *ud, const struct mh_shm_value *cur, int64_t now_ms,
                                      struct mh_shm_value *out, int64_t *ttl_ms);
const char *mh_shm_dict_update(struct mh_shm_dict *d, const char *key, size_t klen,
                               mh_shm_dict_update_fn fn, void *ud);

/* Removes key (absent is fine). */
const char *mh_shm_dict_delete(struct mh_shm_dict *d, const char *key, size_t klen);

/* Milliseconds until key expires into *ms (0: never); mh_shm_dict_err_not_found. */
const char *mh_shm_dict_ttl(struct mh_shm_dict *d, const char *key, size_t klen, int64_t *ms);
/* Sets key to expire after ttl_ms (0: never); mh_shm_dict_err_not_found. */
const char *mh_shm_dict_expire(struct mh_shm_dict *d, const char *key, size_t klen, int64_t ttl_ms);

/*
 * Calls fn for each live key, most recently used first, at most max keys
 * (0: all), under the lock: fn must not call into the dict. Returns NULL or
 * an error.
 */
const char *mh_shm_dict_keys(struct mh_shm_dict *d, size_t max,
                             void (*fn)(void *ud, const char *key, size_t klen), void *ud);

/* Removes every entry. */
const char *mh_shm_dict_flush_all(struct mh_shm_dict *d);

/*
 * Removes every entry owned by process `owner` (written with that
 * mh_shm_value.owner and not overwritten since), into *removed (may be
 * NULL). The master calls it when a worker has exited, however it ended: a
 * worker's presence, locks or counts die with it (ZooKeeper's ephemeral
 * nodes). A dead holder of the lock is recovered from as by every taker.
 */
const char *mh_shm_dict_forget_owner(struct mh_shm_dict *d, int32_t owner, size_t *removed);

/* Bytes in free blocks (what new entries can use without evicting). */
size_t mh_shm_dict_free_space(struct mh_shm_dict *d);
/* Live and expired-but-not-yet-evicted entries. */
size_t mh_shm_dict_count(struct mh_shm_dict *d);
/* Blocks an entry with this key and string value length needs, times the block size. */
size_t mh_shm_dict_entry_bytes(size_t klen, size_t vlen);
/* How often a taker found the lock's owner dead and rebuilt the lists. */
uint64_t mh_shm_dict_recoveries(struct mh_shm_dict *d);

/*
 * Checks the whole structure (hash chains, LRU list, free list, counts,
 * every block owned exactly once), under the lock. NULL when consistent,
 * else a description. For tests and fuzzing.
 */
const char *mh_shm_dict_check(struct mh_shm_dict *d);

/*
 * Test hook: when set, called with the key of every write after its new
 * entry is complete and before it is linked in, with the lock held. Specs
 * use it (through an environment variable) to kill a writer at the worst
 * moment. Process-local.
 */
void mh_shm_dict_set_write_hook(struct mh_shm_dict *d, void (*hook)(const char *key, size_t klen));

/* Named dicts of one server: what the master maps and every worker looks names up in. */
#define MH_SHM_DICTS_MAX 16
#define MH_SHM_NAME_MAX  64
struct mh_shm_dicts {
    size_t n;
    struct {
        char name[MH_SHM_NAME_MAX];
        struct mh_shm_dict *dict;
        long asked_size; /* the size the last reload asked for (server/shared_zones.c), or 0 */
    } v[MH_SHM_DICTS_MAX];
};
/* The dict called name, or NULL. */
struct mh_shm_dict *mh_shm_dicts_find(const struct mh_shm_dicts *s, const char *name);

#endif
