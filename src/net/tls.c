#include "tls.h"

#include "tls_acme.h"
#include "tls_client_auth.h"
#include "tls_conn.h"
#include "tls_init.h"

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/ssl_ticket.h>
#include <mbedtls/x509_crt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Ticket keys rotate this often; a ticket stays valid for up to twice as long. */
#define TICKET_LIFETIME 3600
/* Reset SSL contexts kept per configuration (each holds ~34 KiB of record buffers). */
#define POOL_MAX 128

/* TLS 1.3's suites first: with both versions on, Mbed TLS offers and picks 1.3. */
static const int ciphersuites[] = {
    MBEDTLS_TLS1_3_AES_128_GCM_SHA256,
    MBEDTLS_TLS1_3_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS1_3_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    MBEDTLS_TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    0,
};

static const char *alpn_http1[] = {"http/1.1", NULL};
/* Server preference: mbedTLS picks the first of ours the client offers. */
static const char *alpn_h2[] = {"h2", "http/1.1", NULL};
/* An ACME listener's, last: only a validating CA offers it, and offers nothing else. */
static const char *alpn_http1_acme[] = {"http/1.1", MH_TLS_ACME_ALPN, NULL};
static const char *alpn_h2_acme[] = {"h2", "http/1.1", MH_TLS_ACME_ALPN, NULL};

/*
 * ECDHE groups in our order of preference (mbedTLS picks by the server's
 * list). Its default would put secp521r1 first: several times the cost of
 * a 256-bit group for every full handshake.
 */
static const uint16_t ecdhe_groups[] = {
    MBEDTLS_SSL_IANA_TLS_GROUP_X25519,
    MBEDTLS_SSL_IANA_TLS_GROUP_SECP256R1,
    MBEDTLS_SSL_IANA_TLS_GROUP_SECP384R1,
    MBEDTLS_SSL_IANA_TLS_GROUP_NONE,
};

struct tls_cert {
    mbedtls_x509_crt crt;
    mbedtls_pk_context key;
};

struct tls_session;

/* Everything a handshake needs, shared by the connections started with it. */
struct tls_conf {
    unsigned refs; /* the server's (while current) + one per session */
    bool retired;  /* replaced by a reload or its server is gone: do not pool */
    mbedtls_entropy_context entropy;
    mbedtls_ctr_drbg_context drbg;
    mbedtls_ssl_config ssl;
    mbedtls_ssl_ticket_context ticket;
    mbedtls_x509_crt client_ca; /* empty: no client certificates asked for */
    bool client_optional;
    bool acme;     /* answers TLS-ALPN-01 validation handshakes (tls_acme.h) */
    size_t ncerts; /* 0: an ACME listener before its first certificate */
    struct tls_cert certs[MH_MAX_CERTS];
    struct tls_session *pool;
    size_t npool;
};

struct mh_tls_server {
    unsigned refs;
    struct tls_conf *conf; /* what new connections get */
};

/* A server connection: the shared TLS transport (first) and what the listener's side adds. */
struct tls_session {
    struct mh_tls_conn c;
    struct tls_conf *conf;
    struct tls_session *next_free;
    char sni[256]; /* the name the client asked for ("": none) */
    /* A TLS-ALPN-01 validation handshake's certificate: the connection ends with the handshake. */
    struct mh_tls_acme_cert *acme_cert;
};

/* ---- configurations ------------------------------------------------------ */

static void session_free(struct tls_session *s)
{
    mh_tls_acme_cert_free(s->acme_cert);
    mbedtls_ssl_free(&s->c.ssl);
    free(s);
}

static void conf_free(struct tls_conf *c)
{
    while (c->pool) {
        struct tls_session *s = c->pool;
        c->pool = s->next_free;
        session_free(s);
    }
    for (size_t i = 0; i < c->ncerts; i++) {
        mbedtls_x509_crt_free(&c->certs[i].crt);
        mbedtls_pk_free(&c->certs[i].key);
    }
    mbedtls_ssl_ticket_free(&c->ticket);
    mbedtls_x509_crt_free(&c->client_ca);
    mbedtls_ssl_config_free(&c->ssl);
    mbedtls_ctr_drbg_free(&c->drbg);
    mbedtls_entropy_free(&c->entropy);
    free(c);
}

