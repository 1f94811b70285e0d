#define _GNU_SOURCE /* accept4 */
#include "listener.h"

#include "log.h"
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *mh_listen_addr_parse(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
    char host[256];
    const char *port;
    memset(ss, 0, sizeof *ss);
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':' || (size_t)(close - s - 1) >= sizeof host)
            return "expected [ipv6]:port";
        memcpy(host, s + 1, (size_t)(close - s - 1));
        host[close - s - 1] = 0;
        port = close + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon) {
            host[0] = 0;
            port = s;
        } else {
            if ((size_t)(colon - s) >= sizeof host)
                return "host too long";
            memcpy(host, s, (size_t)(colon - s));
            host[colon - s] = 0;
            port = colon + 1;
        }
    }
    char *end;
    long p = strtol(port, &end, 10);
    if (!*port || *end || p < 0 || p > 65535)
        return "bad port";
    if (host[0] == 0 || strcmp(host, "*") == 0) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        a->sin6_port = htons((uint16_t)p);
        *len = sizeof *a;
        return NULL;
    }
    if (strcmp(host, "localhost") == 0)
        strcpy(host, "127.0.0.1");
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)p);
        *len = sizeof *a4;
        return NULL;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)p);
        *len = sizeof *a6;
        return NULL;
    }
    return "host must be an IP address, localhost or empty";
}

/*
 * How a socket joins the port. MH_BIND_ALONE: bound without SO_REUSEPORT,
 * so a port any other socket holds is EADDRINUSE. MH_BIND_LEADS: the same
 * bind, then SO_REUSEPORT before listen(), so the members bound after it
 * share the port (the kernel checks both flags at the members' bind and
 * forms the group at listen). MH_BIND_JOINS: SO_REUSEPORT before bind, into
 * the leader's group.
 */
enum bind_mode { MH_BIND_ALONE, MH_BIND_LEADS, MH_BIND_JOINS };

static int open_socket(struct sockaddr_storage *ss, socklen_t len, int backlog, enum bind_mode mode)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1, zero = 0;
    /*
     * SO_REUSEADDR only lets us bind over connections of a previous run still
     * in TIME_WAIT. SO_REUSEPORT is never set before the first bind of a
     * port: with it any process of the same user could bind the port too and
     * silently take part of the connections. The leader's plain bind is the
     * probe that fails on a busy port; only then does the port open to our
     * own members (mh_listener_open_set).
     */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ss->ss_family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
        if (IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr))
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    }
    if ((mode == MH_BIND_JOINS && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) ||
        bind(fd, (struct sockaddr *)ss, len) < 0 ||
        (mode == MH_BIND_LEADS && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) < 0) ||
        listen(fd, backlog) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Opens the first (or only) socket of addr; *ss gets the address it bound. */
static const char *open_first(struct mh_listener *l, const char *addr, int backlog,
                              enum bind_mode mode, struct sockaddr_storage *ss, char *err,
                              size_t errlen)
{
    socklen_t len;
    const char *perr = mh_listen_addr_parse(addr, ss, &len);
    memset(l, 0, sizeof *l);
    l->fd = -1;
    if (perr) {
        snprintf(err, errlen, "listen \"%s\": %s", addr, perr);
        return "bad listen address";
    }
    int fd = open_socket(ss, len, backlog, mode);
    if (fd < 0 && errno == EAFNOSUPPORT && ss->ss_family == AF_INET6) {
        /* No IPv6 on this host: fall back to IPv4 any-address. */
        struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
        uint16_t port = ((struct sockaddr_in6 *)ss)->sin6_port;
        memset(ss, 0, sizeof *ss);
        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_ANY);
        a4->sin_port = port;
        fd = open_socket(ss, sizeof *a4, backlog, mode);
    }
    if (fd < 0 && errno == EADDRINUSE) {
        snprintf(err, errlen,
                 "listen \"%s\": address already in use (another process listens there)", addr);
        return "address in use";
    }
    if (fd < 0) {
        snprintf(err, errlen, "listen \"%s\": %s", addr, strerror(errno));
        return "cannot listen";
    }
    l->fd = fd;
    l->addr = strdup(addr);
    return NULL;
}

const char *mh_listener_open(struct mh_listener *l, const char *addr, int backlog, char *err,
                             size_t errlen)
{
    struct sockaddr_storage ss;
    return open_first(l, addr, backlog, MH_BIND_ALONE, &ss, err, errlen);
}

