#ifndef MH_TLS_CLIENT_AUTH_H
#define MH_TLS_CLIENT_AUTH_H
/*
 * A server's judgement of the client's certificate, after the handshake
 * (tls.c's on_handshake_done): the refusal a client can read, and its log line.
 */
#include <mbedtls/ssl.h>
#include <stdbool.h>

/*
 * 0 when the client may go on: its certificate verified against client_ca,
 * or it sent none and optional is set. Else the connection is refused: a
 * fatal alert saying why goes to the client (unknown_ca, certificate_expired,
 * certificate_required in TLS 1.3, handshake_failure for a missing one in
 * TLS 1.2, ...), a line is logged at info (reason, peer address; at most a
 * few a second per process), and MBEDTLS_ERR_X509_CERT_VERIFY_FAILED is returned.
 */
int mh_tls_client_auth_check(mbedtls_ssl_context *ssl, int fd, bool optional);

#endif
