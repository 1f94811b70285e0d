#ifndef MH_CHANNEL_H
#define MH_CHANNEL_H
/*
 * The per-process half of channels across workers (shm_channel.h is the
 * shared half): a worker's endpoint holds its slot in the shared zone, an
 * ev_io on that slot's eventfd, its read cursor, and the subscriptions made
 * in this process, grouped by channel. When the eventfd fires, the endpoint
 * reads the new records once and hands each to every local subscriber of
 * its channel: one copy per record, shared by reference count.
 *
 * A subscription's queue is bounded: when it is full, the oldest message is
 * dropped and counted, so a slow subscriber never holds up a publisher, the
 * endpoint or the other subscribers. Messages a subscriber could not get
 * (dropped here, or evicted from the ring before this worker read them, seen
 * as a gap in the channel's sequence numbers) add to its `missed` count.
 *
 * Nothing here knows Lua: on_message tells the owner (lua_channel.c) that a
 * subscription has something to take, from the loop's callback.
 */
#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shm_channel.h"

/* One message as this process holds it: shared by the queues it is in. */
struct mh_chan_msg {
    unsigned refs;
    bool gap; /* a gap notice (no data): messages before it may have been lost */
    size_t len;
    char data[];
};
void mh_chan_msg_unref(struct mh_chan_msg *m);

struct mh_chan_endpoint;
struct mh_chan_local;

struct mh_chan_sub {
    /* Set by the owner before subscribing; called when a message or a miss arrived. */
    void (*on_message)(struct mh_chan_sub *s);
    void *ud;
    uint64_t missed;           /* not yet reported to the subscriber: the owner resets it */
    struct mh_chan_local *_ch; /* NULL: not subscribed (closed, or the endpoint closed) */
    uint64_t _next_seq;        /* the channel's next sequence number this one wants */
    struct mh_chan_msg **_q;
    unsigned _head, _n, _cap;
    struct mh_chan_sub *_prev, *_next;
};

#define MH_CHAN_BUCKETS 256
struct mh_chan_endpoint {
    struct mh_shm_chan *shm; /* NULL: channels unavailable in this process */
    int slot;
    struct ev_loop *loop;
    ev_io io; /* on the slot's eventfd, active while any subscription exists */
    struct mh_shm_chan_cursor cursor;
    struct mh_chan_local *buckets[MH_CHAN_BUCKETS]; /* local channels by id */
    unsigned nsubs;
    uint64_t lapped; /* times the ring evicted records before this process read them */
};

/*
 * Takes a slot of shm for pid. Returns NULL, or mh_shm_chan_err_no_slot
 * (the endpoint stays usable for publishing only).
 */
const char *mh_chan_endpoint_init(struct mh_chan_endpoint *ep, struct ev_loop *loop,
                                  struct mh_shm_chan *shm, pid_t pid);
/* Ends every local subscription (their _ch becomes NULL), stops the watcher, gives the slot back.
 */
void mh_chan_endpoint_close(struct mh_chan_endpoint *ep);

/* The channel's id (see mh_shm_chan_lookup; an id may go stale: mh_shm_chan_err_stale). */
const char *mh_chan_lookup(struct mh_chan_endpoint *ep, const char *name, size_t len, uint32_t *id);
/* Publishes to channel id (msg NULL: a gap notice); never waits. */
const char *mh_chan_publish(struct mh_chan_endpoint *ep, uint32_t id, const void *msg, size_t len);

/*
 * Subscribes s (zeroed but for on_message and ud) to channel id with a queue
 * of queue_cap messages: it gets what is published from now on.
 */
const char *mh_chan_subscribe(struct mh_chan_endpoint *ep, struct mh_chan_sub *s, uint32_t id,
                              unsigned queue_cap);
/* Ends s's subscription and frees what it still queues (idempotent). */
void mh_chan_unsubscribe(struct mh_chan_sub *s);
/* Calls fn for every subscription of this process (fn must not unsubscribe). */
void mh_chan_each_sub(struct mh_chan_endpoint *ep, void (*fn)(struct mh_chan_sub *s, void *ud),
                      void *ud);
/* The oldest queued message (the caller owns a reference), or NULL. */
struct mh_chan_msg *mh_chan_pop(struct mh_chan_sub *s);

#endif
