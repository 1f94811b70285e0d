#include "dialer.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

const char mh_dial_err_timeout[] = "timeout";
const char mh_dial_err_socket[] = "cannot create a socket";
const char mh_dial_err_connect[] = "connect failed";
const char mh_dial_err_nomem[] = "out of memory";

/* A TLS configuration per distinct set of options, made on first use and kept. */
struct tls_cfg {
    struct tls_cfg *next;
    struct mh_client_tls_cfg *cfg;
    bool verify, tls13_only;
    char *cert, *key; /* point into names; "" for none */
    char names[];     /* ca ("" for the system bundle), cert, key: each NUL-terminated */
};

/* The last session per key (a configuration, host, port and server name), offered again. */
struct tls_session {
    struct tls_session *next;
    const struct tls_cfg *cfg;
    uint16_t port;
    void *session;
    char *server_name; /* points into host; "" for the host itself */
    char host[];
};

struct mh_dialer {
    struct ev_loop *loop;
    struct mh_dns *dns;
    struct tls_cfg *cfgs;
    struct tls_session *sessions;
};

struct mh_dialer *mh_dialer_new(struct ev_loop *loop)
{
    struct mh_dialer *dl = calloc(1, sizeof *dl);
    if (!dl)
        return NULL;
    dl->loop = loop;
    if (!(dl->dns = mh_dns_new(loop))) {
        free(dl);
        return NULL;
    }
    return dl;
}