static void conf_unref(struct tls_conf *c)
{
    if (--c->refs == 0)
        conf_free(c);
}

static void pool_trim(struct tls_conf *c, size_t keep)
{
    while (c->npool > keep) {
        struct tls_session *s = c->pool;
        c->pool = s->next_free;
        c->npool--;
        session_free(s);
    }
}

static void conf_retire(struct tls_conf *c)
{
    c->retired = true;
    pool_trim(c, 0); /* idle contexts are of no use any more */
    conf_unref(c);
}

static void tls_error(char *err, size_t errlen, int ret, const char *what, const char *file)
{
    char msg[128];
    mbedtls_strerror(ret, msg, sizeof msg);
    snprintf(err, errlen, "tls: %s %s: %s", what, file, msg);
}

/* Case-insensitive DNS name match; "*.example.com" matches exactly one leftmost label. */
static bool name_matches(const unsigned char *pat, size_t plen, const unsigned char *name,
                         size_t nlen)
{
    if (plen > 2 && pat[0] == '*' && pat[1] == '.') {
        const unsigned char *dot = memchr(name, '.', nlen);
        if (!dot || dot == name)
            return false;
        size_t rest = nlen - (size_t)(dot - name);
        return rest == plen - 1 && strncasecmp((const char *)dot, (const char *)pat + 1, rest) == 0;
    }
    return plen == nlen && strncasecmp((const char *)pat, (const char *)name, nlen) == 0;
}

static bool cert_matches(const mbedtls_x509_crt *crt, const unsigned char *name, size_t len)
{
    for (const mbedtls_x509_sequence *san = &crt->subject_alt_names; san && san->buf.p;
         san = san->next) {
        if (san->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_DNS_NAME) &&
            name_matches(san->buf.p, san->buf.len, name, len))
            return true;
    }
    for (const mbedtls_x509_name *n = &crt->subject; n; n = n->next) {
        if (n->oid.p && MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) == 0 &&
            name_matches(n->val.p, n->val.len, name, len))
            return true;
    }
    return false;
}

/* SNI: the first certificate whose names match; none matching keeps the default. */
static int on_sni(void *p, mbedtls_ssl_context *ssl, const unsigned char *name, size_t len)
{
    struct tls_conf *c = p;
    struct tls_session *s = mbedtls_ssl_get_user_data_p(ssl);
    if (len < sizeof s->sni) { /* DNS names are at most 253 bytes: longer is not kept */
        memcpy(s->sni, name, len);
        s->sni[len] = 0;
    }
    for (size_t i = 0; i < c->ncerts; i++) {
        if (cert_matches(&c->certs[i].crt, name, len))
            return i == 0 ? 0
                          : mbedtls_ssl_set_hs_own_cert(ssl, &c->certs[i].crt, &c->certs[i].key);
    }
    return 0;
}

/*
 * After the ClientHello (SNI and ALPN known): a validation handshake
 * (RFC 8737: ALPN "acme-tls/1" agreed, which only ACME listeners offer)
 * gets the validation certificate stored for its SNI name, or an alert
 * when there is none; any other handshake keeps what on_sni chose.
 */
static int on_cert(mbedtls_ssl_context *ssl)
{
    struct tls_session *s = mbedtls_ssl_get_user_data_p(ssl);
    const char *alpn = mbedtls_ssl_get_alpn_protocol(ssl);
    if (!alpn || strcmp(alpn, MH_TLS_ACME_ALPN) != 0)
        return 0;
    size_t len = 0;
    const unsigned char *name = mbedtls_ssl_get_hs_sni(ssl, &len);
    /* Called again for the second ClientHello after a HelloRetryRequest: the handshake's
     * certificate list still points at the one found for the first, so keep it. */
    if (!s->acme_cert && !(s->acme_cert = mh_tls_acme_cert_find(name, len))) {
        /* Best effort: the handshake fails either way, the alert only says why. */
        mbedtls_ssl_send_alert_message(ssl, MBEDTLS_SSL_ALERT_LEVEL_FATAL,
                                       MBEDTLS_SSL_ALERT_MSG_UNRECOGNIZED_NAME);
        s->c.failed = true; /* a CA asking for a name we have no answer for: not an error here */
        return MBEDTLS_ERR_SSL_HANDSHAKE_FAILURE;
    }
    return mbedtls_ssl_set_hs_own_cert(ssl, &s->acme_cert->crt, &s->acme_cert->key);
}

