#ifndef MH_TLS_H
#define MH_TLS_H
/*
 * Server-side TLS with Mbed TLS 3.6: the listener's configuration over the
 * one TLS transport of tls_conn.h (shared with the client side, client_tls.h).
 *
 * TLS 1.3 (preferred) and 1.2 (unless certs->tls13_only), ECDHE over X25519,
 * P-256 or P-384 with AEAD suites (AES-GCM, ChaCha20-Poly1305), ALPN "h2"
 * then "http/1.1" (only "http/1.1" when certs->http2 is off), session tickets
 * on both versions (key rotated hourly), renegotiation refused. With
 * certs->client_ca the server asks for a client certificate (mutual TLS):
 * required, or optional (none is fine; one that does not verify is not). Several certificates
 * are chosen by SNI against their DNS names (SAN dNSName entries and the
 * subject CN; "*.example.com" matches one label); the first is the default.
 *
 * A server (struct mh_tls_server) is the stable handle a listener holds. It
 * points at a refcounted configuration (mbedtls_ssl_config, certificates,
 * keys, entropy/DRBG, ticket keys) built once per worker; each connection
 * holds the configuration it started with, so mh_tls_reload can swap in new
 * certificates for new connections while open ones keep theirs. The
 * per-connection mbedtls_ssl_context objects are pooled on their
 * configuration.
 */
#include "tls_certs.h"
#include "transport.h"

struct mh_tls_server;

/* Loads the certificates and keys. Returns NULL with a message in err. */
struct mh_tls_server *mh_tls_server_new(const struct mh_tls_certs *certs, char *err, size_t errlen);
void mh_tls_server_ref(struct mh_tls_server *s);
/* Drops a reference; connections still open keep their configuration alive. */
void mh_tls_server_unref(struct mh_tls_server *s);
/* Frees the pooled idle TLS contexts past the first `keep` (memory back after a spike). */
void mh_tls_server_trim(struct mh_tls_server *s, size_t keep);

/*
 * Builds a configuration from `certs` and makes it the one new connections
 * get; connections already open go on with the old one, freed when the last
 * of them closes. On error (unreadable file, key not matching its
 * certificate...) nothing changes: returns -1 with a message in err.
 */
int mh_tls_reload(struct mh_tls_server *s, const struct mh_tls_certs *certs, char *err,
                  size_t errlen);

/* Starts a TLS session on an accepted socket: fills in t. Returns -1 (fd untouched) on OOM. */
int mh_tls_accept(struct mh_tls_server *s, struct mh_transport *t, int fd);

/*
 * mh_tls_reload for a set: servers[i] (NULL: skipped; one listed twice
 * reloads once) from certs[i], all of them or, on error, none. 0, or -1
 * with err.
 */
int mh_tls_reload_all(struct mh_tls_server *const *servers, const struct mh_tls_certs *const *certs,
                      size_t n, char *err, size_t errlen);

struct mbedtls_x509_crt;

/* What a handler sees of its TLS connection (req:tls()). */
struct mh_tls_info {
    const char *version; /* "TLSv1.3", "TLSv1.2" */
    const char *cipher;  /* the suite's IANA name */
    const char *alpn;    /* NULL: none agreed */
    const char *sni;     /* the server name the client asked for; NULL: none */
    /* The client's certificate, verified against client_ca; NULL: none asked or sent. */
    const struct mbedtls_x509_crt *client_cert;
};

/*
 * Fills in info for a TLS transport whose handshake is done; false on plain
 * TCP. The pointers are valid until the next read or write on t.
 */
bool mh_tls_info(const struct mh_transport *t, struct mh_tls_info *info);

/* The subject CN of the default certificate new connections get (for tests and logs). */
const char *mh_tls_server_default_name(const struct mh_tls_server *s, char *buf, size_t len);

#endif
