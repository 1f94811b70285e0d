/*
 * The idle pool of net/socket.c over socketpairs, the peer scripted by the
 * test: a parked connection is handed out again under its key only; it
 * expires after its idle timeout; one the peer closed (or spoke on) while
 * parked is dropped by its armed read watcher, with no MSG_PEEK at take, and
 * never handed out; a key keeps at most `max`; unread input is not parked.
 */
#include "socket.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"

static struct ev_loop *loop;

/* A socket over one end of a socketpair; the other end (the peer) through *peer. */
static struct mh_socket *connected(int *peer)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) < 0) {
        perror("socketpair");
        return NULL;
    }
    struct mh_socket *s = mh_socket_new(loop);
    mh_transport_plain_init(&s->tr, sv[0]);
    *peer = sv[1];
    return s;
}

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) != -1;
}

/* Lets the loop see what happened on the parked sockets (several iterations, no wait). */
static void spin(void)
{
    for (int i = 0; i < 4; i++)
        ev_run(loop, EVRUN_NOWAIT);
}

static void test_take_by_key(void)
{
    struct mh_socket_pool *p = mh_socket_pool_new(loop);
    int peer;
    struct mh_socket *s = connected(&peer);
    CHECK(mh_socket_pool_put(p, s, "a:1", 10, 4) == NULL);
    CHECK(mh_socket_pool_take(p, "b:1") == NULL);
    struct mh_socket *t = mh_socket_pool_take(p, "a:1");
    CHECK(t == s && t->reused == 1);
    CHECK(mh_socket_pool_take(p, "a:1") == NULL);
    mh_socket_free(t);
    close(peer);
    mh_socket_pool_free(p);
}

static void on_wait_done(struct ev_loop *l, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(l, EVBREAK_ALL);
}

static void test_idle_expiry(void)
{
    struct mh_socket_pool *p = mh_socket_pool_new(loop);
    int peer;
    struct mh_socket *s = connected(&peer);
    int fd = s->tr.fd;
    CHECK(mh_socket_pool_put(p, s, "k", 0.05, 4) == NULL);
    ev_timer wait;
    ev_timer_init(&wait, on_wait_done, 0.2, 0.);
    ev_timer_start(loop, &wait);
    ev_run(loop, 0);
    CHECK(!fd_open(fd)); /* expired: closed */
    CHECK(mh_socket_pool_take(p, "k") == NULL);
    close(peer);
    mh_socket_pool_free(p);
}

static void test_peer_close_while_parked(void)
{
    struct mh_socket_pool *p = mh_socket_pool_new(loop);
    int peer;
    struct mh_socket *s = connected(&peer);
    int fd = s->tr.fd;
    CHECK(mh_socket_pool_put(p, s, "k", 10, 4) == NULL);
    close(peer);
    spin();
    CHECK(!fd_open(fd));
    CHECK(mh_socket_pool_take(p, "k") == NULL);

    /* bytes nobody asked for mean the same: the connection is out of step */
    s = connected(&peer);
    fd = s->tr.fd;
    CHECK(mh_socket_pool_put(p, s, "k", 10, 4) == NULL);
    CHECK(write(peer, "x", 1) == 1);
    spin();
    CHECK(!fd_open(fd));
    CHECK(mh_socket_pool_take(p, "k") == NULL);
    close(peer);
    mh_socket_pool_free(p);
}

static void test_limits(void)
{
    struct mh_socket_pool *p = mh_socket_pool_new(loop);
    int peers[3];
    struct mh_socket *s[3];
    for (int i = 0; i < 3; i++)
        s[i] = connected(&peers[i]);
    CHECK(mh_socket_pool_put(p, s[0], "k", 10, 2) == NULL);
    CHECK(mh_socket_pool_put(p, s[1], "k", 10, 2) == NULL);
    CHECK(mh_socket_pool_put(p, s[2], "k", 10, 2) ==
          mh_socket_err_pool_full);             /* closed and freed */
    CHECK(mh_socket_pool_take(p, "k") == s[1]); /* the most recently parked first */
    CHECK(mh_socket_pool_take(p, "k") == s[0]);
    CHECK(mh_socket_pool_take(p, "k") == NULL);
    mh_socket_free(s[0]);
    mh_socket_free(s[1]);

    /* max 0: never parked */
    int peer;
    struct mh_socket *z = connected(&peer);
    CHECK(mh_socket_pool_put(p, z, "k", 10, 0) == mh_socket_err_pool_full);
    close(peer);

    /* input nobody read would reach the next user */
    struct mh_socket *u = connected(&peer);
    CHECK(mh_buf_append(&u->in, "left", 4) == 0);
    CHECK(mh_socket_pool_put(p, u, "k", 10, 4) == mh_socket_err_unread);
    close(peer);
    for (int i = 0; i < 3; i++)
        close(peers[i]);
    mh_socket_pool_free(p);
}

int main(void)
{
    loop = ev_loop_new(EVFLAG_AUTO);
    test_take_by_key();
    test_idle_expiry();
    test_peer_close_while_parked();
    test_limits();
    ev_loop_destroy(loop);
    return unit_report();
}
