#include "client_tls.h"

#include "tls_conn.h"
#include "tls_init.h"
#include "transport.h"

#include <arpa/inet.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h> /* MBEDTLS_ERR_NET_*: what tls_conn.c's BIO returns */
#include <mbedtls/oid.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
#include <stdlib.h>
#include <string.h>

const char mh_tls_err_nomem[] = "tls: out of memory";
const char mh_tls_err_seed[] = "tls: cannot seed the random generator";
const char mh_tls_err_config[] = "tls: cannot set up a configuration";
const char mh_tls_err_session[] = "tls: cannot set up a session";
const char mh_tls_err_handshake[] = "tls: handshake failed";
const char mh_tls_err_alert[] = "tls: the server sent a fatal alert";
const char mh_tls_err_closed[] = "tls: connection closed during the handshake";
const char mh_tls_err_verify[] = "tls: certificate verification failed";
const char mh_tls_err_revoked[] = "tls: certificate revoked";
const char mh_tls_err_unknown_ca[] = "tls: certificate signed by unknown authority";
const char mh_tls_err_hostname[] = "tls: certificate hostname mismatch";
const char mh_tls_err_not_yet_valid[] = "tls: certificate not yet valid";
const char mh_tls_err_expired[] = "tls: certificate expired";

struct mh_client_tls_cfg {
    mbedtls_ssl_config conf;
    mbedtls_x509_crt ca;
    mbedtls_x509_crt own; /* the client certificate, if any (mutual TLS) */
    mbedtls_pk_context own_key;
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    bool verify;
};

/*
 * A saved session, shared by its holder (a pool's host, a Lua socket key)
 * and the connections that may renew it: a TLS 1.3 server sends its tickets
 * after the handshake, so they reach the box through the transport's reads.
 */
struct session_box {
    unsigned refs;
    bool set; /* s holds a session that can be offered */
    mbedtls_ssl_session s;
};

/* A client connection: the shared TLS transport (first) and what the client's side adds. */
struct mh_client_tls {
    struct mh_tls_conn c;
    struct session_box *box; /* where new tickets go; NULL until save_session */
    bool offered, resumed;
    bool cert_seen; /* the server sent a certificate: a full handshake */
    bool verify;
    bool ip_mismatch; /* the handshake failed for want of the address in the certificate */
    /* an IP-address host: checked against the certificate's iPAddress names */
    unsigned char ip[16];
    size_t ip_len; /* 4, 16, or 0 for a DNS name */
};

/* Loads the certificate the client presents when a server asks (mutual TLS). */
static const char *load_own_cert(struct mh_client_tls_cfg *c, const char *cert, const char *key)
{
    if (mbedtls_x509_crt_parse_file(&c->own, cert) != 0)
        return "tls: cannot load the client certificate";
    if (mbedtls_pk_parse_keyfile(&c->own_key, key, NULL, mbedtls_ctr_drbg_random, &c->drbg) != 0)
        return "tls: cannot load the client key";
    if (mbedtls_pk_check_pair(&c->own.pk, &c->own_key, mbedtls_ctr_drbg_random, &c->drbg) != 0)
        return "tls: client key does not match its certificate";
    if (mbedtls_ssl_conf_own_cert(&c->conf, &c->own, &c->own_key) != 0)
        return mh_tls_err_config;
    return NULL;
}

struct mh_client_tls_cfg *mh_client_tls_cfg_new(const struct mh_client_tls_opts *o,
                                                const char **err)
{
    const char *ca_file = o->ca;
    bool verify = o->verify;
    struct mh_client_tls_cfg *c = calloc(1, sizeof *c);
    if (!c) {
        *err = mh_tls_err_nomem;
        return NULL;
    }
    if (mh_tls_crypto_init() != 0) {
        free(c);
        *err = mh_tls_err_seed;
        return NULL;
    }
    mbedtls_ssl_config_init(&c->conf);
    mbedtls_x509_crt_init(&c->ca);
    mbedtls_x509_crt_init(&c->own);
    mbedtls_pk_init(&c->own_key);
    mbedtls_entropy_init(&c->entropy);
    mbedtls_ctr_drbg_init(&c->drbg);
    static const unsigned char pers[] = "moonhttp client";
    if (mbedtls_ctr_drbg_seed(&c->drbg, mbedtls_entropy_func, &c->entropy, pers, sizeof pers - 1) !=
        0) {
        *err = mh_tls_err_seed;
        goto fail;
    }
    if (mbedtls_ssl_config_defaults(&c->conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                    MBEDTLS_SSL_PRESET_DEFAULT) != 0) {
        *err = mh_tls_err_config;
        goto fail;
    }
    mbedtls_ssl_conf_rng(&c->conf, mbedtls_ctr_drbg_random, &c->drbg);
    /* TLS 1.3 preferred (offered first), 1.2 still accepted unless min_version is "1.3". */
    mbedtls_ssl_conf_min_tls_version(&c->conf, o->tls13_only ? MBEDTLS_SSL_VERSION_TLS1_3
                                                             : MBEDTLS_SSL_VERSION_TLS1_2);
    mbedtls_ssl_conf_max_tls_version(&c->conf, MBEDTLS_SSL_VERSION_TLS1_3);
    /* Without this a TLS 1.3 client drops the server's tickets: no resumption. */
    mbedtls_ssl_conf_tls13_enable_signal_new_session_tickets(
        &c->conf, MBEDTLS_SSL_TLS1_3_SIGNAL_NEW_SESSION_TICKETS_ENABLED);
    c->verify = verify;
    if (o->cert && (*err = load_own_cert(c, o->cert, o->key)))
        goto fail;
    if (verify) {
        /* A bundle with a few unparsable entries still loads the rest (rc > 0). */
        int rc = mbedtls_x509_crt_parse_file(&c->ca, ca_file ? ca_file : MH_TLS_SYSTEM_CA);
        if (rc < 0 || c->ca.version == 0) {
            *err =
                ca_file ? "tls: cannot load the CA file" : "tls: cannot load the system CA bundle";
            goto fail;
        }
        mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
        mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
    } else {
        /*
         * Optional, not none: the chain is still walked (and the result
         * ignored) so that on_verify sees whether a certificate came at all,
         * which is how a resumed handshake is told from a full one.
         */
        mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_OPTIONAL);
    }
    return c;