static struct tls_conf *conf_new(const struct mh_tls_certs *certs, char *err, size_t errlen)
{
    struct tls_conf *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "tls: out of memory");
        return NULL;
    }
    c->refs = 1;
    mbedtls_entropy_init(&c->entropy);
    mbedtls_ctr_drbg_init(&c->drbg);
    mbedtls_ssl_config_init(&c->ssl);
    mbedtls_ssl_ticket_init(&c->ticket);
    mbedtls_x509_crt_init(&c->client_ca);
    static const char pers[] = "moonhttp tls";
    int ret = mh_tls_crypto_init();
    if (ret) {
        snprintf(err, errlen, "tls: PSA crypto init failed (%d)", ret);
        goto fail;
    }
    ret = mbedtls_ctr_drbg_seed(&c->drbg, mbedtls_entropy_func, &c->entropy,
                                (const unsigned char *)pers, sizeof pers - 1);
    if (ret) {
        tls_error(err, errlen, ret, "seeding", "the random generator");
        goto fail;
    }
    for (size_t i = 0; i < certs->n; i++) {
        struct tls_cert *tc = &c->certs[i];
        mbedtls_x509_crt_init(&tc->crt);
        mbedtls_pk_init(&tc->key);
        c->ncerts++;
        if ((ret = mbedtls_x509_crt_parse_file(&tc->crt, certs->cert[i]))) {
            tls_error(err, errlen, ret, "certificate", certs->cert[i]);
            goto fail;
        }
        if ((ret = mbedtls_pk_parse_keyfile(&tc->key, certs->key[i], NULL, mbedtls_ctr_drbg_random,
                                            &c->drbg))) {
            tls_error(err, errlen, ret, "key", certs->key[i]);
            goto fail;
        }
        if ((ret =
                 mbedtls_pk_check_pair(&tc->crt.pk, &tc->key, mbedtls_ctr_drbg_random, &c->drbg))) {
            snprintf(err, errlen, "tls: key %s does not match certificate %s", certs->key[i],
                     certs->cert[i]);
            goto fail;
        }
    }
    mbedtls_ssl_config *conf = &c->ssl;
    if ((ret =
             mbedtls_ssl_config_defaults(conf, MBEDTLS_SSL_IS_SERVER, MBEDTLS_SSL_TRANSPORT_STREAM,
                                         MBEDTLS_SSL_PRESET_DEFAULT))) {
        tls_error(err, errlen, ret, "setting up", "the configuration");
        goto fail;
    }
    mbedtls_ssl_conf_rng(conf, mbedtls_ctr_drbg_random, &c->drbg);
    mbedtls_ssl_conf_min_tls_version(conf, certs->tls13_only ? MBEDTLS_SSL_VERSION_TLS1_3
                                                             : MBEDTLS_SSL_VERSION_TLS1_2);
    mbedtls_ssl_conf_max_tls_version(conf, MBEDTLS_SSL_VERSION_TLS1_3);
    mbedtls_ssl_conf_ciphersuites(conf, ciphersuites);
    mbedtls_ssl_conf_groups(conf, ecdhe_groups);
    mbedtls_ssl_conf_renegotiation(conf, MBEDTLS_SSL_RENEGOTIATION_DISABLED);
    if (certs->acme)
        mbedtls_ssl_conf_alpn_protocols(conf, certs->http2 ? alpn_h2_acme : alpn_http1_acme);
    else
        mbedtls_ssl_conf_alpn_protocols(conf, certs->http2 ? alpn_h2 : alpn_http1);
    mbedtls_ssl_conf_sni(conf, on_sni, c);
    c->acme = certs->acme;
    if (c->acme)
        mbedtls_ssl_conf_cert_cb(conf, on_cert);
    if (certs->client_ca) {
        /* A bundle with a few unparsable entries still loads the rest (ret > 0). */
        ret = mbedtls_x509_crt_parse_file(&c->client_ca, certs->client_ca);
        if (ret < 0 || c->client_ca.version == 0) {
            tls_error(err, errlen, ret < 0 ? ret : MBEDTLS_ERR_X509_INVALID_FORMAT, "client_ca",
                      certs->client_ca);
            goto fail;
        }
        c->client_optional = certs->client_optional;
        mbedtls_ssl_conf_ca_chain(conf, &c->client_ca, NULL);
        /* Mbed TLS keeps the chain's result; on_handshake_done refuses, with an alert the
         * client can read (tls_client_auth.c says why not during the handshake). */
        mbedtls_ssl_conf_authmode(conf, MBEDTLS_SSL_VERIFY_OPTIONAL);
    }
    /* None yet (ACME): a handshake that is not a validation one ends in a handshake_failure
     * alert from Mbed TLS itself (no certificate, or no suite a certificate allows). */
    if (c->ncerts &&
        (ret = mbedtls_ssl_conf_own_cert(conf, &c->certs[0].crt, &c->certs[0].key))) {
        tls_error(err, errlen, ret, "certificate", certs->cert[0]);
        goto fail;
    }
    if ((ret = mbedtls_ssl_ticket_setup(&c->ticket, mbedtls_ctr_drbg_random, &c->drbg,
                                        MBEDTLS_CIPHER_AES_256_GCM, TICKET_LIFETIME))) {
        tls_error(err, errlen, ret, "setting up", "session tickets");
        goto fail;
    }
    /* No tickets where a client certificate is required: a TLS 1.3 ticket of Mbed TLS 3.6
     * keeps no client certificate, so a resumed session would come without one (and
     * tickets go out before on_handshake_done has judged the certificate). */
    if (!certs->client_ca || certs->client_optional)
        mbedtls_ssl_conf_session_tickets_cb(conf, mbedtls_ssl_ticket_write, mbedtls_ssl_ticket_parse,
                                            &c->ticket);
    return c;
