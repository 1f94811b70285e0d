#include "socket.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char mh_socket_err_timeout[] = "timeout";
const char mh_socket_err_closed[] = "closed";
const char mh_socket_err_refused[] = "connection refused";
const char mh_socket_err_reset[] = "connection reset";
const char mh_socket_err_unreachable[] = "host unreachable";
const char mh_socket_err_nomem[] = "out of memory";
const char mh_socket_err_nofile[] = "too many open files";
const char mh_socket_err_unread[] = "unread data";
const char mh_socket_err_pool_full[] = "pool full";
const char mh_socket_err_failed[] = "socket error";

#define READ_CHUNK 16384

const char *mh_socket_errno_err(int e)
{
    switch (e) {
    case ECONNREFUSED:
        return mh_socket_err_refused;
    case ECONNRESET:
    case ECONNABORTED:
        return mh_socket_err_reset;
    case EPIPE:
        return mh_socket_err_closed;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EADDRNOTAVAIL:
        return mh_socket_err_unreachable;
    case ETIMEDOUT:
        return mh_socket_err_timeout;
    case ENOMEM:
    case ENOBUFS:
        return mh_socket_err_nomem;
    case EMFILE:
    case ENFILE:
        return mh_socket_err_nofile;
    default:
        return mh_socket_err_failed;
    }
}

static void on_io(struct ev_loop *loop, ev_io *w, int revents);
static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents);
static void on_wio(struct ev_loop *loop, ev_io *w, int revents);
static void on_wtimeout(struct ev_loop *loop, ev_timer *w, int revents);

struct mh_socket *mh_socket_new(struct ev_loop *loop)
{
    struct mh_socket *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->loop = loop;
    mh_transport_plain_init(&s->tr, -1);
    ev_init(&s->_io, on_io);
    s->_io.data = s;
    ev_init(&s->_timer, on_timeout);
    s->_timer.data = s;
    ev_init(&s->_wio, on_wio);
    s->_wio.data = s;
    ev_init(&s->_wtimer, on_wtimeout);
    s->_wtimer.data = s;
    return s;
}

/* Watchers do not decide how long the loop runs: the worker does (server/worker.c). */
static void stop_watchers(struct mh_socket *s)
{
    ev_io_stop(s->loop, &s->_io);
    ev_timer_stop(s->loop, &s->_timer);
    ev_io_stop(s->loop, &s->_wio);
    ev_timer_stop(s->loop, &s->_wtimer);
}

/*
 * A read watcher armed for EV_READ alone stays armed (its operation gone):
 * stopped now and started again in a later loop iteration (the reply read,
 * the socket parked after the task's next resume), libev would register the
 * descriptor with epoll again, an epoll_ctl failing with EEXIST per Redis
 * command. If bytes or EOF come while nothing waits, on_io stops it then
 * (the bytes stay in the kernel for the next fill). Any other interest (a
 * TLS read that waits for writability, a connect) would fire at once: stopped.
 */
void mh_socket_cancel_read(struct mh_socket *s)
{
    if ((s->_io.events & (EV_READ | EV_WRITE)) != EV_READ)
        ev_io_stop(s->loop, &s->_io);
    ev_timer_stop(s->loop, &s->_timer);
    s->_op = MH_SOCK_OP_NONE;
    s->_cb = NULL;
}

void mh_socket_cancel_write(struct mh_socket *s)
{
    ev_io_stop(s->loop, &s->_wio);
    ev_timer_stop(s->loop, &s->_wtimer);
    s->_wcb = NULL;
    s->_wlen = 0;
}

void mh_socket_cancel(struct mh_socket *s)
{
    mh_socket_cancel_read(s);
    mh_socket_cancel_write(s);
}

void mh_socket_free(struct mh_socket *s)
{
    if (!s)
        return;
    stop_watchers(s);
    if (s->tr.fd >= 0)
        mh_transport_close(&s->tr);
    mh_buf_free(&s->in);
    free(s);
}

/*
 * Points one side's watcher at `events` and starts it. ev_io_set tells libev
 * the descriptor may be a new file, so the next loop iteration registers it
 * with epoll again even when the mask is unchanged: an epoll_ctl failing with
 * EEXIST, two per Redis command (one at the reply's wait, one at the park;
 * bench/TFB.md). Only the first arming after connect needs that (the number
 * may belong to a new file then); later ones use ev_io_modify, and a stop and
 * start within one iteration cost no system call.
 */
static void set_io(struct mh_socket *s, ev_io *io, int events)
{
    bool *fd_set = io == &s->_io ? &s->_io_fd_set : &s->_wio_fd_set;
    ev_io_stop(s->loop, io);
    if (*fd_set) {
        ev_io_modify(io, events);
    } else {
        ev_io_set(io, s->tr.fd, events);
        *fd_set = true;
    }
    ev_io_start(s->loop, io);
}

