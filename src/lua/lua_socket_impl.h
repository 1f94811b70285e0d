#ifndef MH_LUA_SOCKET_IMPL_H
#define MH_LUA_SOCKET_IMPL_H
/*
 * The insides of http.tcp(), shared by lua_socket.c (the Lua object and its
 * operations) and lua_socket_state.c (what the sockets of one generation
 * share: the dialer, the idle pool, per-key connection limits) and by
 * lua_relay.c (which takes a connected socket over for an upgrade relay).
 */
#include "dialer.h"
#include "lua_sched.h"
#include "socket.h"

#include <ev.h>
#include <stdbool.h>
#include <stddef.h>

#define KEY_MAX 300

/*
 * Connections of one key may be limited (opts.pool_size at connect): past
 * the limit, connects queue until a connection of the key is parked or
 * closed, so the peer sees at most that many connections (OpenResty's pool
 * backlog). Only connections handed out count; idle ones are at most the
 * rest, since a new one is made only when none is idle.
 */
struct key_limit {
    struct key_limit *next;
    size_t active;
    struct lsock *wait_head, *wait_tail;
    char key[];
};

struct sock_state {
    struct ev_loop *loop;
    struct key_limit *limits;
    struct mh_socket_pool *pool;
    struct mh_dialer *dialer; /* resolver, TLS configurations, saved sessions */
};

enum op { OP_NONE, OP_CONNECT, OP_HANDSHAKE, OP_SEND, OP_RECV };
enum recv_mode { R_BYTES, R_LINE, R_ALL, R_UNTIL, R_ANY };

/*
 * One direction of a socket and the task waiting on it. The read side runs
 * connect, tls_handshake and receive; the write side runs send. A task may
 * wait on each at once (full duplex: one task reads while another writes);
 * connect and tls_handshake need both idle.
 */
struct lside {
    struct lsock *k;
    struct mh_task *waiter;
    int anchor; /* registry reference to the userdata while a task waits */
    enum op op;
    bool done;       /* the pending operation has its answer (set by wake) */
    const char *err; /* the pending operation's failure */
};

struct lsock {
    struct mh_socket *s; /* NULL: not connected, or closed */
    struct sock_state *st;
    struct mh_task_link owner;
    struct lside rd, wr;
    double tmo_connect, tmo_send, tmo_read;
    double deadline; /* ev_now() time past which every wait ends in "timeout"; 0: none */
    enum recv_mode mode;
    size_t want;     /* receive(n)'s count */
    size_t send_len; /* the pending send's length */
    const char *delim;
    size_t delim_len;
    /* connect and tls_handshake */
    struct mh_dial dial;
    bool tls_next;    /* connect goes on with a handshake */
    bool tls_resumed; /* the last handshake resumed a saved session */
    bool verify;
    bool tls13_only; /* tls.min_version = "1.3" */
    char ca[256];
    char cert[256], cert_key[256]; /* "": no client certificate */
    char server_name[256];         /* "": none (a unix socket) */
    char key[KEY_MAX];             /* the idle pool's: pool name or host:port, and TLS options */
    char host[KEY_MAX]; /* as given to connect ("unix:/path" for unix sockets) */
    uint16_t port;
    struct key_limit *limit;  /* counted in it while connected */
    struct key_limit *queued; /* waiting in it for a free slot */
    struct lsock *next_waiter;
};

/* Frees what st holds (its __gc): the pool first, then the dialer whose TLS state it used. */
void mh_sock_state_free(struct sock_state *st);

/* Counts k in its key's limit of `size` (true), or queues it until a slot frees (false). */
bool mh_sock_take_slot(struct lsock *k, size_t size);

/* Takes k out of the queue it waits in (k->queued). */
void mh_sock_leave_queue(struct lsock *k);

/*
 * k's connection was parked or closed: its slot goes to the first waiter,
 * which is returned (counted and dequeued) for the caller to connect; NULL
 * when nobody waits.
 */
struct lsock *mh_sock_release_slot(struct lsock *k);

#endif
