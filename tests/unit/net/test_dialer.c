/*
 * The dialer's state machine on loopback against scripted peers: a plain
 * connect, a unix socket, a refused connect, a connect that times out (a
 * listener whose accept queue is full drops the SYN), a TLS handshake that
 * fails (the peer answers garbage) or times out (the peer says nothing),
 * a handshake on the caller's socket that leaves it open when it fails, and
 * a cancelled dial that reports nothing and closes its socket.
 */
#include "dialer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "unit.h"

static struct ev_loop *loop;
static struct mh_dialer *dialer;

/* What a dial reported. */
static int reports;
static const char *got_err;

static void on_dial(struct mh_dial *d, const char *err)
{
    (void)d;
    reports++;
    got_err = err;
    ev_break(loop, EVBREAK_ALL);
}

static void on_guard(struct ev_loop *l, ev_timer *w, int revents)
{
    (void)w;
    (void)revents;
    ev_break(l, EVBREAK_ALL);
}

/* Runs the loop until the dial reports, at most `seconds`. */
static void run_until_report(double seconds)
{
    ev_timer guard;
    ev_timer_init(&guard, on_guard, seconds, 0.);
    ev_timer_start(loop, &guard);
    if (!reports)
        ev_run(loop, 0);
    ev_timer_stop(loop, &guard);
}

static void dial(struct mh_dial *d, const char *host, int port, const struct mh_dial_tls *tls,
                 double timeout)
{
    reports = 0;
    got_err = NULL;
    memset(d, 0, sizeof *d);
    d->connect_timeout = d->tls_timeout = timeout;
    struct mh_dial_key key = {.host = host, .port = (uint16_t)port, .tls = tls};
    mh_dial_start(d, dialer, &key, on_dial);
    run_until_report(5);
}

/* A loopback listener on a free port; its port through *port. */
static int listener(int backlog, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, backlog) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        perror("listener");
        exit(2);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) != -1;
}

static void test_plain_connect(void)
{
    int port, lfd = listener(8, &port);
    struct mh_dial d;
    dial(&d, "127.0.0.1", port, NULL, 2);
    CHECK(reports == 1);
    CHECKF(got_err == NULL, "%s", got_err);
    CHECK(d.phase == MH_DIAL_DONE);
    struct mh_transport tp;
    int fd = mh_dial_take(&d, &tp);
    CHECK(fd >= 0 && tp.fd == fd);
    CHECK(mh_transport_write(&tp, "ping", 4) == 4);
    int peer = accept(lfd, NULL, NULL);
    char buf[8] = "";
    CHECK(peer >= 0 && read(peer, buf, sizeof buf) == 4 && memcmp(buf, "ping", 4) == 0);
    mh_dial_cancel(&d); /* taken: nothing left to close */
    CHECK(fd_open(fd));
    mh_transport_close(&tp);
    close(peer);
    close(lfd);
}

static void test_unix_socket(void)
{
    char path[] = "/tmp/mh-dialer-XXXXXX";
    int tmp = mkstemp(path);
    close(tmp);
    unlink(path);
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    snprintf(un.sun_path, sizeof un.sun_path, "%s", path);
    CHECK(bind(lfd, (struct sockaddr *)&un, sizeof un) == 0 && listen(lfd, 4) == 0);
    char host[128];
    snprintf(host, sizeof host, "unix:%s", path);
    struct mh_dial d;
    dial(&d, host, 0, NULL, 2);
    CHECKF(reports == 1 && got_err == NULL, "%s", got_err);
    struct mh_transport tp;
    mh_dial_take(&d, &tp);
    mh_transport_close(&tp);
    close(lfd);
    unlink(path);
}

static void test_refused(void)
{
    int port, lfd = listener(1, &port);
    close(lfd); /* nobody listens on the port now */
    struct mh_dial d;
    dial(&d, "127.0.0.1", port, NULL, 2);
    CHECK(reports == 1);
    CHECK(got_err == mh_dial_err_connect);
    CHECK(d.sys_errno == ECONNREFUSED);
    CHECK(d.phase == MH_DIAL_CONNECTING);
    mh_dial_cancel(&d); /* after a failure: nothing to do */
}

static void test_connect_timeout(void)
{
    /* backlog 0 holds one connection; the SYNs after it are dropped while nobody accepts */
    int port, lfd = listener(0, &port);
    int fill[4];
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(fill[i], (struct sockaddr *)&a, sizeof a);
    }
    usleep(50000);
    struct mh_dial d;
    ev_now_update(loop);
    double t0 = ev_now(loop);
    dial(&d, "127.0.0.1", port, NULL, 0.2);
    ev_now_update(loop);
    CHECK(reports == 1);
    CHECK(got_err == mh_dial_err_timeout);
    CHECK(d.phase == MH_DIAL_CONNECTING);
    CHECKF(ev_now(loop) - t0 >= 0.15, "timed out after %.3f s", ev_now(loop) - t0);
    for (int i = 0; i < 4; i++)
        close(fill[i]);
    close(lfd);
}

