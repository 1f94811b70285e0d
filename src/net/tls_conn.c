#include "tls_conn.h"

#include "log.h"

#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- the socket under mbedTLS -------------------------------------------- */

static int bio_send(void *ctx, const unsigned char *buf, size_t len)
{
    struct mh_tls_conn *c = ctx;
    for (;;) {
        ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
        if (n >= 0)
            return (int)n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return MBEDTLS_ERR_SSL_WANT_WRITE;
        c->sys_errno = errno;
        return errno == EPIPE || errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET
                                                     : MBEDTLS_ERR_NET_SEND_FAILED;
    }
}

/*
 * mbedTLS asks for a record header, then its body: two reads per record.
 * Reading ahead into a small buffer makes that one recv(2) for the small
 * records that requests mostly are; large reads go straight to mbedTLS.
 * What is read ahead counts as pending input (tls_pending).
 */
static int bio_recv(void *ctx, unsigned char *buf, size_t len)
{
    struct mh_tls_conn *c = ctx;
    if (c->ra_off < c->ra_len) {
        size_t n = c->ra_len - c->ra_off < len ? c->ra_len - c->ra_off : len;
        memcpy(buf, c->ra + c->ra_off, n);
        c->ra_off += n;
        return (int)n;
    }
    bool ahead = len < sizeof c->ra;
    for (;;) {
        ssize_t n = recv(c->fd, ahead ? c->ra : buf, ahead ? sizeof c->ra : len, 0);
        if (n > 0) {
            if (c->bytes_in == 0)
                c->first_byte = ahead ? c->ra[0] : buf[0];
            c->bytes_in += (size_t)n;
            if (!ahead)
                return (int)n;
            c->ra_len = (size_t)n;
            c->ra_off = 0;
            return bio_recv(ctx, buf, len);
        }
        if (n == 0)
            return 0; /* mbedTLS: MBEDTLS_ERR_SSL_CONN_EOF */
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return MBEDTLS_ERR_SSL_WANT_READ;
        c->sys_errno = errno;
        return errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET : MBEDTLS_ERR_NET_RECV_FAILED;
    }
}

void mh_tls_conn_start(struct mh_tls_conn *c, const struct mh_tls_conn_hooks *hooks, int fd)
{
    c->hooks = hooks;
    c->fd = fd;
    c->sys_errno = 0;
    c->write_pending = 0;
    c->handshake_done = c->shut = c->failed = false;
    c->bytes_in = 0;
    c->first_byte = 0;
    c->ra_off = c->ra_len = 0;
    mbedtls_ssl_set_bio(&c->ssl, c, bio_send, bio_recv, NULL);
}

int mh_tls_conn_handshake(struct mh_tls_conn *c)
{
    int ret = mbedtls_ssl_handshake(&c->ssl);
    while (ret == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) { /* TLS 1.3, client side */
        if (c->hooks->ticket)
            c->hooks->ticket(c);
        ret = mbedtls_ssl_handshake(&c->ssl);
    }
    if (ret == 0 && c->hooks->handshake_done)
        ret = c->hooks->handshake_done(c);
    if (ret == 0) {
        c->handshake_done = true;
        if (mh_log_enabled(MH_LOG_DEBUG))
            mh_log(MH_LOG_DEBUG, "fd %d: TLS handshake done: %s", c->fd,
                   mbedtls_ssl_get_ciphersuite(&c->ssl));
    }
    return ret;
}

/* ---- the transport ------------------------------------------------------- */

/*
 * Maps an mbedTLS result to the transport contract: -1 with errno, or 0 for
 * end of input. Protocol failures are logged once, at debug level: they are
 * what scanners, plain-HTTP clients and broken peers produce all day.
 */
static ssize_t tls_result(struct mh_transport *t, struct mh_tls_conn *c, int ret, bool reading)
{
    switch (ret) {
    case MBEDTLS_ERR_SSL_WANT_READ:
        if (!reading)
            t->wants |= MH_TRANSPORT_WRITE_WANTS_READ;
        errno = EAGAIN;
        return -1;
    case MBEDTLS_ERR_SSL_WANT_WRITE:
        if (reading)
            t->wants |= MH_TRANSPORT_READ_WANTS_WRITE;
        errno = EAGAIN;
        return -1;
    case MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY:
    case MBEDTLS_ERR_SSL_CONN_EOF:
    case 0:
        if (!c->handshake_done && !c->failed && c->bytes_in > 0) {
            mh_log(MH_LOG_DEBUG, "fd %d: TLS handshake truncated: peer closed", c->fd);
            c->failed = true;
        }
        if (reading)
            return 0;
        errno = EPIPE;
        return -1;
    case MBEDTLS_ERR_NET_CONN_RESET:
    case MBEDTLS_ERR_NET_SEND_FAILED:
    case MBEDTLS_ERR_NET_RECV_FAILED:
        errno = c->sys_errno ? c->sys_errno : ECONNRESET;
        return -1;
    default:
        if (!c->failed) {
            char msg[128];
            mbedtls_strerror(ret, msg, sizeof msg);
            bool plain = !c->handshake_done && c->first_byte >= 'A' && c->first_byte <= 'Z';
            mh_log(MH_LOG_DEBUG, "fd %d: TLS %s failed: %s%s", c->fd,
                   c->handshake_done ? "record" : "handshake", msg,
                   plain ? " (plain HTTP sent to a TLS port?)" : "");
            c->failed = true;
        }
        errno = EPROTO;
        return -1;
    }
}

