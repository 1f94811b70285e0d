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
    const char *e = open_first(&ls[0], addr, backlog, n > 1 ? MH_BIND_LEADS : MH_BIND_ALONE, &ss,
                               err, errlen);
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

/*
 * Out of descriptors: the pending connection stays in the backlog and the
 * listen socket stays readable, so a naive loop spins. Free the reserve fd,
 * accept and close the connection (the client sees a reset instead of a
 * hang), take the reserve back, and pause accepting until a connection of
 * ours closes.
 */
static void shed_on_emfile(struct mh_listener *l, struct mh_acceptor *w)
{
    if (w->reserve_fd >= 0) {
        close(w->reserve_fd);
        int fd = accept(l->fd, NULL, NULL);
        if (fd >= 0)
            close(fd);
        w->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    mh_log(MH_LOG_WARN, "accept on %s: out of file descriptors; pausing accept", l->addr);
    w->pause(w->ud);
}

static void on_accept(struct ev_loop *loop, ev_io *io, int revents)
{
    struct mh_listener *l = io->data;
    struct mh_acceptor *w = l->acceptor;
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
                shed_on_emfile(l, w);
                return;
            }
            mh_log(MH_LOG_ERROR, "accept on %s: %s", l->addr, strerror(errno));
            return;
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
