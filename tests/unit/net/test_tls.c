/*
 * The TLS transport without the event loop: handshakes with an mbedTLS
 * client over socketpairs, mh_tls_reload swapping certificates for new
 * connections while an open one goes on with the old configuration, and
 * moonhttp's own client side against its server side over the one
 * transport, writing past a full socket.
 * Certificates are made with the openssl CLI in a temporary directory.
 */
#include "client_tls.h"
#include "tls.h"
#include "tls_conn.h"

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"

static char dir[] = "/tmp/mh-test-tls-XXXXXX";

static void make_cert(const char *name)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout %s/%s.key -out %s/%s.pem -days 2 -subj /CN=%s >/dev/null 2>&1",
             dir, name, dir, name, name);
    if (system(cmd) != 0) {
        printf("cannot run openssl to make a certificate\n");
        exit(1);
    }
}

static struct mh_tls_certs certs_for(const char *name)
{
    static char cert[4][256], key[4][256];
    static int n;
    int i = n++ % 4;
    snprintf(cert[i], sizeof cert[i], "%s/%s.pem", dir, name);
    snprintf(key[i], sizeof key[i], "%s/%s.key", dir, name);
    struct mh_tls_certs c = {.n = 1};
    c.cert[0] = cert[i];
    c.key[0] = key[i];
    return c;
}

struct client {
    mbedtls_ssl_context ssl;
    mbedtls_net_context net;
};

static mbedtls_entropy_context entropy;
static mbedtls_ctr_drbg_context drbg;
static mbedtls_ssl_config client_conf;

static void client_setup(void)
{
    mbedtls_entropy_init(&entropy);
    mbedtls_ctr_drbg_init(&drbg);
    mbedtls_ssl_config_init(&client_conf);
    mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy, NULL, 0);
    mbedtls_ssl_config_defaults(&client_conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                MBEDTLS_SSL_PRESET_DEFAULT);
    mbedtls_ssl_conf_authmode(&client_conf, MBEDTLS_SSL_VERIFY_NONE);
    mbedtls_ssl_conf_rng(&client_conf, mbedtls_ctr_drbg_random, &drbg);
}

/*
 * Opens a socketpair, accepts one end on srv and handshakes the other with
 * a client, driving both sides by turns. Returns 0 when both are done.
 */
static int connect_pair(struct mh_tls_server *srv, struct mh_transport *t, struct client *c)
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) < 0)
        return -1;
    if (mh_tls_accept(srv, t, fds[0]) < 0)
        return -1;
    mbedtls_ssl_init(&c->ssl);
    mbedtls_ssl_setup(&c->ssl, &client_conf);
    mbedtls_net_init(&c->net);
    c->net.fd = fds[1];
    mbedtls_ssl_set_bio(&c->ssl, &c->net, mbedtls_net_send, mbedtls_net_recv, NULL);
    for (int i = 0; i < 100; i++) {
        char buf[16];
        ssize_t n = mh_transport_read(t, buf, sizeof buf); /* drives the server handshake */
        if (n >= 0 || errno != EAGAIN)
            return -1;
        int ret = mbedtls_ssl_handshake(&c->ssl);
        if (ret == 0)
            return 0;
        if (ret != MBEDTLS_ERR_SSL_WANT_READ && ret != MBEDTLS_ERR_SSL_WANT_WRITE)
            return -1;
    }
    return -1;
}

static void client_close(struct client *c)
{
    mbedtls_ssl_free(&c->ssl);
    mbedtls_net_free(&c->net);
}

static bool peer_is(struct client *c, const char *cn)
{
    const mbedtls_x509_crt *crt = mbedtls_ssl_get_peer_cert(&c->ssl);
    char subject[256];
    if (!crt || mbedtls_x509_dn_gets(subject, sizeof subject, &crt->subject) < 0)
        return false;
    char want[256];
    snprintf(want, sizeof want, "CN=%s", cn);
    return strcmp(subject, want) == 0;
}

/* A request and a response still pass over an established connection. */
static bool round_trip(struct mh_transport *t, struct client *c)
{
    char buf[64];
    if (mbedtls_ssl_write(&c->ssl, (const unsigned char *)"ping", 4) != 4)
        return false;
    ssize_t n = mh_transport_read(t, buf, sizeof buf);
    if (n != 4 || memcmp(buf, "ping", 4) != 0)
        return false;
    if (mh_transport_write(t, "pong", 4) != 4)
        return false;
    int r = mbedtls_ssl_read(&c->ssl, (unsigned char *)buf, sizeof buf);
    return r == 4 && memcmp(buf, "pong", 4) == 0;
}

/*
 * moonhttp on both ends: the client side (client_tls.h) handshakes with the
 * server side, both become the transport of tls_conn.h, and the client
 * writes 256 KiB in 700-byte pieces into a small socket whose reader takes
 * 1,000 bytes every other turn. After an EAGAIN the next write starts with the same
 * bytes but names everything left (transport.h allows it: a caller's
 * buffer grows while it waits), so a transport that answered that retry
 * with more than the record it flushed would lose bytes here.
 */