/* Arms one side's watcher for `events` on the fd and its timer for `timeout` s (0: none). */
static void arm(struct mh_socket *s, ev_io *io, ev_timer *timer, int events, double timeout)
{
    set_io(s, io, events);
    ev_timer_stop(s->loop, timer);
    if (timeout > 0) {
        ev_timer_set(timer, timeout, 0.);
        ev_timer_start(s->loop, timer);
    }
}

/* The read side waits for `events`, at most `timeout` seconds (0: no limit). */
static void wait_for(struct mh_socket *s, enum mh_socket_op op, int events, double timeout,
                     mh_socket_cb cb)
{
    s->_op = op;
    s->_cb = cb;
    arm(s, &s->_io, &s->_timer, events, timeout);
}

/* Ends the read side's pending operation and reports it. */
static void finish(struct mh_socket *s, const char *err)
{
    mh_socket_cb cb = s->_cb;
    mh_socket_cancel_read(s);
    if (cb)
        cb(s, err);
}

/* Ends the pending write and reports it. */
static void finish_write(struct mh_socket *s, const char *err)
{
    mh_socket_cb cb = s->_wcb;
    mh_socket_cancel_write(s);
    if (cb)
        cb(s, err);
}

/* One read into s->in: 1 got bytes or EOF, 0 would block, -1 error (*err). */
static int read_some(struct mh_socket *s, const char **err)
{
    if (mh_buf_reserve(&s->in, READ_CHUNK) < 0) {
        *err = mh_socket_err_nomem;
        return -1;
    }
    ssize_t n = mh_transport_read(&s->tr, s->in.data + s->in.len, s->in.cap - s->in.len);
    if (n > 0) {
        s->in.len += (size_t)n;
        return 1;
    }
    if (n == 0) {
        s->eof = true;
        return 1;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return 0;
    *err = mh_socket_errno_err(errno);
    return -1;
}

int mh_socket_fill(struct mh_socket *s, double timeout, mh_socket_cb cb, const char **err)
{
    if (s->tr.fd < 0) {
        *err = mh_socket_err_closed;
        return -1;
    }
    if (s->eof)
        return 1;
    /*
     * A request just written in this iteration cannot have its answer yet (the
     * peer must be scheduled, read it and write): the read would fail with
     * EAGAIN, a system call per Redis command (bench/TFB.md). epoll is
     * level-triggered, so bytes that are there after all are reported by the
     * next poll. Bytes a TLS session already holds produce no event: read them.
     */
    bool just_wrote = s->_wrote_iter == ev_iteration(s->loop) + 1;
    s->_wrote_iter = 0;
    if (!just_wrote || mh_transport_pending(&s->tr)) {
        int rc = read_some(s, err);
        if (rc != 0)
            return rc;
    }
    wait_for(s, MH_SOCK_OP_FILL, (s->tr.wants & MH_TRANSPORT_READ_WANTS_WRITE) ? EV_WRITE : EV_READ,
             timeout, cb);
    return 0;
}

/* Writes what it can of the pending data: 1 all written, 0 would block, -1 error. */
static int write_some(struct mh_socket *s, const char **err)
{
    while (s->_wlen > 0) {
        ssize_t n = mh_transport_write(&s->tr, s->_wdata, s->_wlen);
        if (n > 0) {
            s->_wdata += n;
            s->_wlen -= (size_t)n;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return 0;
        *err = n == 0 ? mh_socket_err_closed : mh_socket_errno_err(errno);
        return -1;
    }
    return 1;
}

int mh_socket_write(struct mh_socket *s, const char *data, size_t len, double timeout,
                    mh_socket_cb cb, const char **err)
{
    if (s->tr.fd < 0) {
        *err = mh_socket_err_closed;
        return -1;
    }
    s->_wdata = data;
    s->_wlen = len;
    int rc = write_some(s, err);
    if (rc != 0) {
        s->_wlen = 0;
        if (rc > 0)
            s->_wrote_iter = ev_iteration(s->loop) + 1;
        return rc;
    }
    s->_wcb = cb;
    arm(s, &s->_wio, &s->_wtimer,
        (s->tr.wants & MH_TRANSPORT_WRITE_WANTS_READ) ? EV_READ : EV_WRITE, timeout);
    return 0;
}

static void on_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    finish(w->data, mh_socket_err_timeout);
}

static void on_wtimeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    finish_write(w->data, mh_socket_err_timeout);
}

