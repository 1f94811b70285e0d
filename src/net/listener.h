#ifndef MH_LISTENER_H
#define MH_LISTENER_H
/*
 * Listening sockets: address parsing, bind/listen (a port another process
 * listens on is an error: the first bind of a port is always made without
 * SO_REUSEPORT; only then may a set of our own sockets share it, one per
 * worker), batched non-blocking accept, and shedding at the descriptor
 * limit: a connection that would leave the process too few descriptors to
 * serve it, or that arrives when there are none (EMFILE, accepted on the
 * reserve descriptor), is answered 503 and closed, never dropped unanswered
 * and never left spinning a readable listen socket.
 */
#include <ev.h>
#include <stdbool.h>
#include <sys/socket.h>

struct mh_tls_server;
struct mh_tls_certs;
struct mh_listener;

/*
 * What a set of listeners (a worker's) shares: the loop, the reserve fd,
 * and where accepted sockets go. The owner (server/worker.c) fills it.
 */
struct mh_acceptor {
    struct ev_loop *loop;
    int reserve_fd; /* spare descriptor given up on EMFILE (-1: none) */
    /*
     * RLIMIT_NOFILE's soft limit (0: unknown, no headroom kept). An accepted
     * socket numbered within mh_acceptor_headroom() of it is shed: the
     * descriptors left are the handlers' (files, upstream sockets, logs).
     */
    int fd_limit;
    bool tcp_nodelay;
    /*
     * The bytes a shed plain connection is answered with (the owner's: an
     * HTTP 503, http/req_policy.h); NULL: closed unanswered. A TLS client is
     * closed unanswered either way, as no handshake was made.
     */
    const char *shed_response;
    size_t shed_len;
    /* Whether another connection may be taken now (max_connections). */
    bool (*may_accept)(void *ud);
    /* Stop accepting on every listener until there is room (the owner resumes). */
    void (*pause)(void *ud);
    /* Takes the accepted socket; returns -1 (fd not taken: the listener closes it). */
    int (*on_accept)(void *ud, struct mh_listener *l, int fd, const struct sockaddr_storage *peer,
                     socklen_t plen);
    void *ud;
    /* A shedding episode: from the first shed to a second without one. */
    ev_timer _episode_timer;
    bool _in_episode;
    unsigned long _shed_headroom; /* answered 503 in the headroom this episode */
    unsigned long _shed_emfile;   /* answered 503 on the reserve descriptor */
    unsigned long _shed_seen;     /* the count at the timer's last tick */
    ev_tstamp _episode_start;
};

/* How many descriptors below fd_limit are kept for handlers: 1/32, 8 to 128. */
int mh_acceptor_headroom(const struct mh_acceptor *a);

struct mh_listener {
    int fd;
    char *addr; /* as configured, for logs */
    ev_io io;
    bool paused;
    struct mh_acceptor *acceptor;
    struct mh_tls_server *tls; /* NULL: plain TCP; set by mh_listener_tls_init */
    const void *serves;        /* the owner's: what serves its connections (a root handler) */
};

/*
 * Parses "host:port", ":port", "[v6]:port" or "port" into a socket address.
 * An empty host means all addresses: [::] dual-stack. Returns NULL or an error.
 */
const char *mh_listen_addr_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len);

/* Creates, binds and listens. Returns NULL, or an error with errno-based detail in err. */
const char *mh_listener_open(struct mh_listener *l, const char *addr, int backlog, char *err,
                             size_t errlen);
/*
 * Opens n sockets ls[0..n-1] on one address, for n workers that each accept
 * on their own (the kernel spreads new connections over the set by a hash
 * of the peer's address and port). ls[0] is bound as by mh_listener_open,
 * so a busy port still fails with "address in use"; it is given
 * SO_REUSEPORT after the bind and before listen(), and the others join it
 * with SO_REUSEPORT on the port it got (port 0: the kernel's choice for
 * all). n = 1 is mh_listener_open. Returns NULL, or an error (nothing left
 * open) with detail in err.
 */
const char *mh_listener_open_set(struct mh_listener *ls, size_t n, const char *addr, int backlog,
                                 char *err, size_t errlen);
void mh_listener_close(struct mh_listener *l);
/* Takes a socket already listening (inherited from the master); it is closed with l. */
void mh_listener_adopt(struct mh_listener *l, int fd, const char *addr);

/*
 * Gives each listener ls[i] with certs[i] (NULL: plain TCP) its TLS server;
 * listeners whose certs are `shared` (the top-level certificates) share one.
 * Call after the listeners are open. 0, or -1 with err.
 */
int mh_listener_tls_init(struct mh_listener *ls, size_t n, const struct mh_tls_certs *const *certs,
                         const struct mh_tls_certs *shared, char *err, size_t errlen);

/*
 * Reloads every TLS listener's certificates from certs[i] (for SIGHUP-style
 * reloads): all of them or, on error, none. 0, or -1 with err.
 */
int mh_listener_tls_reload(struct mh_listener *ls, size_t n,
                           const struct mh_tls_certs *const *certs, char *err, size_t errlen);

/* Starts or stops accepting on the acceptor's loop (stop ends a shedding episode's timer). */
void mh_listener_start(struct mh_listener *l, struct mh_acceptor *a);
void mh_listener_pause(struct mh_listener *l);
void mh_listener_resume(struct mh_listener *l);
/* Stops the acceptor's own watchers (its episode timer); the owner calls it before freeing. */
void mh_acceptor_stop(struct mh_acceptor *a);

/* The port actually bound (useful with port 0). */
int mh_listener_port(const struct mh_listener *l);

#endif
