#ifndef MH_NET_IDLE_POOL_H
#define MH_NET_IDLE_POOL_H
/*
 * The idle connections of an outbound pool, for both clients (fetch's,
 * client/client_pool.c, and http.tcp()'s keepalive, socket.c): one copy of
 * the bookkeeping. A connection parks under its key (what dialer.h keys a
 * dial by, or a socket's pool name) most recent first, and on the pool's
 * list, most recent first; take hands out a key's most recent one; past a
 * key's limit or the pool's, mh_idle_excess names the oldest, for the
 * caller to close. Everything is intrusive: no allocation here.
 *
 * Liveness and expiry are the caller's watchers, because they are the
 * connection's own: a parked connection keeps its read watcher armed, so a
 * close (or bytes nobody asked for) seen by any poll closes it and it is
 * never handed out (no MSG_PEEK at take), and its timer runs the idle
 * timeout.
 */
#include <stddef.h>

struct mh_idle_key;

/* Embedded in a connection. */
struct mh_idle_conn {
    struct mh_idle_conn *kprev, *knext; /* its key's list */
    struct mh_idle_conn *lprev, *lnext; /* the pool's list */
    struct mh_idle_key *key;            /* NULL: not parked */
};

/* Embedded in what the caller keeps per key. */
struct mh_idle_key {
    struct mh_idle_conn *head; /* most recently parked first */
    size_t n;
};

struct mh_idle_pool {
    struct mh_idle_conn *head, *tail; /* most recently parked first */
    size_t n;
};

/* Parks c under k. */
void mh_idle_park(struct mh_idle_pool *p, struct mh_idle_key *k, struct mh_idle_conn *c);
/* Takes the most recently parked connection of k out of the lists, or NULL. */
struct mh_idle_conn *mh_idle_take(struct mh_idle_pool *p, struct mh_idle_key *k);
/* Takes c (parked) out of the lists. */
void mh_idle_unlink(struct mh_idle_pool *p, struct mh_idle_conn *c);
/*
 * After a park under k: the connection to close so that k keeps at most
 * per_key and the pool at most max (k's oldest first, then the pool's), or
 * NULL when both hold. Close it (which unlinks it) and ask again.
 */
struct mh_idle_conn *mh_idle_excess(const struct mh_idle_pool *p, const struct mh_idle_key *k,
                                    size_t per_key, size_t max);

#endif