static void on_wio(struct ev_loop *loop, ev_io *w, int revents)
{
    struct mh_socket *s = w->data;
    const char *err = NULL;
    (void)loop;
    (void)revents;
    int rc = write_some(s, &err);
    if (rc != 0) {
        finish_write(s, rc < 0 ? err : NULL);
        return;
    }
    /* TLS may want the other readiness for the rest. */
    int events = (s->tr.wants & MH_TRANSPORT_WRITE_WANTS_READ) ? EV_READ : EV_WRITE;
    if (events != (w->events & (EV_READ | EV_WRITE)))
        set_io(s, w, events);
}

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    struct mh_socket *s = w->data;
    const char *err = NULL;
    int rc;
    (void)loop;
    (void)revents;
    if (s->_op != MH_SOCK_OP_FILL) {
        /* readable while nothing waits (mh_socket_cancel_read): stop listening */
        ev_io_stop(s->loop, &s->_io);
        return;
    }
    rc = read_some(s, &err);
    if (rc != 0)
        finish(s, rc < 0 ? err : NULL);
}

/* ---- the pool ------------------------------------------------------------- */

struct mh_socket_group {
    struct mh_socket_group *next;
    struct mh_idle_key idle;
    char key[];
};

struct mh_socket_pool {
    struct ev_loop *loop;
    struct mh_socket_group *groups;
    struct mh_idle_pool idle;
};

static struct mh_socket *socket_of(struct mh_idle_conn *i)
{
    return (struct mh_socket *)((char *)i - offsetof(struct mh_socket, _idle));
}

struct mh_socket_pool *mh_socket_pool_new(struct ev_loop *loop)
{
    struct mh_socket_pool *p = calloc(1, sizeof *p);
    if (p)
        p->loop = loop;
    return p;
}

static struct mh_socket_group *find_group(const struct mh_socket_pool *p, const char *key)
{
    for (struct mh_socket_group *g = p->groups; g; g = g->next)
        if (strcmp(g->key, key) == 0)
            return g;
    return NULL;
}

/* An idle socket became readable or timed out: either way it is no longer worth keeping. */
static void on_idle_event(struct mh_socket *s, const char *err)
{
    (void)err;
    mh_idle_unlink(&s->_pool->idle, &s->_idle);
    mh_socket_free(s); /* stops its watchers */
}

void mh_socket_pool_free(struct mh_socket_pool *p)
{
    if (!p)
        return;
    while (p->groups) {
        struct mh_socket_group *g = p->groups;
        p->groups = g->next;
        while (g->idle.head) {
            struct mh_socket *s = socket_of(g->idle.head);
            mh_idle_unlink(&p->idle, &s->_idle);
            mh_socket_free(s);
        }
        free(g);
    }
    free(p);
}

const char *mh_socket_pool_put(struct mh_socket_pool *p, struct mh_socket *s, const char *key,
                               double idle_timeout, size_t max)
{
    const char *why = NULL;
    struct mh_socket_group *g = find_group(p, key);
    if (s->tr.fd < 0 || s->eof)
        why = mh_socket_err_closed;
    else if (s->in.len > 0 || mh_transport_pending(&s->tr))
        why = mh_socket_err_unread; /* the next user would read the last one's leftovers */
    else if (max == 0 || (g && g->idle.n >= max))
        why = mh_socket_err_pool_full;
    else if (!g) {
        size_t klen = strlen(key);
        if ((g = calloc(1, sizeof *g + klen + 1))) {
            memcpy(g->key, key, klen + 1);
            g->next = p->groups;
            p->groups = g;
        } else {
            why = mh_socket_err_nomem;
        }
    }
    if (why) {
        mh_socket_free(s);
        return why;
    }
    mh_socket_cancel(s);
    s->ud = NULL;
    s->_pool = p;
    mh_idle_park(&p->idle, &g->idle, &s->_idle);
    mh_buf_free(&s->in); /* an idle connection holds no buffer */
    /* Readable while idle means the peer closed or sent something unasked: drop it then. */
    wait_for(s, MH_SOCK_OP_FILL, EV_READ, idle_timeout, on_idle_event);
    return NULL;
}

struct mh_socket *mh_socket_pool_take(struct mh_socket_pool *p, const char *key)
{
    struct mh_socket_group *g = find_group(p, key);
    struct mh_idle_conn *i = g ? mh_idle_take(&p->idle, &g->idle) : NULL;
    if (!i)
        return NULL;
    struct mh_socket *s = socket_of(i);
    /*
     * The read watcher stays armed (mh_socket_cancel_read): a connection
     * handed to a task waiting for a pool slot is used from that task's next
     * iteration, and a stop now would cost an epoll_ctl then.
     */
    mh_socket_cancel(s);
    s->reused++;
    return s;
}
