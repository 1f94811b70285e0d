#ifndef MH_SHM_CHANNEL_H
#define MH_SHM_CHANNEL_H
/*
 * The shared half of channels across worker processes: one shared-memory
 * zone, mapped by the process that forks the workers before it forks, that
 * holds a log of recent messages (a byte ring), a table of channel names and
 * a table of worker slots, plus one eventfd per slot (made before the fork,
 * so every process holds every slot's eventfd). It knows nothing of Lua or
 * of an event loop: channel.h is the per-process half.
 *
 * Publishing appends a record (channel id, the channel's sequence number,
 * the bytes) at the ring's tail, evicting the oldest records when the ring
 * is full, so a publisher never waits for a reader; then it writes the
 * eventfd of each slot that has a subscriber of that channel, once until
 * that slot reads (a pending flag per slot coalesces wake-ups). Every slot
 * reads the ring from its own cursor; a reader that was lapped (its cursor
 * fell behind the oldest record) skips to the oldest record, and the gap in
 * each channel's sequence numbers tells its subscribers how many messages
 * they missed.
 *
 * Crashes: every operation takes a robust process-shared mutex. Updates are
 * ordered so the zone is consistent after any store: a publish evicts
 * records one store of `head` at a time, writes its record past the tail
 * (invisible), bumps the channel's sequence number, and makes the record
 * visible by one store of `tail`. A process killed anywhere inside leaves
 * the lock to the next taker (EOWNERDEAD), which marks it consistent and
 * goes on; at worst a channel's sequence number was bumped without a record,
 * which its subscribers see as one missed message. The master clears a dead
 * worker's slot (mh_shm_chan_forget), so nobody keeps waking it.
 *
 * Names: a table of MH_SHM_CHAN_MAX entries, kept at most half full so
 * probe chains stay short. A name holds its entry while some slot listens
 * to it; one nobody listens to any more is retired (its entry may serve
 * another name), and the names only publishers use are retired when the
 * table needs their room. So the bound is on names listened to at once,
 * not on names ever used (a room per channel, thousands of rooms). An id
 * carries its entry's generation: a publisher or subscriber holding the id
 * of a retired name gets mh_shm_chan_err_stale and looks the name up again,
 * and a record left in the ring under an old id reaches nobody.
 *
 * Errors are the static strings below, compared by identity.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MH_SHM_CHAN_SLOTS    64 /* workers, with the old ones of a reload still finishing */
#define MH_SHM_CHAN_MAX      8192 /* entries: names listened to at once, up to half of it */
#define MH_SHM_CHAN_NAME_MAX 65 /* a channel's 64 bytes and lua_channel.c's mark of a local one */
#define MH_SHM_CHAN_MSG_MAX  (64 * 1024)
#define MH_SHM_CHAN_MIN_RING (4 * (MH_SHM_CHAN_MSG_MAX + 16))

extern const char mh_shm_chan_err_too_large[]; /* "too large": a message over MSG_MAX */
extern const char mh_shm_chan_err_too_many[];  /* "too many channels" */
extern const char mh_shm_chan_err_lock[];      /* "lock lost" */
extern const char mh_shm_chan_err_no_slot[];   /* "no slot": all slots taken */
extern const char mh_shm_chan_err_stale[];     /* "stale": the id's name was retired */

struct mh_shm_chan;

/*
 * Maps a zone whose ring holds ring_bytes (>= MH_SHM_CHAN_MIN_RING, rounded
 * to 8) and makes the slots' eventfds. NULL with errno.
 */
struct mh_shm_chan *mh_shm_chan_new(size_t ring_bytes);
/* Unmaps this process's view and closes its eventfds; other processes keep theirs. */
void mh_shm_chan_free(struct mh_shm_chan *c);

/* Takes a free slot for pid (clearing what a dead owner left). The slot index, or -1. */
int mh_shm_chan_claim(struct mh_shm_chan *c, pid_t pid);
/* Gives slot back (its owner is leaving): no channel wakes it any more. */
void mh_shm_chan_release(struct mh_shm_chan *c, int slot);
/* The master saw pid exit: releases its slot, if it had one. */
void mh_shm_chan_forget(struct mh_shm_chan *c, pid_t pid);
/* The eventfd that becomes readable when slot has something to read (non-blocking). */
int mh_shm_chan_fd(const struct mh_shm_chan *c, int slot);

