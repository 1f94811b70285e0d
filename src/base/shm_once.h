#ifndef MH_SHM_ONCE_H
#define MH_SHM_ONCE_H
/*
 * Leases for work that runs in one worker of a server rather than in each:
 * http.on_start(fn, { once = true }) and http.every(interval, fn, { once =
 * true }). One shared-memory table, mapped by the process that forks the
 * workers before it forks, maps a job's key (the same in every worker: the
 * place the job's function was written, see lua_timer.c) to the pid that
 * holds it, the epoch it was claimed in and whether it is done.
 *
 * An epoch is one start or one reload of the server: the master moves to
 * the next epoch before it forks a reload's workers, and a worker reads the
 * epoch it belongs to once, as it starts. A run-once job is done for its
 * epoch; a periodic job (epoch 0) is never done, it stays with its holder.
 *
 * A lease ends when its holder gives it back (a stop, a reload in place, a
 * cancelled timer) or dies: the master clears a dead worker's leases
 * (mh_shm_once_forget), and a holder that no longer exists (kill(pid, 0)
 * says so) is taken for gone too, so no job stays with a dead worker.
 *
 * The same zone carries the news of workers that died (http.on_worker_exit):
 * the master appends each to a small ring, and the first worker that claims
 * an event runs the app's hook for it, so each runs in exactly one worker.
 * Deaths are kept only once some worker's code registered a hook (a server
 * without one never fills the ring with news nobody asked for).
 * The ring keeps the last MH_SHM_ONCE_EXITS events; one no worker claimed
 * before MH_SHM_ONCE_EXITS later deaths is dropped.
 *
 * Every operation takes a robust process-shared mutex; each one stores a
 * whole slot's fields before it unlocks, and a slot half written by a
 * process killed inside is at worst a lease with no holder.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MH_SHM_ONCE_SLOTS   256
#define MH_SHM_ONCE_KEY_MAX 120
#define MH_SHM_ONCE_EXITS   32
#define MH_SHM_EXIT_REASON  64

enum mh_once_claim {
    MH_ONCE_MINE, /* the caller holds it (newly or still): run the job */
    MH_ONCE_BUSY, /* another live worker holds it */
    MH_ONCE_DONE, /* a run-once job already ran in this epoch */
    MH_ONCE_FULL, /* no slot left (or the lock was lost): nobody holds it */
};

struct mh_shm_once;

/* A worker that died, as the master saw it. */
struct mh_worker_exit {
    int worker; /* its http.worker_id() */
    pid_t pid;
    char reason[MH_SHM_EXIT_REASON]; /* "killed by signal 9", "exit status 3" */
};

/* Maps the table (epoch 1). NULL with errno. */
struct mh_shm_once *mh_shm_once_new(void);
/* Unmaps this process's view; other processes keep theirs. */
void mh_shm_once_free(struct mh_shm_once *o);

/* The current epoch. */
uint32_t mh_shm_once_epoch(struct mh_shm_once *o);
/* A reload begins: run-once jobs of the next epoch run again. Returns it. */
uint32_t mh_shm_once_next_epoch(struct mh_shm_once *o);

/*
 * Claims key (at most MH_SHM_ONCE_KEY_MAX bytes; longer keys are cut) for
 * pid. epoch 0: a periodic job, held until given back. epoch > 0: a
 * run-once job of that epoch, MH_ONCE_DONE once marked done in it (a lease
 * of an older epoch counts for nothing).
 */
enum mh_once_claim mh_shm_once_claim(struct mh_shm_once *o, const char *key, size_t len,
                                     uint32_t epoch, pid_t pid);
/* pid's run-once job key ran in epoch: nobody runs it again in that epoch. */
void mh_shm_once_done(struct mh_shm_once *o, const char *key, size_t len, uint32_t epoch,
                      pid_t pid);
/* pid gives key back (if it holds it), so another worker's next claim takes it. */
void mh_shm_once_release(struct mh_shm_once *o, const char *key, size_t len, pid_t pid);
/* pid exited, or is stopping: every lease it holds is given back. */
void mh_shm_once_forget(struct mh_shm_once *o, pid_t pid);

/* The master: a worker died and the app's hook (in a surviving worker) should hear of it. */
void mh_shm_once_worker_exited(struct mh_shm_once *o, const struct mh_worker_exit *e);
/* A worker whose code has the hook: from now on the master keeps deaths. */
void mh_shm_once_want_exits(struct mh_shm_once *o);
/* A worker: takes the oldest event nobody claimed into *out. false: none. */
bool mh_shm_once_claim_exit(struct mh_shm_once *o, struct mh_worker_exit *out);

#endif