void mh_dialer_free(struct mh_dialer *dl)
{
    if (!dl)
        return;
    mh_dns_free(dl->dns);
    while (dl->sessions) {
        struct tls_session *x = dl->sessions;
        dl->sessions = x->next;
        mh_client_tls_session_free(x->session);
        free(x);
    }
    while (dl->cfgs) {
        struct tls_cfg *c = dl->cfgs;
        dl->cfgs = c->next;
        mh_client_tls_cfg_free(c->cfg);
        free(c);
    }
    free(dl);
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

/*
 * The configuration for o, made once per distinct set. A file that does
 * not load is tried again on the next dial (it may be fixed meanwhile).
 */
static struct tls_cfg *tls_cfg_for(struct mh_dialer *dl, const struct mh_dial_tls *o,
                                   const char **err)
{
    const char *ca = or_empty(o->ca), *cert = or_empty(o->cert), *key = or_empty(o->key);
    for (struct tls_cfg *c = dl->cfgs; c; c = c->next)
        if (c->verify == o->verify && c->tls13_only == o->tls13_only &&
            strcmp(c->names, ca) == 0 && strcmp(c->cert, cert) == 0 && strcmp(c->key, key) == 0)
            return c;
    size_t n = strlen(ca) + 1, nc = strlen(cert) + 1, nk = strlen(key) + 1;
    struct tls_cfg *c = calloc(1, sizeof *c + n + nc + nk);
    if (!c) {
        *err = mh_dial_err_nomem;
        return NULL;
    }
    struct mh_client_tls_opts co = {.ca = o->ca,
                                    .verify = o->verify,
                                    .cert = o->cert,
                                    .key = o->cert ? o->key : NULL,
                                    .tls13_only = o->tls13_only};
    if (!(c->cfg = mh_client_tls_cfg_new(&co, err))) {
        free(c);
        return NULL;
    }
    c->cert = c->names + n;
    c->key = c->cert + nc;
    memcpy(c->names, ca, n);
    memcpy(c->cert, cert, nc);
    memcpy(c->key, key, nk);
    c->verify = o->verify;
    c->tls13_only = o->tls13_only;
    c->next = dl->cfgs;
    dl->cfgs = c;
    return c;
}

/* The saved-session slot of a key (made empty on first use); NULL when out of memory. */
static struct tls_session *session_for(struct mh_dialer *dl, const struct tls_cfg *cfg,
                                       const struct mh_dial_key *k)
{
    const char *sni = or_empty(k->tls->server_name);
    for (struct tls_session *x = dl->sessions; x; x = x->next)
        if (x->cfg == cfg && x->port == k->port && strcmp(x->host, k->host) == 0 &&
            strcmp(x->server_name, sni) == 0)
            return x;
    size_t nh = strlen(k->host) + 1, ns = strlen(sni) + 1;
    struct tls_session *x = calloc(1, sizeof *x + nh + ns);
    if (!x)
        return NULL;
    x->cfg = cfg;
    x->port = k->port;
    memcpy(x->host, k->host, nh);
    x->server_name = x->host + nh;
    memcpy(x->server_name, sni, ns);
    x->next = dl->sessions;
    dl->sessions = x;
    return x;
}

/* ---- the dial ------------------------------------------------------------ */

static void on_io(struct ev_loop *loop, ev_io *w, int revents);
static void on_timer(struct ev_loop *loop, ev_timer *w, int revents);
static void connect_next(struct mh_dial *d);

/* Watchers do not decide how long the loop runs: the worker does (server/worker.c). */
static void stop_watchers(struct mh_dial *d)
{
    ev_io_stop(d->_dialer->loop, &d->_io);
    ev_timer_stop(d->_dialer->loop, &d->_timer);
}

/* Arms the timer for a phase: its own limit (0: none), capped by the deadline. */
static void arm_timer(struct mh_dial *d, double limit)
{
    struct ev_loop *loop = d->_dialer->loop;
    double left = 0;
    if (d->deadline > 0) {
        left = d->deadline - ev_now(loop);
        if (left < 0.001)
            left = 0.001;
    }
    if (limit > 0 && (left == 0 || limit < left))
        left = limit;
    ev_timer_stop(loop, &d->_timer);
    if (left > 0) {
        ev_timer_set(&d->_timer, left, 0.);
        ev_timer_start(loop, &d->_timer);
    }
}

/*
 * Waits for `events` on the dial's socket. The first wait on a socket tells
 * libev the descriptor may be a new file (ev_io_set); later ones change the
 * mask only (ev_io_modify), which costs no epoll_ctl when it is unchanged.
 */
static void wait_io(struct mh_dial *d, int events, bool new_fd)
{
    struct ev_loop *loop = d->_dialer->loop;
    ev_io_stop(loop, &d->_io);
    if (new_fd)
        ev_io_set(&d->_io, d->_fd, events);
    else
        ev_io_modify(&d->_io, events);
    ev_io_start(loop, &d->_io);
}

/* Closes what the dial opened, keeping phase and the error's details. */
static void release(struct mh_dial *d)
{
    d->_active = false;
    stop_watchers(d);
    if (d->phase == MH_DIAL_RESOLVING)
        mh_dns_cancel(&d->_dns);
    if (d->_tls) {
        mh_client_tls_free(d->_tls);
        d->_tls = NULL;
    }
    if (d->_own_fd && d->_fd >= 0)
        close(d->_fd);
    d->_fd = -1;
}

static void fail(struct mh_dial *d, const char *err)
{
    release(d);
    d->_cb(d, err);
}

static void succeed(struct mh_dial *d)
{
    stop_watchers(d);
    d->phase = MH_DIAL_DONE;
    d->_cb(d, NULL);
}

static void handshake_step(struct mh_dial *d, bool new_fd)
{
    const char *err = NULL;
    int rc = mh_client_tls_handshake(d->_tls, &err);
    if (rc == MH_TLS_WANT_READ || rc == MH_TLS_WANT_WRITE) {
        wait_io(d, rc == MH_TLS_WANT_READ ? EV_READ : EV_WRITE, new_fd);
        return;
    }
    if (rc != 0) {
        fail(d, err);
        return;
    }
    d->resumed = mh_client_tls_resumed(d->_tls);
    if (d->_session)
        mh_client_tls_save_session(d->_tls, d->_session);
    succeed(d);
}

/* Starts the handshake on d->_fd; new_fd: the dial's watcher has not watched it yet. */
static void handshake_start(struct mh_dial *d, bool new_fd)
{
    const struct mh_dial_key *k = &d->_key;
    const char *err = NULL;
    d->phase = MH_DIAL_HANDSHAKE;
    struct tls_cfg *cfg = tls_cfg_for(d->_dialer, k->tls, &err);
    if (!cfg) {
        fail(d, err);
        return;
    }
    struct tls_session *x = session_for(d->_dialer, cfg, k);
    d->_session = x ? &x->session : NULL;
    const char *name = k->tls->server_name ? k->tls->server_name : k->host;
    if (strncmp(name, "unix:", 5) == 0)
        name = ""; /* a unix socket has no host name to send or check */
    if (!(d->_tls = mh_client_tls_new(cfg->cfg, d->_fd, name,
                                      k->tls->resume && x ? x->session : NULL, &err))) {
        fail(d, err);
        return;
    }
    arm_timer(d, d->tls_timeout);
    handshake_step(d, new_fd);
}

/* The socket connected (or not): the next address, the handshake, or done. */
static void connected(struct mh_dial *d, int e, bool new_fd)
{
    if (e) {
        d->sys_errno = e;
        close(d->_fd);
        d->_fd = -1;
        if (++d->_addr_i < d->_addrs.n) {
            connect_next(d);
            return;
        }
        fail(d, mh_dial_err_connect);
        return;
    }
    if (d->_key.tls)
        handshake_start(d, new_fd);
    else
        succeed(d);
}

static void connect_next(struct mh_dial *d)
{
    const struct sockaddr_storage *sa = &d->_addrs.a[d->_addr_i];
    d->phase = MH_DIAL_CONNECTING;
    d->_fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (d->_fd < 0) {
        d->sys_errno = errno;
        fail(d, mh_dial_err_socket);
        return;
    }
    if (sa->ss_family != AF_UNIX) {
        int one = 1;
        setsockopt(d->_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (connect(d->_fd, (const struct sockaddr *)sa, d->_addrs.len[d->_addr_i]) == 0) {
        connected(d, 0, true);
        return;
    }
    if (errno != EINPROGRESS && errno != EAGAIN) {
        connected(d, errno, true);
        return;
    }
    arm_timer(d, d->connect_timeout);
    wait_io(d, EV_WRITE, true);
}

static void on_resolved(struct mh_dns_query *q, const char *err, const struct mh_dns_addrs *a)
{
    struct mh_dial *d = (struct mh_dial *)((char *)q - offsetof(struct mh_dial, _dns));
    if (err) {
        fail(d, err);
        return;
    }
    d->_addrs = *a;
    d->_addr_i = 0;
    connect_next(d);
}

static void begin(struct mh_dial *d, struct mh_dialer *dl, const struct mh_dial_key *key,
                  mh_dial_cb cb)
{
    d->_dialer = dl;
    d->_key = *key;
    if (key->tls) {
        d->_key_tls = *key->tls;
        d->_key.tls = &d->_key_tls;
    }
    d->_cb = cb;
    d->_active = true;
    d->_fd = -1;
    d->_tls = NULL;
    d->_session = NULL;
    d->_dns._job = NULL;
    d->sys_errno = 0;
    d->resumed = false;
    ev_init(&d->_io, on_io);
    ev_init(&d->_timer, on_timer);
}

/* A "unix:/path" host: its one address, or false when the path does not fit. */
static bool unix_addr(struct mh_dial *d, const char *path)
{
    struct sockaddr_un *un = (struct sockaddr_un *)&d->_addrs.a[0];
    size_t n = strlen(path);
    if (n >= sizeof un->sun_path)
        return false;
    memset(un, 0, sizeof *un);
    un->sun_family = AF_UNIX;
    memcpy(un->sun_path, path, n);
    d->_addrs.len[0] = (socklen_t)sizeof *un;
    d->_addrs.n = 1;
    d->_addr_i = 0;
    return true;
}

void mh_dial_start(struct mh_dial *d, struct mh_dialer *dl, const struct mh_dial_key *key,
                   mh_dial_cb cb)
{
    begin(d, dl, key, cb);
    d->_own_fd = true;
    if (strncmp(key->host, "unix:", 5) == 0) {
        d->phase = MH_DIAL_CONNECTING;
        if (!unix_addr(d, key->host + 5)) {
            d->sys_errno = ENAMETOOLONG;
            fail(d, mh_dial_err_connect);
            return;
        }
        connect_next(d);
        return;
    }
    d->phase = MH_DIAL_RESOLVING;
    d->_dns.cb = on_resolved;
    const char *err = NULL;
    int rc = mh_dns_resolve(dl->dns, key->host, key->port, &d->_dns, &d->_addrs, &err);
    if (rc < 0) {
        fail(d, err);
    } else if (rc == 0) {
        arm_timer(d, 0); /* the deadline only */
    } else {
        d->_addr_i = 0;
        connect_next(d);
    }
}

void mh_dial_handshake(struct mh_dial *d, struct mh_dialer *dl, const struct mh_dial_key *key,
                       int fd, mh_dial_cb cb)
{
    begin(d, dl, key, cb);
    d->_own_fd = false;
    d->_fd = fd;
    handshake_start(d, true);
}

int mh_dial_take(struct mh_dial *d, struct mh_transport *tp)
{
    int fd = d->_fd;
    if (d->_tls)
        mh_client_tls_transport(d->_tls, tp, fd); /* the transport owns the session now */
    else
        mh_transport_plain_init(tp, fd);
    d->_tls = NULL;
    d->_fd = -1;
    d->_active = false;
    d->phase = MH_DIAL_IDLE;
    return fd;
}

void mh_dial_cancel(struct mh_dial *d)
{
    if (d->_active)
        release(d);
    d->phase = MH_DIAL_IDLE;
}

static void on_io(struct ev_loop *loop, ev_io *w, int revents)
{
    struct mh_dial *d = (struct mh_dial *)((char *)w - offsetof(struct mh_dial, _io));
    (void)loop;
    (void)revents;
    if (d->phase == MH_DIAL_CONNECTING) {
        int e = 0;
        socklen_t len = sizeof e;
        if (getsockopt(d->_fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
            e = errno;
        ev_io_stop(d->_dialer->loop, &d->_io);
        connected(d, e, false);
    } else if (d->phase == MH_DIAL_HANDSHAKE) {
        handshake_step(d, false);
    }
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct mh_dial *d = (struct mh_dial *)((char *)w - offsetof(struct mh_dial, _timer));
    (void)loop;
    (void)revents;
    fail(d, mh_dial_err_timeout);
}
