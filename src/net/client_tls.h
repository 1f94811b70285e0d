#ifndef MH_CLIENT_TLS_H
#define MH_CLIENT_TLS_H
/*
 * The client side of TLS (Mbed TLS 3.6: 1.3 preferred, 1.2 accepted) over a
 * non-blocking socket, for every outbound user: fetch's pool, http.tcp()
 * and through it the Redis and PostgreSQL clients. The handshake is driven
 * here (the caller turns MH_TLS_WANT_READ / MH_TLS_WANT_WRITE into watcher
 * interest and calls again); then the connection becomes the same TLS
 * transport the server uses (tls_conn.h). Certificates are verified against
 * the system bundle or a configured CA file, with SNI and a hostname check
 * (IP-address hosts against iPAddress names); sessions can be saved per host
 * and offered again for resumption.
 */
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "transport.h"

#define MH_TLS_WANT_READ  (-1)
#define MH_TLS_WANT_WRITE (-2)
#define MH_TLS_ERROR      (-3)

#define MH_TLS_SYSTEM_CA "/etc/ssl/certs/ca-certificates.crt"

/* The errors, one constant each (compared by identity, shown to Lua as they are). */
extern const char mh_tls_err_nomem[];         /* "tls: out of memory" */
extern const char mh_tls_err_seed[];          /* "tls: cannot seed the random generator" */
extern const char mh_tls_err_config[];        /* "tls: cannot set up a configuration" */
extern const char mh_tls_err_session[];       /* "tls: cannot set up a session" */
extern const char mh_tls_err_handshake[];     /* "tls: handshake failed" */
extern const char mh_tls_err_alert[];         /* "tls: the server sent a fatal alert" */
extern const char mh_tls_err_closed[];        /* "tls: connection closed during the handshake" */
extern const char mh_tls_err_verify[];        /* "tls: certificate verification failed" */
extern const char mh_tls_err_revoked[];       /* "tls: certificate revoked" */
extern const char mh_tls_err_unknown_ca[];    /* "tls: certificate signed by unknown authority" */
extern const char mh_tls_err_hostname[];      /* "tls: certificate hostname mismatch" */
extern const char mh_tls_err_not_yet_valid[]; /* "tls: certificate not yet valid" */
extern const char mh_tls_err_expired[];       /* "tls: certificate expired" */

struct mh_client_tls_cfg;
struct mh_client_tls;

/* What a configuration is made from. */
struct mh_client_tls_opts {
    const char *ca;   /* PEM CA file; NULL: the system bundle */
    bool verify;      /* check the server's certificate and name */
    const char *cert; /* PEM certificate (and chain) to present; NULL: none (then key is NULL) */
    const char *key;  /* its PEM private key */
    bool tls13_only;  /* min_version = "1.3": refuse a server that offers only TLS 1.2 */
};

/*
 * A shared configuration; NULL with *err set when the CA file, the client
 * certificate or its key cannot be loaded (or do not match).
 */
struct mh_client_tls_cfg *mh_client_tls_cfg_new(const struct mh_client_tls_opts *o,
                                                const char **err);
void mh_client_tls_cfg_free(struct mh_client_tls_cfg *cfg);

/* A session on fd for `hostname`, offering `session` (from save_session) if not NULL. */
struct mh_client_tls *mh_client_tls_new(struct mh_client_tls_cfg *cfg, int fd, const char *hostname,
                                        const void *session, const char **err);
void mh_client_tls_free(struct mh_client_tls *t);

/* 0 when done, MH_TLS_WANT_*, or MH_TLS_ERROR with the reason in *err. */
int mh_client_tls_handshake(struct mh_client_tls *t, const char **err);
/* Whether the finished handshake resumed the offered session. */
bool mh_client_tls_resumed(const struct mh_client_tls *t);
/*
 * After the handshake: makes the session the byte stream under tp (fd is
 * the one t was made on), the TLS transport of tls_conn.h. The transport
 * owns t from here: mh_transport_close frees it and closes the socket.
 */
void mh_client_tls_transport(struct mh_client_tls *t, struct mh_transport *tp, int fd);

/*
 * Saves the session for resumption into *slot (allocated once, reused; the
 * holder frees it with mh_client_tls_session_free). The connection keeps a
 * reference to it: TLS 1.3 tickets, which come after the handshake, are put
 * there as they arrive, even after the holder let go of it.
 */
void mh_client_tls_save_session(struct mh_client_tls *t, void **slot);
void mh_client_tls_session_free(void *session);

#endif