fail:
    mh_client_tls_cfg_free(c);
    return NULL;
}

void mh_client_tls_cfg_free(struct mh_client_tls_cfg *c)
{
    if (!c)
        return;
    mbedtls_ssl_config_free(&c->conf);
    mbedtls_x509_crt_free(&c->ca);
    mbedtls_x509_crt_free(&c->own);
    mbedtls_pk_free(&c->own_key);
    mbedtls_ctr_drbg_free(&c->drbg);
    mbedtls_entropy_free(&c->entropy);
    free(c);
}

/* Called for each certificate of the server's chain: only in a full handshake. */
static int on_verify(void *p, mbedtls_x509_crt *crt, int depth, uint32_t *flags)
{
    struct mh_client_tls *t = p;
    t->cert_seen = true;
    return 0;
}

static void box_unref(struct session_box *b)
{
    if (b && --b->refs == 0) {
        mbedtls_ssl_session_free(&b->s);
        free(b);
    }
}

/* Keeps the connection's current session in its box (if it has one to offer). */
static void box_store(struct mh_client_tls *t)
{
    mbedtls_ssl_session fresh;
    mbedtls_ssl_session_init(&fresh);
    if (!t->box || mbedtls_ssl_get_session(&t->c.ssl, &fresh) != 0) {
        mbedtls_ssl_session_free(&fresh); /* TLS 1.3 before its first ticket: keep the old one */
        return;
    }
    mbedtls_ssl_session_free(&t->box->s);
    t->box->s = fresh; /* the box owns what fresh pointed to now */
    t->box->set = true;
}

static const struct mh_tls_conn_hooks client_hooks;

struct mh_client_tls *mh_client_tls_new(struct mh_client_tls_cfg *cfg, int fd, const char *hostname,
                                        const void *session, const char **err)
{
    struct mh_client_tls *t = calloc(1, sizeof *t);
    if (!t) {
        *err = mh_tls_err_nomem;
        return NULL;
    }
    mbedtls_ssl_init(&t->c.ssl);
    /*
     * Mbed TLS matches the host only against DNS names (and the CN), so
     * "127.0.0.1" never matches a certificate for that address. An IP host
     * gets no hostname (no SNI either: RFC 6066 forbids addresses there) and
     * its iPAddress subjectAltName is checked after the handshake instead.
     */
    if (inet_pton(AF_INET, hostname, t->ip) == 1)
        t->ip_len = 4;
    else if (inet_pton(AF_INET6, hostname, t->ip) == 1)
        t->ip_len = 16;
    t->verify = cfg->verify;
    /*
     * An IP host is set as NULL, explicitly: since 3.6.3 Mbed TLS refuses to
     * verify a certificate when no host name was given at all.
     */
    if (mbedtls_ssl_setup(&t->c.ssl, &cfg->conf) != 0 ||
        mbedtls_ssl_set_hostname(&t->c.ssl, t->ip_len ? NULL : hostname) != 0) {
        *err = mh_tls_err_session;
        mbedtls_ssl_free(&t->c.ssl);
        free(t);
        return NULL;
    }
    mh_tls_conn_start(&t->c, &client_hooks, fd);
    mbedtls_ssl_set_verify(&t->c.ssl, on_verify, t);
    const struct session_box *box = session;
    /* A failure costs a full handshake, nothing more. */
    if (box && box->set && mbedtls_ssl_set_session(&t->c.ssl, &box->s) == 0)
        t->offered = true;
    return t;
}