const char *mh_listener_open_set(struct mh_listener *ls, size_t n, const char *addr, int backlog,
                                 char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    const char *e =
        open_first(&ls[0], addr, backlog, n > 1 ? MH_BIND_LEADS : MH_BIND_ALONE, &ss, err, errlen);
    if (e)
        return e;
    /* The leader's own address: with port 0 the kernel chose one, which the members take. */
    socklen_t len = sizeof ss;
    if (n > 1 && getsockname(ls[0].fd, (struct sockaddr *)&ss, &len) < 0) {
        snprintf(err, errlen, "listen \"%s\": getsockname: %s", addr, strerror(errno));
        mh_listener_close(&ls[0]);
        return "cannot listen";
    }
    for (size_t i = 1; i < n; i++) {
        int fd = open_socket(&ss, len, backlog, MH_BIND_JOINS);
        if (fd < 0) {
            snprintf(err, errlen, "listen \"%s\": socket %zu of %zu (SO_REUSEPORT): %s", addr,
                     i + 1, n, strerror(errno));
            while (i > 0)
                mh_listener_close(&ls[--i]);
            return "cannot listen";
        }
        mh_listener_adopt(&ls[i], fd, addr);
    }
    return NULL;
}

void mh_listener_adopt(struct mh_listener *l, int fd, const char *addr)
{
    memset(l, 0, sizeof *l);
    l->fd = fd;
    l->addr = strdup(addr);
}

void mh_listener_close(struct mh_listener *l)
{
    if (l->acceptor)
        ev_io_stop(l->acceptor->loop, &l->io);
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
    if (l->tls) /* open connections keep their TLS configuration */
        mh_tls_server_unref(l->tls);
    l->tls = NULL;
    free(l->addr);
    l->addr = NULL;
}

int mh_listener_port(const struct mh_listener *l)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

int mh_acceptor_headroom(const struct mh_acceptor *a)
{
    int h = a->fd_limit / 32;
    return h < 8 ? 8 : h > 128 ? 128 : h;
}

/*
 * Answers a connection we cannot serve and closes it. A plain listener's
 * client gets a 503 (HTTP/1.1: an h2c client reads a framing error, which
 * still tells it to go); a TLS client gets a close without a handshake,
 * as there is nothing to answer it with. What the client already sent is
 * read first and the write side shut before close: close() with unread
 * bytes sends a reset, which can discard the 503 before the client reads
 * it. A request that arrives later still meets a reset, after the 503.
 */
static void read_what_came(int fd)
{
    char sink[4096];
    for (int i = 0; i < 16; i++)
        if (recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0)
            return;
}

