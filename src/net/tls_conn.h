#ifndef MH_TLS_CONN_H
#define MH_TLS_CONN_H
/*
 * One TLS connection over a non-blocking socket, either side: the one
 * implementation of net/transport.h over Mbed TLS. The server (tls.c, for
 * listeners) and the client (client_tls.c, for fetch, http.tcp() and the
 * Redis/PostgreSQL clients) differ only in how they configure the
 * mbedtls_ssl_context and in what they check once the handshake is over;
 * they embed this struct first in their own and pass hooks for the rest.
 * Everything that touches the socket under TLS is here: the BIO (with a
 * small read-ahead buffer), the handshake loop, the mapping of Mbed TLS
 * results to read(2)/send(2)'s, and the retry rule of transport.h for
 * writes (after MBEDTLS_ERR_SSL_WANT_WRITE, the next write names exactly
 * the bytes of the record Mbed TLS holds).
 */
#include "transport.h"

#include <mbedtls/ssl.h>

/* Small reads from the socket go through this buffer: one recv(2) instead of two per record. */
#define MH_TLS_READ_AHEAD 4096

struct mh_tls_conn;

/* What differs between the sides; called by this module only. */
struct mh_tls_conn_hooks {
    /*
     * The handshake just succeeded as far as Mbed TLS is concerned: 0 to
     * accept it, or an mbedTLS error code for a check Mbed TLS does not make
     * (an optional client certificate that does not verify, an IP address
     * the server's certificate does not name). NULL: accepted.
     */
    int (*handshake_done)(struct mh_tls_conn *c);
    /* A TLS 1.3 NewSessionTicket arrived (client side, at any time): keep the session. */
    void (*ticket)(struct mh_tls_conn *c);
    /* The transport closed the socket: free (or pool) the connection. */
    void (*release)(struct mh_tls_conn *c);
};

struct mh_tls_conn {
    mbedtls_ssl_context ssl; /* set up by the owner from its configuration */
    const struct mh_tls_conn_hooks *hooks;
    int fd;
    int sys_errno;        /* errno of a failed send/recv, for the caller */
    size_t write_pending; /* length of a record mbedTLS built but could not send yet */
    bool handshake_done;
    bool shut;
    bool failed; /* a protocol error was logged */
    unsigned long bytes_in;
    unsigned char first_byte;
    size_t ra_off, ra_len;
    unsigned char ra[MH_TLS_READ_AHEAD];
};

/* Starts c on fd over its owner's ssl (set up, or reset): BIO, counters, hooks. */
void mh_tls_conn_start(struct mh_tls_conn *c, const struct mh_tls_conn_hooks *hooks, int fd);

/*
 * Drives the handshake: 0 when it is over (and hooks->handshake_done agreed),
 * else the mbedTLS result (MBEDTLS_ERR_SSL_WANT_READ / _WANT_WRITE: call
 * again when the socket is ready).
 */
int mh_tls_conn_handshake(struct mh_tls_conn *c);

/*
 * Makes c the byte stream under t. The handshake is finished first if it is
 * not (a server connection starts here). t owns c from here on:
 * mh_transport_close closes the socket and calls hooks->release.
 */
void mh_tls_conn_transport(struct mh_tls_conn *c, struct mh_transport *t);

/* The TLS connection under t; NULL when t is not TLS (or closed). */
struct mh_tls_conn *mh_tls_conn_of(const struct mh_transport *t);

#endif