fail:
    conf_free(c);
    return NULL;
}

/* ---- servers ------------------------------------------------------------- */

struct mh_tls_server *mh_tls_server_new(const struct mh_tls_certs *certs, char *err, size_t errlen)
{
    if (certs->n == 0 && !certs->acme) {
        snprintf(err, errlen, "tls: no certificates");
        return NULL;
    }
    struct mh_tls_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "tls: out of memory");
        return NULL;
    }
    if (!(s->conf = conf_new(certs, err, errlen))) {
        free(s);
        return NULL;
    }
    s->refs = 1;
    return s;
}

void mh_tls_server_ref(struct mh_tls_server *s)
{
    s->refs++;
}

void mh_tls_server_unref(struct mh_tls_server *s)
{
    if (--s->refs)
        return;
    conf_retire(s->conf);
    free(s);
}

void mh_tls_server_trim(struct mh_tls_server *s, size_t keep)
{
    pool_trim(s->conf, keep);
}

int mh_tls_reload(struct mh_tls_server *s, const struct mh_tls_certs *certs, char *err,
                  size_t errlen)
{
    struct tls_conf *c = certs->n || certs->acme ? conf_new(certs, err, errlen) : NULL;
    if (!c) {
        if (!certs->n && !certs->acme)
            snprintf(err, errlen, "tls: no certificates");
        return -1;
    }
    conf_retire(s->conf);
    s->conf = c;
    return 0;
}

const char *mh_tls_server_default_name(const struct mh_tls_server *s, char *buf, size_t len)
{
    buf[0] = 0;
    for (const mbedtls_x509_name *n = s->conf->ncerts ? &s->conf->certs[0].crt.subject : NULL; n;
         n = n->next) {
        if (n->oid.p && MBEDTLS_OID_CMP(MBEDTLS_OID_AT_CN, &n->oid) == 0) {
            snprintf(buf, len, "%.*s", (int)n->val.len, (const char *)n->val.p);
            break;
        }
    }
    return buf;
}

/* ---- connections --------------------------------------------------------- */