static void shed(struct mh_listener *l, int fd)
{
    read_what_came(fd);
    const struct mh_acceptor *a = l->acceptor;
    if (!l->tls && a->shed_response &&
        send(fd, a->shed_response, a->shed_len, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
        shutdown(fd, SHUT_WR);
    read_what_came(fd);
    close(fd);
}

/*
 * An episode ends at a timer tick that finds no shed since the one before:
 * then its counts go to the log, once, instead of a line per connection.
 */
static void on_episode_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct mh_acceptor *a = t->data;
    unsigned long shed_total = a->_shed_headroom + a->_shed_emfile;
    (void)revents;
    if (shed_total != a->_shed_seen) {
        a->_shed_seen = shed_total;
        return;
    }
    ev_timer_stop(loop, t);
    mh_log(MH_LOG_INFO,
           "accept: file descriptors available again after %.1f s; %lu connection(s) answered 503 "
           "(%lu near the limit of %d, %lu past it)",
           ev_now(loop) - a->_episode_start - 1.0, shed_total, a->_shed_headroom, a->fd_limit,
           a->_shed_emfile);
    a->_in_episode = false;
    a->_shed_headroom = a->_shed_emfile = a->_shed_seen = 0;
}

static void count_shed(struct mh_listener *l, struct mh_acceptor *a, bool emfile)
{
    if (emfile)
        a->_shed_emfile++;
    else
        a->_shed_headroom++;
    if (a->_in_episode)
        return;
    a->_in_episode = true;
    a->_episode_start = ev_now(a->loop);
    mh_log(MH_LOG_WARN,
           "accept on %s: out of file descriptors (limit %d, the last %d kept for handlers); "
           "answering new connections 503 until some close",
           l->addr, a->fd_limit, mh_acceptor_headroom(a));
    ev_timer_init(&a->_episode_timer, on_episode_tick, 1.0, 1.0);
    a->_episode_timer.data = a;
    ev_timer_start(a->loop, &a->_episode_timer);
}

/*
 * Out of descriptors with connections waiting (libev's "special problem of
 * accept()ing when you can't"): the listen socket stays readable, so a loop
 * that does not take them spins. Give up the reserve descriptor, take one
 * connection on it, answer it, take the reserve back. Returns 1 when it
 * did, 0 when no connection was waiting (accept() fails with EMFILE before
 * it looks at the queue), -1 when there is no reserve (someone took its
 * number): then accepting pauses until a connection of ours closes.
 */
static int shed_on_emfile(struct mh_listener *l, struct mh_acceptor *a)
{
    if (a->reserve_fd < 0 && (a->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    close(a->reserve_fd);
    int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0) {
        shed(l, fd);
        count_shed(l, a, true);
    }
    a->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return a->reserve_fd < 0 ? -1 : fd >= 0;
}

static void on_accept(struct ev_loop *loop, ev_io *io, int revents)
{
    struct mh_listener *l = io->data;
    struct mh_acceptor *w = l->acceptor;
    int last_served = w->fd_limit > 0 ? w->fd_limit - mh_acceptor_headroom(w) : -1;
    /* A bounded batch keeps one busy listener from starving the loop. */
    for (int i = 0; i < 64; i++) {
        if (!w->may_accept(w->ud)) {
            w->pause(w->ud);
            return;
        }
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int fd = accept4(l->fd, (struct sockaddr *)&peer, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            if (errno == EMFILE || errno == ENFILE) {
                int shed_one = shed_on_emfile(l, w);
                if (shed_one > 0)
                    continue;
                if (shed_one < 0) {
                    mh_log(MH_LOG_WARN,
                           "accept on %s: out of file descriptors and no reserve; "
                           "pausing accept until a connection closes",
                           l->addr);
                    w->pause(w->ud);
                }
                return;
            }
            mh_log(MH_LOG_ERROR, "accept on %s: %s", l->addr, strerror(errno));
            return;
        }
        /*
         * A descriptor is the lowest number free, so this one past the line
         * means at most headroom are left: the handlers' files and upstream
         * sockets would fail mid-request. Serve no connection that way.
         */
        if (last_served >= 0 && fd >= last_served) {
            shed(l, fd);
            count_shed(l, w, false);
            continue;
        }
        if (w->tcp_nodelay) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        if (w->on_accept(w->ud, l, fd, &peer, plen) < 0)
            close(fd);
    }
    (void)loop;
    (void)revents;
}

void mh_listener_start(struct mh_listener *l, struct mh_acceptor *w)
{
    l->acceptor = w;
    ev_io_init(&l->io, on_accept, l->fd, EV_READ);
    l->io.data = l;
    l->paused = false;
    ev_io_start(w->loop, &l->io);
}

void mh_listener_pause(struct mh_listener *l)
{
    if (!l->paused && l->acceptor) {
        ev_io_stop(l->acceptor->loop, &l->io);
        l->paused = true;
    }
}

void mh_acceptor_stop(struct mh_acceptor *a)
{
    if (a->_in_episode)
        ev_timer_stop(a->loop, &a->_episode_timer);
    a->_in_episode = false;
}

void mh_listener_resume(struct mh_listener *l)
{
    if (l->paused && l->acceptor && l->fd >= 0) {
        ev_io_start(l->acceptor->loop, &l->io);
        l->paused = false;
    }
}

int mh_listener_tls_init(struct mh_listener *ls, size_t n, const struct mh_tls_certs *const *certs,
                         const struct mh_tls_certs *shared_certs, char *err, size_t errlen)
{
    struct mh_tls_server *shared = NULL;
    for (size_t i = 0; i < n; i++) {
        struct mh_listener *l = &ls[i];
        if (!certs[i])
            continue;
        if (certs[i] == shared_certs && shared) {
            mh_tls_server_ref(shared);
            l->tls = shared;
            continue;
        }
        if (!(l->tls = mh_tls_server_new(certs[i], err, errlen)))
            return -1;
        if (certs[i] == shared_certs)
            shared = l->tls;
    }
    return 0;
}

int mh_listener_tls_reload(struct mh_listener *ls, size_t n,
                           const struct mh_tls_certs *const *certs, char *err, size_t errlen)
{
    struct mh_tls_server *servers[n > 0 ? n : 1];
    for (size_t i = 0; i < n; i++) {
        servers[i] = ls[i].tls;
        if (servers[i] && !certs[i]) {
            snprintf(err, errlen, "tls: listener %s lost its certificates", ls[i].addr);
            return -1;
        }
    }
    return mh_tls_reload_all(servers, certs, n, err, errlen);
}
