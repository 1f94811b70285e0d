#include "tls_acme.h"

#include "log.h"
#include "shm_dict.h"
#include "tls_init.h"

#include <mbedtls/error.h>
#include <mbedtls/oid.h>
#include <mbedtls/pem.h>
#include <mbedtls/psa_util.h>
#include <stdlib.h>
#include <string.h>

/* A validation certificate and key in PEM are about 1 KiB; more is not one. */
#define ENTRY_MAX 8192
#define DNS_NAME_MAX  253

/* id-pe-acmeIdentifier, 1.3.6.1.5.5.7.1.31 (RFC 8737 section 6.1). */
static const char oid_acme_identifier[] = MBEDTLS_OID_PKIX "\x01\x1f";

static struct mh_shm_dict *acme_zone;

void mh_tls_acme_set_zone(struct mh_shm_dict *zone)
{
    acme_zone = zone;
}

struct mh_shm_dict *mh_tls_acme_zone(void)
{
    return acme_zone;
}

void mh_tls_acme_cert_free(struct mh_tls_acme_cert *c)
{
    if (!c)
        return;
    mbedtls_x509_crt_free(&c->crt);
    mbedtls_pk_free(&c->key);
    free(c);
}

/*
 * Mbed TLS refuses a certificate with a critical extension it does not
 * know; the validation certificate's acmeIdentifier is one by design. Its
 * value is for the validating CA to read, not for us: accept it unread.
 */
static int accept_acme_identifier(void *ctx, mbedtls_x509_crt const *crt,
                                  mbedtls_x509_buf const *oid, int critical,
                                  const unsigned char *p, const unsigned char *end)
{
    (void)ctx, (void)crt, (void)critical, (void)p, (void)end;
    bool ours = oid->len == sizeof oid_acme_identifier - 1 &&
                memcmp(oid->p, oid_acme_identifier, oid->len) == 0;
    return ours ? 0 : MBEDTLS_ERR_X509_INVALID_EXTENSIONS;
}

/* Parses entry (NUL-ended, len counting the NUL): the certificate's PEM, then the key's. */
static int parse_entry(struct mh_tls_acme_cert *c, const char *entry, size_t len)
{
    mbedtls_pem_context pem;
    mbedtls_pem_init(&pem);
    size_t used = 0;
    int ret = mbedtls_pem_read_buffer(&pem, "-----BEGIN CERTIFICATE-----",
                                      "-----END CERTIFICATE-----", (const unsigned char *)entry,
                                      NULL, 0, &used);
    if (!ret) {
        size_t dlen;
        const unsigned char *der = mbedtls_pem_get_buffer(&pem, &dlen);
        ret = mbedtls_x509_crt_parse_der_with_ext_cb(&c->crt, der, dlen, 1,
                                                     accept_acme_identifier, NULL);
    }
    mbedtls_pem_free(&pem);
    /* The key's parser finds its PEM block after the certificate's. */
    if (!ret && !(ret = mh_tls_crypto_init()))
        ret = mbedtls_pk_parse_key(&c->key, (const unsigned char *)entry, len, NULL, 0,
                                   mbedtls_psa_get_random, MBEDTLS_PSA_RANDOM_STATE);
    return ret;
}

struct mh_tls_acme_cert *mh_tls_acme_cert_find(const unsigned char *name, size_t len)
{
    if (!acme_zone || !name || len == 0 || len > DNS_NAME_MAX)
        return NULL;
    char key[sizeof "alpn:" + DNS_NAME_MAX];
    memcpy(key, "alpn:", 5);
    memcpy(key + 5, name, len);
    char *entry = malloc(ENTRY_MAX);
    struct mh_tls_acme_cert *c = entry ? calloc(1, sizeof *c) : NULL;
    if (!c) {
        free(entry);
        return NULL;
    }
    mbedtls_x509_crt_init(&c->crt);
    mbedtls_pk_init(&c->key);
    struct mh_shm_value v;
    const char *err = mh_shm_dict_get(acme_zone, key, 5 + len, &v, entry, ENTRY_MAX - 1);
    int ret = -1;
    if (!err && v.type == MH_SHM_STRING && v.len < ENTRY_MAX) {
        entry[v.len] = 0;
        if ((ret = parse_entry(c, entry, v.len + 1))) {
            char msg[128];
            mbedtls_strerror(ret, msg, sizeof msg);
            mh_log(MH_LOG_WARN, "acme: the validation certificate stored for %.*s: %s", (int)len,
                   (const char *)name, msg);
        }
    }
    free(entry);
    if (ret) {
        mh_tls_acme_cert_free(c);
        return NULL;
    }
    return c;
}