static ssize_t tls_read(struct mh_transport *t, void *buf, size_t len)
{
    struct mh_tls_conn *c = t->_impl;
    t->wants &= ~MH_TRANSPORT_READ_WANTS_WRITE;
    if (!c->handshake_done) {
        int ret = mh_tls_conn_handshake(c);
        if (ret)
            return tls_result(t, c, ret, true);
    }
    int ret;
    for (;;) {
        ret = mbedtls_ssl_read(&c->ssl, buf, len);
        if (ret == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) { /* TLS 1.3, at any time */
            if (c->hooks->ticket)
                c->hooks->ticket(c);
            continue;
        }
        /*
         * After a post-handshake message (a TLS 1.3 ticket) Mbed TLS says
         * WANT_READ, meaning "call again": with the next records already
         * read ahead, no socket event would come to say so.
         */
        if (ret == MBEDTLS_ERR_SSL_WANT_READ && c->ra_off < c->ra_len)
            continue;
        break;
    }
    return ret > 0 ? ret : tls_result(t, c, ret, true);
}

/*
 * After WANT_WRITE, mbedTLS holds the encrypted record and on the next call
 * only flushes it, returning the length it is given: so that call must
 * name exactly the bytes of that record, not whatever the caller has now.
 * The caller's side of the rule (transport.h: start again with the same
 * bytes) makes the first write_pending bytes of buf the same ones.
 */
static ssize_t tls_write(struct mh_transport *t, const void *buf, size_t len)
{
    struct mh_tls_conn *c = t->_impl;
    t->wants &= ~MH_TRANSPORT_WRITE_WANTS_READ;
    if (!c->handshake_done) {
        int ret = mh_tls_conn_handshake(c);
        if (ret)
            return tls_result(t, c, ret, false);
    }
    if (c->write_pending && len > c->write_pending)
        len = c->write_pending;
    int ret = mbedtls_ssl_write(&c->ssl, buf, len);
    while (ret == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) {
        if (c->hooks->ticket)
            c->hooks->ticket(c);
        ret = mbedtls_ssl_write(&c->ssl, buf, len);
    }
    if (ret >= 0) {
        c->write_pending = 0;
        return ret;
    }
    if (ret == MBEDTLS_ERR_SSL_WANT_WRITE && !c->write_pending) {
        int max = mbedtls_ssl_get_max_out_record_payload(&c->ssl);
        c->write_pending = max > 0 && (size_t)max < len ? (size_t)max : len;
    }
    return tls_result(t, c, ret, false);
}

static void tls_shutdown(struct mh_transport *t)
{
    struct mh_tls_conn *c = t->_impl;
    if (c->shut)
        return;
    c->shut = true;
    /* Best effort: if the alert does not fit in the socket now, the peer sees a plain FIN. */
    if (c->handshake_done && !c->failed)
        mbedtls_ssl_close_notify(&c->ssl);
    shutdown(c->fd, SHUT_WR);
}

static void tls_close(struct mh_transport *t)
{
    struct mh_tls_conn *c = t->_impl;
    if (!c->handshake_done && !c->failed && c->bytes_in > 0)
        mh_log(MH_LOG_DEBUG, "fd %d: closed before the TLS handshake completed", c->fd);
    close(c->fd);
    c->fd = -1;
    t->fd = -1;
    t->_impl = NULL;
    c->hooks->release(c);
}

static bool tls_pending(const struct mh_transport *t)
{
    const struct mh_tls_conn *c = t->_impl;
    return c->ra_off < c->ra_len || mbedtls_ssl_get_bytes_avail(&c->ssl) > 0 ||
           mbedtls_ssl_check_pending(&c->ssl);
}

/* "" until the handshake is done or when the peers agreed on no protocol. */
static const char *tls_alpn(const struct mh_transport *t)
{
    const struct mh_tls_conn *c = t->_impl;
    const char *p = c && c->handshake_done ? mbedtls_ssl_get_alpn_protocol(&c->ssl) : NULL;
    return p ? p : "";
}

static const struct mh_transport_ops tls_ops = {
    .name = "tls",
    .read = tls_read,
    .write = tls_write,
    .shutdown = tls_shutdown,
    .close = tls_close,
    .pending = tls_pending,
    .alpn = tls_alpn,
};

void mh_tls_conn_transport(struct mh_tls_conn *c, struct mh_transport *t)
{
    t->ops = &tls_ops;
    t->fd = c->fd;
    t->wants = 0;
    t->_impl = c;
}

struct mh_tls_conn *mh_tls_conn_of(const struct mh_transport *t)
{
    return t->ops == &tls_ops ? t->_impl : NULL;
}