static void both_ends(struct mh_tls_server *srv)
{
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) < 0) {
        CHECKF(0, "socketpair");
        return;
    }
    int small = 4096;
    setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    struct mh_transport st, ct;
    CHECK(mh_tls_accept(srv, &st, fds[0]) == 0);
    const char *err = NULL;
    struct mh_client_tls_cfg *cfg =
        mh_client_tls_cfg_new(&(struct mh_client_tls_opts){.verify = false}, &err);
    struct mh_client_tls *tls = cfg ? mh_client_tls_new(cfg, fds[1], "new.test", NULL, &err) : NULL;
    CHECKF(tls != NULL, "client session: %s", err ? err : "");
    if (!tls)
        return;
    int rc = MH_TLS_WANT_READ;
    for (int i = 0; i < 100 && rc != 0 && rc != MH_TLS_ERROR; i++) {
        char b[16];
        (void)mh_transport_read(&st, b, sizeof b); /* drives the server's side */
        rc = mh_client_tls_handshake(tls, &err);
    }
    CHECKF(rc == 0, "client handshake: %s", rc ? err : "");
    mh_client_tls_transport(tls, &ct, fds[1]);
    CHECKF(mh_tls_conn_of(&ct) && mh_tls_conn_of(&st) && ct.ops == st.ops,
           "client and server run on the same transport");

    static unsigned char out[256 * 1024], in[sizeof out];
    for (size_t i = 0; i < sizeof out; i++)
        out[i] = (unsigned char)(i * 7 + i / 4096);
    size_t sent = 0, got = 0;
    int again = 0;
    bool retry = false;
    for (int turn = 0; turn < 200000 && got < sizeof out; turn++) {
        if (sent < sizeof out) {
            size_t left = sizeof out - sent;
            ssize_t n = mh_transport_write(&ct, out + sent, retry || left < 700 ? left : 700);
            retry = n < 0 && errno == EAGAIN;
            if (n > 0)
                sent += (size_t)n;
            else if (retry)
                again++;
            else
                break;
        }
        size_t want = sizeof out - got < 1000 ? sizeof out - got : 1000;
        if (turn % 2 && sent < sizeof out)
            continue; /* the reader is slower than the writer */
        ssize_t n = mh_transport_read(&st, in + got, want);
        if (n > 0)
            got += (size_t)n;
    }
    CHECKF(again > 0, "the client met a full socket (%d EAGAINs)", again);
    CHECKF(sent == sizeof out && got == sizeof out && memcmp(in, out, sizeof out) == 0,
           "every byte arrives once, in order: sent %zu, read %zu", sent, got);
    mh_transport_close(&ct);
    mh_transport_close(&st);
    mh_client_tls_cfg_free(cfg);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    make_cert("old.test");
    make_cert("new.test");
    client_setup();
    char err[512];
    char name[128];

    struct mh_tls_certs missing = certs_for("missing.test");
    CHECKF(mh_tls_server_new(&missing, err, sizeof err) == NULL && strstr(err, "missing.test"),
           "a missing file is an error naming it: %s", err);

    struct mh_tls_certs old_certs = certs_for("old.test"), new_certs = certs_for("new.test");
    struct mh_tls_server *srv = mh_tls_server_new(&old_certs, err, sizeof err);
    CHECKF(srv != NULL, "server: %s", err);
    if (!srv)
        return 1;

    struct mh_transport t1, t2, t3;
    struct client c1, c2, c3;
    CHECKF(connect_pair(srv, &t1, &c1) == 0, "first handshake");
    CHECKF(peer_is(&c1, "old.test"), "first connection gets the old certificate");

    CHECKF(mh_tls_reload(srv, &new_certs, err, sizeof err) == 0, "reload: %s", err);
    CHECKF(strcmp(mh_tls_server_default_name(srv, name, sizeof name), "new.test") == 0,
           "new default name: %s", name);
    CHECKF(round_trip(&t1, &c1), "the open connection goes on after the reload");

    CHECKF(connect_pair(srv, &t2, &c2) == 0, "second handshake");
    CHECKF(peer_is(&c2, "new.test"), "a new connection gets the new certificate");

    CHECKF(mh_tls_reload(srv, &missing, err, sizeof err) < 0, "reload with a missing file fails");
    CHECKF(connect_pair(srv, &t3, &c3) == 0, "third handshake");
    CHECKF(peer_is(&c3, "new.test"), "a failed reload changes nothing");
    both_ends(srv);

    /* Closing the last connection on the old configuration frees it (LeakSanitizer checks). */
    mh_transport_close(&t1);
    client_close(&c1);
    CHECKF(round_trip(&t2, &c2), "connections on the new configuration are unaffected");
    mh_tls_server_unref(srv); /* listener gone: open connections keep their configuration */
    CHECKF(round_trip(&t3, &c3), "a connection outlives its server handle");
    mh_transport_close(&t2);
    mh_transport_close(&t3);
    client_close(&c2);
    client_close(&c3);

    mbedtls_ssl_config_free(&client_conf);
    mbedtls_ctr_drbg_free(&drbg);
    mbedtls_entropy_free(&entropy);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        printf("could not remove %s\n", dir);
    return unit_report();
}
