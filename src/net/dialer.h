#ifndef MH_NET_DIALER_H
#define MH_NET_DIALER_H
/*
 * Outbound connections for every client (fetch's pool, http.tcp() and the
 * Redis and PostgreSQL clients over it): one dial resolves the host
 * (dns.h), connects to its addresses in turn, and does the TLS handshake
 * (client_tls.h) offering the session saved for the same key. A key is what
 * makes two connections interchangeable: host, port and the TLS options
 * (CA file, verify, client certificate and key, server name, min_version).
 * The server name sent (SNI) and checked is the key's own, never read back
 * from a pool's name.
 *
 * A dialer (struct mh_dialer) is what the dials of one owner share: the
 * resolver, one TLS configuration per set of options, the saved sessions.
 * A dial (struct mh_dial) is embedded in its caller; its watchers are its
 * own while it runs. It reports once through its callback, which may run
 * inside mh_dial_start when the answer is known at once (a numeric host
 * that connects at once, a failure). Nothing here calls into Lua.
 */
#include <ev.h>
#include <stdbool.h>
#include <stdint.h>

#include "client_tls.h"
#include "dns.h"
#include "transport.h"

/* The dialer's own errors (compared by identity); the rest are dns.h's and client_tls.h's. */
extern const char mh_dial_err_timeout[]; /* "timeout": see mh_dial.phase for which one */
extern const char mh_dial_err_socket[];  /* "cannot create a socket": see sys_errno */
extern const char mh_dial_err_connect[]; /* "connect failed": see sys_errno */
extern const char mh_dial_err_nomem[];   /* "out of memory" */

/* The TLS part of a key. Strings are NULL for none; they must live while a dial uses them. */
struct mh_dial_tls {
    const char *ca;          /* PEM CA file; NULL: the system bundle */
    const char *cert, *key;  /* client certificate and its key (mutual TLS) */
    const char *server_name; /* SNI and the name checked; NULL: the key's host */
    bool verify;
    bool tls13_only; /* min_version = "1.3" */
    bool resume;     /* offer the session saved for the key */
};

struct mh_dial_key {
    const char *host; /* name, numeric address, or "unix:/path" (port unused) */
    uint16_t port;
    const struct mh_dial_tls *tls; /* NULL: plain TCP */
};

enum mh_dial_phase {
    MH_DIAL_IDLE,
    MH_DIAL_RESOLVING,
    MH_DIAL_CONNECTING,
    MH_DIAL_HANDSHAKE,
    MH_DIAL_DONE,
};

struct mh_dial;
/* err is NULL when connected (take it with mh_dial_take), else why not; phase says where. */
typedef void (*mh_dial_cb)(struct mh_dial *d, const char *err);

struct mh_dial {
    /* Set by the caller before mh_dial_start. */
    double connect_timeout; /* per address tried, seconds (0: none) */
    double tls_timeout;     /* the handshake (0: none) */
    double deadline;        /* ev_now() time that caps every phase (0: none) */

    /* Results. */
    enum mh_dial_phase phase; /* where the dial is, or where it failed */
    int sys_errno;            /* with mh_dial_err_socket / _connect */
    bool resumed;             /* the handshake resumed the saved session */

    struct mh_dialer *_dialer;
    struct mh_dial_key _key;
    struct mh_dial_tls _key_tls; /* _key.tls points here */
    mh_dial_cb _cb;
    bool _active; /* started, and not failed, cancelled or taken */
    int _fd;
    bool _own_fd; /* the dial made the socket (not mh_dial_handshake's) */
    ev_io _io;
    ev_timer _timer;
    struct mh_dns_query _dns;
    struct mh_dns_addrs _addrs;
    int _addr_i;
    struct mh_client_tls *_tls;
    void **_session; /* the key's saved-session slot */
};

struct mh_dialer *mh_dialer_new(struct ev_loop *loop);
/* After every dial of it ended or was cancelled. */
void mh_dialer_free(struct mh_dialer *dl);

/* Connects to key (copied; its strings must live until the callback). */
void mh_dial_start(struct mh_dial *d, struct mh_dialer *dl, const struct mh_dial_key *key,
                   mh_dial_cb cb);
/*
 * The TLS handshake alone on fd, connected and owned by the caller (a
 * socket that speaks plain first, as PostgreSQL's SSLRequest asks).
 * key->tls must be set; on failure fd stays open, the caller's to close.
 */
void mh_dial_handshake(struct mh_dial *d, struct mh_dialer *dl, const struct mh_dial_key *key,
                       int fd, mh_dial_cb cb);
/*
 * After a successful dial: makes the connection the byte stream under tp
 * (plain TCP or TLS; mh_transport_close closes it from then on) and returns
 * its fd. The dial is idle again.
 */
int mh_dial_take(struct mh_dial *d, struct mh_transport *tp);
/*
 * Stops a dial in progress (no callback) and closes what it opened;
 * harmless when it is over (failed or taken) or never started (zeroed).
 */
void mh_dial_cancel(struct mh_dial *d);

#endif
