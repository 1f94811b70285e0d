#ifndef MH_SOCKET_H
#define MH_SOCKET_H
/*
 * Outbound byte streams for Lua sockets (http.tcp()): a connected socket
 * behind the transport vtable (plain TCP or TLS, as a dial of dialer.h
 * made it), an input buffer, and a per-loop pool of idle connections.
 *
 * Each operation (fill, write) is tried at once; when it
 * cannot finish now it returns 0 and reports later through its callback,
 * called from the loop (never from inside the call that started it).
 * Full duplex: a socket has a read side (fill) and a write side (write),
 * each with its own watcher, timer and callback, so a write may wait for
 * the peer to drain while a fill waits for its bytes. One operation per
 * side at a time.
 * mh_socket_cancel stops both sides without a callback; _read / _write one.
 * Nothing here calls into Lua.
 *
 * Errors are the static strings below, compared by identity; the Lua face
 * returns them as they are.
 */
#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "buf.h"
#include "idle_pool.h"
#include "transport.h"

extern const char mh_socket_err_timeout[]; /* "timeout" */
extern const char mh_socket_err_closed[];  /* "closed": the peer closed, or the socket is closed */
extern const char mh_socket_err_refused[]; /* "connection refused" */
extern const char mh_socket_err_reset[];   /* "connection reset" */
extern const char mh_socket_err_unreachable[]; /* "host unreachable" */
extern const char mh_socket_err_nomem[];       /* "out of memory" */
extern const char mh_socket_err_nofile[];      /* "too many open files" */
extern const char mh_socket_err_unread[];      /* "unread data": not pooled */
extern const char mh_socket_err_pool_full[];   /* "pool full": not pooled */
extern const char mh_socket_err_failed[];      /* "socket error": any other errno */

/* The fixed string for errno e (connect, read or write failures). */
const char *mh_socket_errno_err(int e);

struct mh_socket;
struct mh_socket_pool;

/* An operation finished: err is NULL on success. */
typedef void (*mh_socket_cb)(struct mh_socket *s, const char *err);

enum mh_socket_op { MH_SOCK_OP_NONE, MH_SOCK_OP_FILL };

struct mh_socket {
    struct mh_transport tr; /* fd -1 until the owner installs a dialed connection */
    struct ev_loop *loop;
    struct mh_buf in; /* received and not yet taken by the caller */
    bool eof;         /* the peer closed its side */
    unsigned reused;  /* times taken from the pool */
    void *ud;         /* the owner's pointer (the Lua socket) */

    /* the read side: fill */
    ev_io _io;
    bool _io_fd_set; /* _io was ev_io_set to this fd (set_io) */
    ev_timer _timer;
    enum mh_socket_op _op;
    mh_socket_cb _cb;
    /* the write side */
    ev_io _wio;
    bool _wio_fd_set;
    ev_timer _wtimer;
    mh_socket_cb _wcb;
    const char *_wdata;
    size_t _wlen;
    unsigned _wrote_iter; /* ev_iteration + 1 when a write last completed at once (0: never) */
    /* while idle in a pool */
    struct mh_socket_pool *_pool;
    struct mh_idle_conn _idle;
};

/* A closed socket for loop; NULL when out of memory. */
struct mh_socket *mh_socket_new(struct ev_loop *loop);
/* Closes the connection (if any) and frees s; a pending operation is dropped. */
void mh_socket_free(struct mh_socket *s);

/*
 * Reads what is available into s->in (at least one byte, or sets eof).
 * 1: done now; 0: cb reports (mh_socket_err_timeout after `timeout` s of silence); -1: *err.
 * Right after a write that completed in this loop iteration it does not try
 * the read (the peer cannot have answered yet) and waits for readiness.
 */
int mh_socket_fill(struct mh_socket *s, double timeout, mh_socket_cb cb, const char **err);
/*
 * Writes all of data (which must stay valid until cb runs), on the write
 * side: a fill may wait meanwhile. 1: written now; 0: cb reports, waiting
 * while the peer applies back-pressure; -1: *err.
 */
int mh_socket_write(struct mh_socket *s, const char *data, size_t len, double timeout,
                    mh_socket_cb cb, const char **err);
/* Stops the pending operations of both sides (their callbacks will not run). */
void mh_socket_cancel(struct mh_socket *s);
/* Stops the read side's pending fill; a write goes on. */
void mh_socket_cancel_read(struct mh_socket *s);
/* Stops the pending write; a fill goes on. */
void mh_socket_cancel_write(struct mh_socket *s);

/* Idle connections of one loop, by key (host:port or a caller's pool name). */
struct mh_socket_pool *mh_socket_pool_new(struct ev_loop *loop);
/* Closes every idle connection. */
void mh_socket_pool_free(struct mh_socket_pool *p);
/*
 * Parks s idle under key for at most idle_timeout seconds (0: no limit),
 * keeping at most max per key. Returns NULL when parked; otherwise s was
 * closed and freed, and the reason is returned (mh_socket_err_unread for a socket
 * with input nobody read, mh_socket_err_pool_full, mh_socket_err_closed). An idle
 * socket that becomes readable (the peer closed or spoke) is closed.
 */
const char *mh_socket_pool_put(struct mh_socket_pool *p, struct mh_socket *s, const char *key,
                               double idle_timeout, size_t max);
/* An idle socket for key (its `reused` counted), or NULL. */
struct mh_socket *mh_socket_pool_take(struct mh_socket_pool *p, const char *key);

#endif