/* The scripted peer: accepts one connection and writes `say` (NULL: nothing) on it. */
static int peer_fd = -1;
static const char *peer_says;

static void on_accept(struct ev_loop *l, ev_io *w, int revents)
{
    (void)l;
    (void)revents;
    peer_fd = accept(w->fd, NULL, NULL);
    if (peer_fd >= 0 && peer_says) {
        if (write(peer_fd, peer_says, strlen(peer_says)) < 0)
            perror("peer write");
        close(peer_fd);
        peer_fd = -1;
    }
    ev_io_stop(loop, w);
}

static const struct mh_dial_tls no_verify = {.verify = false, .resume = true};

static void test_tls_failures(void)
{
    int port, lfd = listener(4, &port);
    ev_io acc;
    ev_io_init(&acc, on_accept, lfd, EV_READ);

    /* garbage instead of a ServerHello */
    peer_says = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n";
    ev_io_start(loop, &acc);
    struct mh_dial d;
    dial(&d, "localhost", port, &no_verify, 2);
    CHECK(reports == 1);
    CHECKF(got_err && strncmp(got_err, "tls: ", 5) == 0, "%s", got_err);
    CHECK(d.phase == MH_DIAL_HANDSHAKE);

    /* silence: the handshake's own timeout */
    peer_says = NULL;
    ev_io_start(loop, &acc);
    dial(&d, "127.0.0.1", port, &no_verify, 0.2);
    CHECK(reports == 1);
    CHECK(got_err == mh_dial_err_timeout);
    CHECK(d.phase == MH_DIAL_HANDSHAKE);
    close(peer_fd);

    /* on the caller's socket: a failed handshake leaves it open, the caller's to close */
    peer_says = "not tls at all\r\n";
    ev_io_start(loop, &acc);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    reports = 0;
    memset(&d, 0, sizeof d);
    d.tls_timeout = 2;
    struct mh_dial_key key = {.host = "localhost", .port = (uint16_t)port, .tls = &no_verify};
    mh_dial_handshake(&d, dialer, &key, fd, on_dial);
    run_until_report(5);
    CHECK(reports == 1);
    CHECKF(got_err && strncmp(got_err, "tls: ", 5) == 0, "%s", got_err);
    CHECK(fd_open(fd));
    close(fd);
    close(lfd);
}

/* A CA file that does not load fails the dial in the handshake phase, before any byte is sent. */
static void test_bad_ca(void)
{
    int port, lfd = listener(4, &port);
    const struct mh_dial_tls bad = {.verify = true, .ca = "/nonexistent/ca.pem"};
    struct mh_dial d;
    dial(&d, "127.0.0.1", port, &bad, 2);
    CHECK(reports == 1);
    CHECK_STR(got_err, "tls: cannot load the CA file");
    CHECK(d.phase == MH_DIAL_HANDSHAKE);
    close(lfd);
}

static void test_cancel(void)
{
    int port, lfd = listener(4, &port);
    ev_io acc;
    ev_io_init(&acc, on_accept, lfd, EV_READ);
    peer_says = NULL;
    ev_io_start(loop, &acc);
    struct mh_dial d;
    memset(&d, 0, sizeof d);
    reports = 0;
    d.tls_timeout = 0.1;
    struct mh_dial_key key = {.host = "127.0.0.1", .port = (uint16_t)port, .tls = &no_verify};
    mh_dial_start(&d, dialer, &key, on_dial);
    /* run until the handshake waits for the silent peer */
    for (int i = 0; i < 50 && d.phase != MH_DIAL_HANDSHAKE; i++)
        ev_run(loop, EVRUN_ONCE);
    CHECK(d.phase == MH_DIAL_HANDSHAKE);
    int fd = d._fd;
    mh_dial_cancel(&d);
    CHECK(d.phase == MH_DIAL_IDLE);
    CHECK(!fd_open(fd));
    run_until_report(0.3); /* the handshake timer would have fired by now */
    CHECK(reports == 0);
    close(peer_fd);
    close(lfd);
}

int main(void)
{
    loop = ev_loop_new(EVFLAG_AUTO);
    dialer = mh_dialer_new(loop);
    test_plain_connect();
    test_unix_socket();
    test_refused();
    test_connect_timeout();
    test_tls_failures();
    test_bad_ca();
    test_cancel();
    mh_dialer_free(dialer);
    ev_loop_destroy(loop);
    return unit_report();
}
