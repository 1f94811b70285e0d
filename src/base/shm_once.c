#include "shm_once.h"

#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct slot {
    uint32_t len; /* 0: unused */
    char key[MH_SHM_ONCE_KEY_MAX];
    pid_t holder; /* 0: nobody */
    uint32_t epoch;
    bool done;
};

struct zone {
    pthread_mutex_t lock;
    uint32_t epoch;
    struct slot slots[MH_SHM_ONCE_SLOTS];
    /* Worker deaths: events [claimed, appended) wait, at appended % MH_SHM_ONCE_EXITS. */
    bool exits_wanted; /* some worker's code has the hook: until then, deaths are not kept */
    uint64_t exits_appended, exits_claimed;
    struct mh_worker_exit exits[MH_SHM_ONCE_EXITS];
};

struct mh_shm_once {
    struct zone *z;
};

static int lock(struct zone *z)
{
    int rc = pthread_mutex_lock(&z->lock);
    if (rc == EOWNERDEAD) {
        /* A slot half written is at worst a lease without a holder (see the header). */
        pthread_mutex_consistent(&z->lock);
        rc = 0;
    }
    return rc;
}

static void unlock(struct zone *z)
{
    pthread_mutex_unlock(&z->lock);
}

struct mh_shm_once *mh_shm_once_new(void)
{
    struct mh_shm_once *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    void *p = mmap(NULL, sizeof *o->z, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        free(o);
        return NULL;
    }
    o->z = p;
    o->z->epoch = 1;
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    int rc = pthread_mutex_init(&o->z->lock, &a);
    pthread_mutexattr_destroy(&a);
    if (rc) {
        mh_shm_once_free(o);
        errno = rc;
        return NULL;
    }
    return o;
}

void mh_shm_once_free(struct mh_shm_once *o)
{
    if (!o)
        return;
    munmap(o->z, sizeof *o->z);
    free(o);
}

uint32_t mh_shm_once_epoch(struct mh_shm_once *o)
{
    if (lock(o->z))
        return 0;
    uint32_t e = o->z->epoch;
    unlock(o->z);
    return e;
}

uint32_t mh_shm_once_next_epoch(struct mh_shm_once *o)
{
    if (lock(o->z))
        return 0;
    uint32_t e = ++o->z->epoch;
    unlock(o->z);
    return e;
}

/* Under the lock: key's slot, or a new one when `add` (NULL: none, or the table is full). */
static struct slot *find(struct zone *z, const char *key, size_t len, bool add)
{
    struct slot *free_slot = NULL;
    for (int i = 0; i < MH_SHM_ONCE_SLOTS; i++) {
        struct slot *s = &z->slots[i];
        if (s->len == len && memcmp(s->key, key, len) == 0)
            return s;
        if (!s->len && !free_slot)
            free_slot = s;
    }
    if (!add || !free_slot)
        return NULL;
    memset(free_slot, 0, sizeof *free_slot);
    memcpy(free_slot->key, key, len);
    free_slot->len = (uint32_t)len;
    return free_slot;
}

/* A holder the master has not cleared yet may already be gone (it died a moment ago). */
static bool alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

enum mh_once_claim mh_shm_once_claim(struct mh_shm_once *o, const char *key, size_t len,
                                     uint32_t epoch, pid_t pid)
{
    if (len > MH_SHM_ONCE_KEY_MAX)
        len = MH_SHM_ONCE_KEY_MAX;
    if (!len || lock(o->z))
        return MH_ONCE_FULL;
    enum mh_once_claim r = MH_ONCE_MINE;
    struct slot *s = find(o->z, key, len, true);
    if (!s) {
        r = MH_ONCE_FULL;
    } else if (s->epoch != epoch) { /* a new epoch (or a periodic job's first claim) */
        s->epoch = epoch;
        s->done = false;
        s->holder = pid;
    } else if (s->done) {
        r = MH_ONCE_DONE;
    } else if (s->holder != pid && alive(s->holder)) {
        r = MH_ONCE_BUSY;
    } else {
        s->holder = pid;
    }
    unlock(o->z);
    return r;
}

void mh_shm_once_done(struct mh_shm_once *o, const char *key, size_t len, uint32_t epoch, pid_t pid)
{
    if (len > MH_SHM_ONCE_KEY_MAX)
        len = MH_SHM_ONCE_KEY_MAX;
    if (lock(o->z))
        return;
    struct slot *s = find(o->z, key, len, false);
    if (s && s->epoch == epoch && s->holder == pid)
        s->done = true;
    unlock(o->z);
}

void mh_shm_once_release(struct mh_shm_once *o, const char *key, size_t len, pid_t pid)
{
    if (len > MH_SHM_ONCE_KEY_MAX)
        len = MH_SHM_ONCE_KEY_MAX;
    if (lock(o->z))
        return;
    struct slot *s = find(o->z, key, len, false);
    if (s && s->holder == pid)
        s->holder = 0;
    unlock(o->z);
}

void mh_shm_once_forget(struct mh_shm_once *o, pid_t pid)
{
    if (!o || pid <= 0 || lock(o->z))
        return;
    for (int i = 0; i < MH_SHM_ONCE_SLOTS; i++)
        if (o->z->slots[i].holder == pid)
            o->z->slots[i].holder = 0;
    unlock(o->z);
}

void mh_shm_once_worker_exited(struct mh_shm_once *o, const struct mh_worker_exit *e)
{
    if (!o || lock(o->z))
        return;
    struct zone *z = o->z;
    if (!z->exits_wanted) {
        unlock(z);
        return;
    }
    if (z->exits_appended - z->exits_claimed == MH_SHM_ONCE_EXITS) {
        /* Debug only: an app without the hook never claims, and that is no fault. */
        mh_log(MH_LOG_DEBUG, "http.on_worker_exit: the exit of worker pid %d is dropped unheard",
               (int)z->exits[z->exits_claimed % MH_SHM_ONCE_EXITS].pid);
        z->exits_claimed++;
    }
    z->exits[z->exits_appended++ % MH_SHM_ONCE_EXITS] = *e;
    unlock(z);
}

void mh_shm_once_want_exits(struct mh_shm_once *o)
{
    if (!o || lock(o->z))
        return;
    o->z->exits_wanted = true;
    unlock(o->z);
}

bool mh_shm_once_claim_exit(struct mh_shm_once *o, struct mh_worker_exit *out)
{
    if (!o || lock(o->z))
        return false;
    struct zone *z = o->z;
    bool got = z->exits_claimed < z->exits_appended;
    if (got)
        *out = z->exits[z->exits_claimed++ % MH_SHM_ONCE_EXITS];
    unlock(z);
    return got;
}
