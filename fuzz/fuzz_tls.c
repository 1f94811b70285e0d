/*
 * libFuzzer target for the server side of TLS (net/tls.c over the one
 * transport of net/tls_conn.c): the input is what a client sends, from its
 * ClientHello on, written into a socketpair whose other end a listener's
 * mh_tls_accept took. The server reads until the input runs out (EOF after
 * it) or it fails, its answers drained as they come; then the connection
 * closes and its context goes back to the pool, so the next input starts on
 * a reset context as a real listener's next connection does. The
 * certificate is fuzz/tls/cert.pem (P-256, a test key, nothing else).
 */
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef MH_FUZZ_TLS_DIR
#define MH_FUZZ_TLS_DIR "fuzz/tls"
#endif

static struct mh_tls_server *server(void)
{
    static struct mh_tls_server *srv;
    if (srv)
        return srv;
    struct mh_tls_certs certs = {.n = 1, .http2 = true};
    certs.cert[0] = MH_FUZZ_TLS_DIR "/cert.pem";
    certs.key[0] = MH_FUZZ_TLS_DIR "/key.pem";
    char err[256];
    if (!(srv = mh_tls_server_new(&certs, err, sizeof err))) {
        fprintf(stderr, "fuzz_tls: %s\n", err);
        abort();
    }
    return srv;
}

static void drain(int fd)
{
    char sink[16384];
    while (read(fd, sink, sizeof sink) > 0) {
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mh_tls_server *srv = server();
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) < 0)
        abort();
    struct mh_transport t;
    if (mh_tls_accept(srv, &t, fds[0]) < 0)
        abort();
    size_t off = 0;
    bool eof = false;
    for (int turn = 0; turn < 10000; turn++) {
        if (off < size) {
            ssize_t n = write(fds[1], data + off, size - off);
            if (n > 0)
                off += (size_t)n;
        } else if (!eof) {
            shutdown(fds[1], SHUT_WR);
            eof = true;
        }
        char buf[4096];
        ssize_t n = mh_transport_read(&t, buf, sizeof buf);
        drain(fds[1]);
        if (n == 0 || (n < 0 && errno != EAGAIN))
            break;
        if (n < 0 && eof && !mh_transport_pending(&t))
            break; /* waits for input that will never come */
        if (n > 0 && eof && !mh_transport_pending(&t))
            (void)mh_transport_write(&t, "ok", 2); /* an application record back */
    }
    mh_transport_shutdown(&t);
    drain(fds[1]);
    mh_transport_close(&t);
    close(fds[1]);
    return 0;
}
