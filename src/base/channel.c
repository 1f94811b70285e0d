#include "channel.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>

/* The subscriptions of one channel in this process. */
struct mh_chan_local {
    uint32_t id;
    struct mh_chan_endpoint *ep;
    struct mh_chan_sub *subs;
    struct mh_chan_local *next; /* in its bucket */
};

void mh_chan_msg_unref(struct mh_chan_msg *m)
{
    if (m && --m->refs == 0)
        free(m);
}

static struct mh_chan_local **bucket(struct mh_chan_endpoint *ep, uint32_t id)
{
    return &ep->buckets[id % MH_CHAN_BUCKETS];
}

static struct mh_chan_local *find_local(struct mh_chan_endpoint *ep, uint32_t id)
{
    for (struct mh_chan_local *l = *bucket(ep, id); l; l = l->next)
        if (l->id == id)
            return l;
    return NULL;
}

static void push(struct mh_chan_sub *s, struct mh_chan_msg *m)
{
    if (s->_n == s->_cap) { /* full: the oldest goes, counted */
        mh_chan_msg_unref(s->_q[s->_head]);
        s->_head = (s->_head + 1) % s->_cap;
        s->_n--;
        s->missed++;
    }
    s->_q[(s->_head + s->_n++) % s->_cap] = m;
    m->refs++;
}

/*
 * Under the zone's lock (mh_shm_chan_read): queue the record for the local
 * subscribers that want it. Only copies; the owners hear of it after the
 * lock is released (on_readable), since waking a task may publish again.
 */
static void on_record(void *ud, uint32_t id, uint64_t seq, const char *data, size_t len)
{
    struct mh_chan_endpoint *ep = ud;
    struct mh_chan_local *l = find_local(ep, id);
    if (!l)
        return;
    struct mh_chan_msg *m = NULL;
    for (struct mh_chan_sub *s = l->subs; s; s = s->_next) {
        if (seq < s->_next_seq) /* published before it subscribed */
            continue;
        s->missed += seq - s->_next_seq; /* evicted from the ring before this worker read them */
        s->_next_seq = seq + 1;
        if (!m) {
            if (!(m = malloc(sizeof *m + len))) {
                s->missed++;
                continue;
            }
            m->refs = 1; /* ours until the loop ends */
            m->gap = !data;
            m->len = len;
            if (data)
                memcpy(m->data, data, len);
        }
        push(s, m);
    }
    mh_chan_msg_unref(m);
}

static void notify(struct mh_chan_sub *s, void *ud)
{
    (void)ud;
    if ((s->_n || s->missed) && s->on_message)
        s->on_message(s);
}

static void on_readable(struct ev_loop *loop, ev_io *io, int revents)
{
    struct mh_chan_endpoint *ep = io->data;
    (void)loop;
    (void)revents;
    bool lapped;
    const char *err = mh_shm_chan_read(ep->shm, ep->slot, &ep->cursor, on_record, ep, &lapped);
    if (err) {
        mh_log(MH_LOG_ERROR, "channels: %s", err);
        return;
    }
    ep->lapped += lapped;
    /*
     * Every subscription with something to take hears of it, after the lock
     * is released. on_message must not unsubscribe (lua_channel.c only
     * schedules the waiting task's resume for the next loop iteration).
     */
    mh_chan_each_sub(ep, notify, NULL);
}

const char *mh_chan_endpoint_init(struct mh_chan_endpoint *ep, struct ev_loop *loop,
                                  struct mh_shm_chan *shm, pid_t pid)
{
    memset(ep, 0, sizeof *ep);
    ep->loop = loop;
    ep->shm = shm;
    ep->slot = -1;
    if (!shm)
        return NULL;
    ep->slot = mh_shm_chan_claim(shm, pid);
    if (ep->slot < 0)
        return mh_shm_chan_err_no_slot;
    ev_io_init(&ep->io, on_readable, mh_shm_chan_fd(shm, ep->slot), EV_READ);
    ep->io.data = ep;
    return NULL;
}

