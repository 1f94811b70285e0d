#include "tls_client_auth.h"

#include "log.h"

#include <mbedtls/x509.h>
#include <mbedtls/x509_crt.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <time.h>

/*
 * Why the server judges here rather than letting Mbed TLS refuse during the
 * handshake (it verifies with MBEDTLS_SSL_VERIFY_OPTIONAL: the chain's result
 * is kept, the client's CertificateVerify is still checked): in TLS 1.3,
 * Mbed TLS 3.6 sends its alert under the server's handshake keys after the
 * client has moved to the application keys, so the client reads a record it
 * cannot decrypt (curl: "decryption failed or bad record mac"; openssl
 * s_client answers bad_record_mac); and in TLS 1.2 it sends no alert for a
 * missing certificate. Sent now, the alert goes under the keys the client reads with.
 */

/* Which alert for which verification failure, first match wins (Mbed TLS's own order). */
static const struct {
    uint32_t flags;
    unsigned char alert;
    const char *reason;
} REFUSALS[] = {
    {MBEDTLS_X509_BADCERT_OTHER, MBEDTLS_SSL_ALERT_MSG_ACCESS_DENIED, "certificate refused"},
    {MBEDTLS_X509_BADCERT_CN_MISMATCH, MBEDTLS_SSL_ALERT_MSG_BAD_CERT, "certificate name mismatch"},
    {MBEDTLS_X509_BADCERT_KEY_USAGE | MBEDTLS_X509_BADCERT_EXT_KEY_USAGE,
     MBEDTLS_SSL_ALERT_MSG_UNSUPPORTED_CERT, "certificate not for client authentication"},
    {MBEDTLS_X509_BADCERT_BAD_PK | MBEDTLS_X509_BADCERT_BAD_KEY, MBEDTLS_SSL_ALERT_MSG_UNSUPPORTED_CERT,
     "certificate key not acceptable"},
    {MBEDTLS_X509_BADCERT_EXPIRED, MBEDTLS_SSL_ALERT_MSG_CERT_EXPIRED, "certificate expired"},
    {MBEDTLS_X509_BADCERT_FUTURE, MBEDTLS_SSL_ALERT_MSG_BAD_CERT, "certificate not valid yet"},
    {MBEDTLS_X509_BADCERT_REVOKED, MBEDTLS_SSL_ALERT_MSG_CERT_REVOKED, "certificate revoked"},
    {MBEDTLS_X509_BADCERT_NOT_TRUSTED, MBEDTLS_SSL_ALERT_MSG_UNKNOWN_CA,
     "certificate from an unknown CA"},
};

/* Refusals logged per second and process; past that they are counted and the count logged. */
#define LOG_PER_SECOND 20

static void peer_address(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
            port = ntohs(a->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
            port = ntohs(a->sin6_port);
        }
    }
    snprintf(buf, len, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, port);
}

static void log_refusal(int fd, const char *reason, const char *version)
{
    static time_t second;
    static unsigned logged, dropped;
    time_t now = time(NULL);
    if (now != second) {
        if (dropped)
            mh_log(MH_LOG_INFO, "TLS client certificates: %u more refusals not logged", dropped);
        second = now;
        logged = dropped = 0;
    }
    if (logged >= LOG_PER_SECOND) {
        dropped++;
        return;
    }
    logged++;
    char peer[INET6_ADDRSTRLEN + 16];
    peer_address(fd, peer, sizeof peer);
    mh_log(MH_LOG_INFO, "TLS client refused: %s (%s, peer %s)", reason, version, peer);
}

int mh_tls_client_auth_check(mbedtls_ssl_context *ssl, int fd, bool optional)
{
    unsigned char alert;
    const char *reason;
    bool tls13 = mbedtls_ssl_get_version_number(ssl) == MBEDTLS_SSL_VERSION_TLS1_3;
    if (!mbedtls_ssl_get_peer_cert(ssl)) {
        if (optional)
            return 0;
        /* TLS 1.2 has no certificate_required; RFC 5246 7.4.6 names handshake_failure. */
        alert = tls13 ? MBEDTLS_SSL_ALERT_MSG_CERT_REQUIRED : MBEDTLS_SSL_ALERT_MSG_HANDSHAKE_FAILURE;
        reason = "no client certificate";
    } else {
        uint32_t flags = mbedtls_ssl_get_verify_result(ssl);
        if (flags == 0)
            return 0;
        alert = MBEDTLS_SSL_ALERT_MSG_CERT_UNKNOWN;
        reason = "certificate not accepted";
        for (size_t i = 0; i < sizeof REFUSALS / sizeof REFUSALS[0]; i++) {
            if (flags & REFUSALS[i].flags) {
                alert = REFUSALS[i].alert;
                reason = REFUSALS[i].reason;
                break;
            }
        }
    }
    /* A full socket buffer right after the handshake would lose the alert: the refusal stands. */
    (void)mbedtls_ssl_send_alert_message(ssl, MBEDTLS_SSL_ALERT_LEVEL_FATAL, alert);
    log_refusal(fd, reason, tls13 ? "TLS 1.3" : "TLS 1.2");
    return MBEDTLS_ERR_X509_CERT_VERIFY_FAILED;
}
