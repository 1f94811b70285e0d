#ifndef MH_TLS_CERTS_H
#define MH_TLS_CERTS_H
/* The certificates of a TLS endpoint, as configured (server/config.c fills them). */
#include <stdbool.h>
#include <stddef.h>

#define MH_MAX_CERTS 8

/*
 * The shared zone a server with an ACME listener gets (settings.c declares
 * it): the ACME client in Lua writes the challenges' answers there and the
 * workers read them in C (handlers/acme_challenge.c, net/tls_acme.c). The
 * dot keeps it apart from every name a script may declare.
 */
#define MH_ACME_ZONE      "moonhttp.acme"
#define MH_ACME_ZONE_SIZE (1024 * 1024)

/* The first is the default, the others are chosen by SNI. */
struct mh_tls_certs {
    size_t n;
    char *cert[MH_MAX_CERTS]; /* PEM file: the certificate, then its chain */
    char *key[MH_MAX_CERTS];  /* PEM private key file */
    bool http2;               /* offer "h2" in ALPN before "http/1.1" */
    bool tls13_only;          /* min_version = "1.3": refuse TLS 1.2 */
    char *client_ca;          /* PEM CAs a client certificate must chain to; NULL: none asked */
    bool client_optional;     /* client_auth = "optional": a client may send none */
    /* tls = { acme = {...} }: certificates come from ACME (n may be 0 until one is installed;
     * the Lua side reads the options), and TLS-ALPN-01 validation handshakes are answered. */
    bool acme;
};

#endif
