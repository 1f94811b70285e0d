#ifndef MH_TLS_ACME_H
#define MH_TLS_ACME_H
/*
 * ACME's side of the TLS listeners: the shared zone the challenges' answers
 * are read from (MH_ACME_ZONE of tls_certs.h, written by the Lua ACME
 * client), and the TLS-ALPN-01 validation certificates (RFC 8737) in it:
 * key "alpn:<name>" holds the certificate's PEM followed by its key's PEM.
 */
#include <mbedtls/pk.h>
#include <mbedtls/x509_crt.h>
#include <stddef.h>

/* The ALPN protocol of a validation handshake; offered by ACME listeners only. */
#define MH_TLS_ACME_ALPN "acme-tls/1"

struct mh_shm_dict;

/*
 * The zone, set once per process tree by the process that maps it, before
 * it forks (workers inherit the mapping and this pointer). NULL: no ACME.
 */
void mh_tls_acme_set_zone(struct mh_shm_dict *zone);
struct mh_shm_dict *mh_tls_acme_zone(void);

/* A validation certificate and its key, for one handshake. */
struct mh_tls_acme_cert {
    mbedtls_x509_crt crt;
    mbedtls_pk_context key;
};

/*
 * The validation certificate stored for the SNI name (not NUL-ended), parsed;
 * NULL when there is none (no zone, no such key, or what is stored does not
 * parse: logged). Free with mh_tls_acme_cert_free.
 */
struct mh_tls_acme_cert *mh_tls_acme_cert_find(const unsigned char *name, size_t len);
void mh_tls_acme_cert_free(struct mh_tls_acme_cert *c);

#endif