/*
 * The id of the channel called name (1..MH_SHM_CHAN_NAME_MAX bytes),
 * creating it; *seq gets its last sequence number (0 before the first
 * publish). mh_shm_chan_err_too_many when MH_SHM_CHAN_MAX / 2 names are
 * listened to.
 */
const char *mh_shm_chan_lookup(struct mh_shm_chan *c, const char *name, size_t len, uint32_t *id,
                               uint64_t *seq);

/* The id of name if it has an entry now (no entry made), else 0. */
uint32_t mh_shm_chan_find(struct mh_shm_chan *c, const char *name, size_t len);

/*
 * Marks (on) or clears the slot as listening to channel id: publishes to id
 * wake it. *seq (may be NULL) gets the channel's last sequence number, read
 * under the same lock, so a new subscriber starts exactly after it.
 */
const char *mh_shm_chan_listen(struct mh_shm_chan *c, int slot, uint32_t id, bool on,
                               uint64_t *seq);

/*
 * Appends msg to channel id and wakes the slots listening to it. *woken
 * (may be NULL) gets how many eventfds were written. Never waits for a
 * reader: the oldest records are evicted to make room. msg NULL (len 0) is
 * a gap notice: its readers get it as a record with msg NULL (messages of
 * the channel may have been lost before it, e.g. while a relay from
 * elsewhere was cut off).
 */
const char *mh_shm_chan_publish(struct mh_shm_chan *c, uint32_t id, const void *msg, size_t len,
                                unsigned *woken);

/* Where a slot reads from: the ring offset (a counter that only grows). */
struct mh_shm_chan_cursor {
    uint64_t pos;
};

/* Starts a cursor at the ring's tail: it reads what is published from now on. */
const char *mh_shm_chan_cursor_init(struct mh_shm_chan *c, struct mh_shm_chan_cursor *cur);

/*
 * Clears slot's pending wake-up (reading its eventfd), then calls fn for
 * each record from the cursor to the tail, under the lock (fn must not call
 * into the zone; it copies what it keeps). *lapped (may be NULL) gets
 * whether records the cursor had not read were evicted. Returns NULL or an
 * error.
 */
typedef void (*mh_shm_chan_fn)(void *ud, uint32_t id, uint64_t seq, const char *msg, size_t len);
const char *mh_shm_chan_read(struct mh_shm_chan *c, int slot, struct mh_shm_chan_cursor *cur,
                             mh_shm_chan_fn fn, void *ud, bool *lapped);

/*
 * How the set of listened names changed: a number that grows each time a
 * name gains its first listening slot or loses its last one.
 */
uint64_t mh_shm_chan_listen_version(struct mh_shm_chan *c);
/* Calls fn for each name some slot listens to, under the lock (fn must not call into the zone). */
const char *mh_shm_chan_listened(struct mh_shm_chan *c, void (*fn)(void *ud, const char *name,
                                                                   size_t len),
                                 void *ud);
/* Counts one more start of a relay into this zone (lua/moonhttp/cluster.lua); returns the ones before. */
uint64_t mh_shm_chan_relay_started(struct mh_shm_chan *c);

/* For tests: bytes of ring the records from head to tail use, and the record count. */
void mh_shm_chan_usage(struct mh_shm_chan *c, size_t *bytes, size_t *records);
/* How often a taker found the lock's owner dead. */
uint64_t mh_shm_chan_recoveries(struct mh_shm_chan *c);

/*
 * Test hook: when set, called during a publish with the lock held, after
 * its record is written and before it becomes visible. Process-local.
 */
void mh_shm_chan_set_publish_hook(struct mh_shm_chan *c, void (*hook)(const char *msg, size_t len));
/* Test hook: called by a read between its two re-arming steps (see mh_shm_chan_read). */
void mh_shm_chan_set_rearm_hook(struct mh_shm_chan *c, void (*hook)(struct mh_shm_chan *c));

#endif
