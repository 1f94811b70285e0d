#ifndef MH_TLS_INIT_H
#define MH_TLS_INIT_H
/*
 * Mbed TLS 3.6's TLS 1.3 code does its key exchange and key schedule through
 * PSA Crypto, which must be initialised once per process before the first
 * handshake (mbedtls_ssl_setup and then any handshake fails otherwise).
 */

/*
 * Initialises PSA Crypto in this process: cheap after the first call. PSA
 * keeps a random generator of its own; one seeded before fork() would give
 * every worker the same stream, so a child reinitialises it on its first
 * call. 0, or an Mbed TLS/PSA error code.
 */
int mh_tls_crypto_init(void);

#endif
