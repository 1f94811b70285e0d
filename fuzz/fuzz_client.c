#define _GNU_SOURCE /* accept4 */
/*
 * libFuzzer target for the HTTP client's response parsing (src/client/):
 * heads, Content-Length, chunked and close-delimited bodies, HEAD responses,
 * malformed input, and the background drain of unread bodies. A loopback
 * listener inside this process plays the server: it accepts the client's
 * connection, writes the input in pieces and closes, so the real client
 * code runs unchanged over a real socket.
 *
 * The first input byte picks the mode: bit 0 HEAD request, bit 1 finish
 * right after the head (the drain path), bit 2 read the body in small
 * steps instead of whole, bits 3-7 the size of the server's writes.
 */
#include "client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct ev_loop *loop;
static int listen_fd = -1;
static uint16_t listen_port;

static struct {
    const uint8_t *data;
    size_t left, step;
    int fd;
    ev_io accept_io, write_io;
    struct mh_client_req req;
    bool finish_after_head, small_steps, done;
} run;

static void setup(void)
{
    loop = EV_DEFAULT;
    signal(SIGPIPE, SIG_IGN);
    listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&a, len) < 0 ||
        listen(listen_fd, 16) < 0 || getsockname(listen_fd, (struct sockaddr *)&a, &len) < 0)
        abort();
    listen_port = ntohs(a.sin_port);
}

/* The server side: write the next piece, close after the last one. */
static void on_server_write(struct ev_loop *l, ev_io *w, int revents)
{
    while (run.left > 0) {
        size_t n = run.left < run.step ? run.left : run.step;
        ssize_t got = write(run.fd, run.data, n);
        if (got < 0 && errno == EAGAIN)
            return;
        if (got <= 0)
            break; /* the client hung up */
        run.data += got;
        run.left -= (size_t)got;
        if (run.step < 64)
            return; /* one small piece per loop turn, so reads split the input */
    }
    ev_io_stop(l, w);
    close(run.fd);
    run.fd = -1;
}

static void on_accept(struct ev_loop *l, ev_io *w, int revents)
{
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
        return;
    ev_io_stop(l, w);
    run.fd = fd;
    ev_io_init(&run.write_io, on_server_write, fd, EV_WRITE);
    ev_io_start(l, &run.write_io);
}

static void finish(void)
{
    mh_client_req_finish(&run.req);
    run.done = true;
    ev_break(loop, EVBREAK_ALL);
}

static void on_event(struct mh_client_req *r, enum mh_client_event ev)
{
    size_t len;
    if (r->err || (ev == MH_CLIENT_HEAD && run.finish_after_head)) {
        finish();
        return;
    }
    if (ev == MH_CLIENT_HEAD) {
        const char *h = mh_client_head(r, &len);
        (void)h;
    }
    for (;;) {
        mh_client_body(r, &len);
        mh_client_body_consume(r, run.small_steps && len > 7 ? 7 : len);
        if (r->err || !r->conn || (r->body_done && len == 0)) {
            finish();
            return;
        }
        if (len > 0)
            continue;
        if (mh_client_body_want(r, !run.small_steps))
            return; /* MH_CLIENT_BODY comes later */
        mh_client_body(r, &len);
        if (len == 0 && !r->body_done && !r->err && r->conn) {
            /* nothing buffered and nothing to wait for: the contract says this cannot be */
            abort();
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (listen_fd < 0)
        setup();
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    memset(&run, 0, sizeof run);
    run.data = data + 1;
    run.left = size - 1;
    run.step = (size_t)(mode >> 3) * 8 + 1;
    run.fd = -1;
    run.finish_after_head = mode & 2;
    run.small_steps = mode & 4;

    struct mh_client_settings s;
    mh_client_settings_init(&s);
    struct mh_client_pool *pool = mh_client_pool_new(loop, &s);
    if (!pool)
        abort();
    struct mh_client_req *r = &run.req;
    r->pool = pool;
    snprintf(r->host, sizeof r->host, "127.0.0.1");
    r->port = listen_port;
    r->is_head = mode & 1;
    r->data =
        r->is_head ? "HEAD / HTTP/1.1\r\nHost: f\r\n\r\n" : "GET / HTTP/1.1\r\nHost: f\r\n\r\n";
    r->len = strlen(r->data);
    r->idempotent = false; /* one connection per input: no retry on a fresh one */
    r->timeout = 5;
    r->on_event = on_event;

    ev_io_init(&run.accept_io, on_accept, listen_fd, EV_READ);
    ev_io_start(loop, &run.accept_io);
    mh_client_start(r);
    while (!run.done)
        ev_run(loop, EVRUN_ONCE);
    /* let a background drain see the rest of the bytes and the close */
    while (run.fd >= 0 && ev_run(loop, EVRUN_ONCE)) {
    }
    ev_io_stop(loop, &run.accept_io);
    ev_io_stop(loop, &run.write_io);
    if (run.fd >= 0)
        close(run.fd);
    int stray; /* a connection the client made but the server never took */
    while ((stray = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
        close(stray);
    mh_client_pool_unref(pool);
    return 0;
}