/* optional is "none", not "any": a certificate that was sent must verify. */
static int on_handshake_done(struct mh_tls_conn *tc)
{
    struct tls_session *s = (struct tls_session *)tc;
    if (s->acme_cert) {
        /* RFC 8737 section 3: no application data after a validation handshake. */
        mbedtls_ssl_close_notify(&tc->ssl);
        tc->failed = true; /* nothing to log: the connection did what it was for */
        return MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY;
    }
    if (!s->conf->client_ca.version)
        return 0;
    int ret = mh_tls_client_auth_check(&tc->ssl, tc->fd, s->conf->client_optional);
    tc->failed = ret != 0; /* logged at info there, not again at debug */
    return ret;
}

/* The transport closed the socket: the context goes back to its configuration's pool. */
static void on_release(struct mh_tls_conn *tc)
{
    struct tls_session *s = (struct tls_session *)tc;
    struct tls_conf *c = s->conf;
    mh_tls_acme_cert_free(s->acme_cert);
    s->acme_cert = NULL;
    if (!c->retired && c->npool < POOL_MAX && mbedtls_ssl_session_reset(&tc->ssl) == 0) {
        s->next_free = c->pool;
        c->pool = s;
        c->npool++;
    } else {
        session_free(s);
    }
    conf_unref(c);
}

static const struct mh_tls_conn_hooks server_hooks = {
    .handshake_done = on_handshake_done,
    .release = on_release,
};

bool mh_tls_info(const struct mh_transport *t, struct mh_tls_info *info)
{
    const struct mh_tls_conn *tc = mh_tls_conn_of(t);
    if (!tc || tc->hooks != &server_hooks || !tc->handshake_done)
        return false;
    const struct tls_session *s = (const struct tls_session *)tc;
    info->version = mbedtls_ssl_get_version(&tc->ssl);
    info->cipher = mbedtls_ssl_get_ciphersuite(&tc->ssl);
    info->alpn = mbedtls_ssl_get_alpn_protocol(&tc->ssl);
    info->sni = s->sni[0] ? s->sni : NULL;
    /* Asked for only with client_ca, and verified by then (required, or on_handshake_done). */
    info->client_cert = s->conf->client_ca.version ? mbedtls_ssl_get_peer_cert(&tc->ssl) : NULL;
    return true;
}

int mh_tls_accept(struct mh_tls_server *srv, struct mh_transport *t, int fd)
{
    struct tls_conf *c = srv->conf;
    struct tls_session *s = c->pool;
    if (s) {
        c->pool = s->next_free;
        c->npool--;
    } else {
        if (!(s = malloc(sizeof *s)))
            return -1;
        s->acme_cert = NULL;
        mbedtls_ssl_init(&s->c.ssl);
        if (mbedtls_ssl_setup(&s->c.ssl, &c->ssl)) {
            session_free(s);
            return -1;
        }
    }
    s->conf = c;
    s->next_free = NULL;
    s->sni[0] = 0;
    s->acme_cert = NULL;
    c->refs++;
    mh_tls_conn_start(&s->c, &server_hooks, fd);
    mbedtls_ssl_set_user_data_p(&s->c.ssl, s); /* for on_sni */
    mh_tls_conn_transport(&s->c, t);
    return 0;
}

/*
 * Builds every configuration first, so a bad file changes nothing; then
 * swaps them all in.
 */
int mh_tls_reload_all(struct mh_tls_server *const *servers, const struct mh_tls_certs *const *certs,
                      size_t n, char *err, size_t errlen)
{
    struct tls_conf *fresh[n > 0 ? n : 1];
    memset(fresh, 0, sizeof fresh);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!servers[i])
            continue;
        bool seen = false; /* a shared server reloads once */
        for (size_t j = 0; j < i; j++)
            seen = seen || servers[j] == servers[i];
        if (seen)
            continue;
        if (!certs[i]) {
            snprintf(err, errlen, "tls: no certificates to reload");
            rc = -1;
        } else if (!(fresh[i] = conf_new(certs[i], err, errlen))) {
            rc = -1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (!fresh[i])
            continue;
        if (rc == 0) {
            conf_retire(servers[i]->conf);
            servers[i]->conf = fresh[i];
        } else {
            conf_free(fresh[i]);
        }
    }
    return rc;
}