void mh_chan_endpoint_close(struct mh_chan_endpoint *ep)
{
    if (!ep->shm)
        return;
    for (size_t b = 0; b < MH_CHAN_BUCKETS; b++)
        while (ep->buckets[b] && ep->buckets[b]->subs)
            mh_chan_unsubscribe(ep->buckets[b]->subs);
    if (ep->slot >= 0) {
        ev_io_stop(ep->loop, &ep->io);
        mh_shm_chan_release(ep->shm, ep->slot);
    }
    ep->slot = -1;
    ep->shm = NULL;
}

const char *mh_chan_lookup(struct mh_chan_endpoint *ep, const char *name, size_t len, uint32_t *id)
{
    return mh_shm_chan_lookup(ep->shm, name, len, id, NULL);
}

const char *mh_chan_publish(struct mh_chan_endpoint *ep, uint32_t id, const void *msg, size_t len)
{
    return mh_shm_chan_publish(ep->shm, id, msg, len, NULL);
}

const char *mh_chan_subscribe(struct mh_chan_endpoint *ep, struct mh_chan_sub *s, uint32_t id,
                              unsigned queue_cap)
{
    if (ep->slot < 0)
        return mh_shm_chan_err_no_slot;
    const char *err;
    if (ep->nsubs == 0 && (err = mh_shm_chan_cursor_init(ep->shm, &ep->cursor)))
        return err; /* the first subscription reads from now on, not from an old cursor */
    if (!(s->_q = calloc(queue_cap, sizeof *s->_q)))
        return "no memory";
    struct mh_chan_local *l = find_local(ep, id);
    bool fresh = !l;
    if (fresh) {
        if (!(l = calloc(1, sizeof *l))) {
            free(s->_q);
            s->_q = NULL;
            return "no memory";
        }
        l->id = id;
        l->ep = ep;
    }
    uint64_t seq = 0;
    if ((err = mh_shm_chan_listen(ep->shm, ep->slot, id, true, &seq))) {
        free(s->_q);
        s->_q = NULL;
        if (fresh)
            free(l);
        return err;
    }
    if (fresh) {
        l->next = *bucket(ep, id);
        *bucket(ep, id) = l;
    }
    s->_cap = queue_cap;
    s->_head = s->_n = 0;
    s->missed = 0;
    s->_next_seq = seq + 1;
    s->_ch = l;
    s->_prev = NULL;
    s->_next = l->subs;
    if (l->subs)
        l->subs->_prev = s;
    l->subs = s;
    if (ep->nsubs++ == 0)
        ev_io_start(ep->loop, &ep->io);
    return NULL;
}

void mh_chan_unsubscribe(struct mh_chan_sub *s)
{
    struct mh_chan_local *l = s->_ch;
    if (!l)
        return;
    struct mh_chan_endpoint *ep = l->ep;
    if (s->_prev)
        s->_prev->_next = s->_next;
    else
        l->subs = s->_next;
    if (s->_next)
        s->_next->_prev = s->_prev;
    s->_ch = NULL;
    while (s->_n) {
        mh_chan_msg_unref(s->_q[s->_head]);
        s->_head = (s->_head + 1) % s->_cap;
        s->_n--;
    }
    free(s->_q);
    s->_q = NULL;
    if (!l->subs) { /* the last one here: this worker stops listening to the channel */
        mh_shm_chan_listen(ep->shm, ep->slot, l->id, false, NULL);
        struct mh_chan_local **p = bucket(ep, l->id);
        while (*p != l)
            p = &(*p)->next;
        *p = l->next;
        free(l);
    }
    if (--ep->nsubs == 0)
        ev_io_stop(ep->loop, &ep->io);
}

void mh_chan_each_sub(struct mh_chan_endpoint *ep, void (*fn)(struct mh_chan_sub *s, void *ud),
                      void *ud)
{
    for (size_t b = 0; b < MH_CHAN_BUCKETS; b++)
        for (struct mh_chan_local *l = ep->buckets[b]; l; l = l->next)
            for (struct mh_chan_sub *s = l->subs; s; s = s->_next)
                fn(s, ud);
}

struct mh_chan_msg *mh_chan_pop(struct mh_chan_sub *s)
{
    if (!s->_n)
        return NULL;
    struct mh_chan_msg *m = s->_q[s->_head];
    s->_head = (s->_head + 1) % s->_cap;
    s->_n--;
    return m;
}