void mh_client_tls_free(struct mh_client_tls *t)
{
    if (!t)
        return;
    mbedtls_ssl_free(&t->c.ssl);
    box_unref(t->box);
    free(t);
}

static const char *verify_reason(uint32_t flags)
{
    if (flags & MBEDTLS_X509_BADCERT_EXPIRED)
        return mh_tls_err_expired;
    if (flags & MBEDTLS_X509_BADCERT_FUTURE)
        return mh_tls_err_not_yet_valid;
    if (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH)
        return mh_tls_err_hostname;
    if (flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED)
        return mh_tls_err_unknown_ca;
    if (flags & MBEDTLS_X509_BADCERT_REVOKED)
        return mh_tls_err_revoked;
    return mh_tls_err_verify;
}

/*
 * Whether the peer certificate names the address we connected to in an
 * iPAddress subjectAltName (RFC 5280 §4.2.1.6: [7] OCTET STRING of 4 or 16
 * bytes). mbedTLS keeps every SAN entry of the extension, with its ASN.1
 * tag, in subject_alt_names; a certificate with only DNS names fails.
 */
static bool cert_has_ip(const mbedtls_x509_crt *crt, const unsigned char *ip, size_t len)
{
    if (!crt || !mbedtls_x509_crt_has_ext_type(crt, MBEDTLS_X509_EXT_SUBJECT_ALT_NAME))
        return false;
    for (const mbedtls_x509_sequence *cur = &crt->subject_alt_names; cur; cur = cur->next) {
        if (cur->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS) &&
            cur->buf.len == len && memcmp(cur->buf.p, ip, len) == 0)
            return true;
    }
    return false;
}

/* Mbed TLS has agreed: what it does not check (an IP host), and whether the session resumed. */
static int on_handshake_done(struct mh_tls_conn *c)
{
    struct mh_client_tls *t = (struct mh_client_tls *)c;
    if (t->verify && t->ip_len &&
        !cert_has_ip(mbedtls_ssl_get_peer_cert(&c->ssl), t->ip, t->ip_len)) {
        t->ip_mismatch = true;
        return MBEDTLS_ERR_X509_CERT_VERIFY_FAILED;
    }
    /* A resumed handshake (session ID, 1.2 ticket, 1.3 PSK) has no certificate. */
    t->resumed = t->offered && !t->cert_seen;
    return 0;
}

static void on_ticket(struct mh_tls_conn *c)
{
    box_store((struct mh_client_tls *)c);
}

/* The transport closed the socket. */
static void on_release(struct mh_tls_conn *c)
{
    mh_client_tls_free((struct mh_client_tls *)c);
}

static const struct mh_tls_conn_hooks client_hooks = {
    .handshake_done = on_handshake_done,
    .ticket = on_ticket,
    .release = on_release,
};

int mh_client_tls_handshake(struct mh_client_tls *t, const char **err)
{
    int rc = mh_tls_conn_handshake(&t->c);
    if (rc == 0)
        return 0;
    if (t->ip_mismatch) {
        *err = mh_tls_err_hostname;
        return MH_TLS_ERROR;
    }
    if (rc == MBEDTLS_ERR_SSL_WANT_READ)
        return MH_TLS_WANT_READ;
    if (rc == MBEDTLS_ERR_SSL_WANT_WRITE)
        return MH_TLS_WANT_WRITE;
    /* TLS 1.3 reports a refused certificate as a bad one, 1.2 as a failed check: ask the flags. */
    uint32_t flags = mbedtls_ssl_get_verify_result(&t->c.ssl);
    if (rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED || (t->verify && flags && flags != (uint32_t)-1))
        *err = verify_reason(flags);
    else if (rc == MBEDTLS_ERR_NET_CONN_RESET || rc == MBEDTLS_ERR_SSL_CONN_EOF)
        *err = mh_tls_err_closed;
    else if (rc == MBEDTLS_ERR_SSL_FATAL_ALERT_MESSAGE)
        *err = mh_tls_err_alert;
    else
        *err = mh_tls_err_handshake;
    return MH_TLS_ERROR;
}

bool mh_client_tls_resumed(const struct mh_client_tls *t)
{
    return t->resumed;
}

void mh_client_tls_transport(struct mh_client_tls *t, struct mh_transport *tp, int fd)
{
    (void)fd; /* the session's own: given to mh_client_tls_new */
    mh_tls_conn_transport(&t->c, tp);
}

void mh_client_tls_save_session(struct mh_client_tls *t, void **slot)
{
    struct session_box *b = *slot;
    if (!b) {
        if (!(b = calloc(1, sizeof *b)))
            return;
        b->refs = 1; /* the holder's */
        mbedtls_ssl_session_init(&b->s);
        *slot = b;
    }
    if (t->box != b) {
        box_unref(t->box);
        b->refs++;
        t->box = b;
    }
    box_store(t);
}

void mh_client_tls_session_free(void *session)
{
    box_unref(session);
}
