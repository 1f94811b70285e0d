/*
 * The floor: the least work a single-threaded HTTP/1.1 responder can do on
 * Linux. No parsing beyond finding "\r\n\r\n", no routing, no Date header, one
 * fixed 200 response per request. Whatever a real server costs above this is
 * its own overhead; nothing on one core can be expected to go below it.
 *
 * Pipelining: every complete request in the read buffer is answered, all
 * answers in one write() straight from a static buffer of repeated responses,
 * so the steady state allocates nothing. Only a partial write copies the rest
 * into the connection's output buffer and waits for EPOLLOUT, so slow readers
 * are still correct.
 *
 * Usage: epoll_floor PORT   (binds 127.0.0.1 only)
 * FLOOR_ET=1 registers connections edge-triggered (EPOLLET, as nginx does):
 * a read that fills the buffer is repeated, since no new event will come.
 * Level-triggered (the default, as libev) makes every epoll_wait poll again
 * each socket it reported the time before.
 * SIGTERM/SIGINT exit through exit(), so LD_PRELOAD shims and profilers see a
 * normal process end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BODY "{\"name\":\"baseline\",\"users\":[]}"
#define RESPONSE                                                                                   \
    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 30\r\n\r\n" BODY
#define RBUF_SIZE 16384
#define MAX_EVENTS 256
/* The most "\r\n\r\n" one read can hold; real requests are longer. */
#define MAX_BATCH (RBUF_SIZE / 4)

_Static_assert(sizeof(BODY) - 1 == 30, "Content-Length must match the body");

struct conn {
    int fd;
    size_t rlen;    /* bytes of an incomplete request kept from earlier reads */
    char *out;      /* unsent responses, NULL when everything was written */
    size_t out_len, out_off;
    char rbuf[RBUF_SIZE];
};

static volatile sig_atomic_t stop;
static uint32_t et; /* EPOLLET or 0 */
static const char response[] = RESPONSE;
#define RESPONSE_LEN (sizeof response - 1)
static char responses[MAX_BATCH * RESPONSE_LEN]; /* response, MAX_BATCH times */

static void on_signal(int sig) {
    (void)sig;
    stop = 1;
}

/*
 * The end of the first "\r\n\r\n" in p[0..n), or NULL. memchr for '\n' is
 * vectorised; glibc's memmem sets up a general two-way search per call, which
 * costs more than the rest of the floor's per-request work.
 */
static char *find_head_end(char *p, size_t n) {
    char *end = p + n, *nl = p;
    while ((nl = memchr(nl, '\n', (size_t)(end - nl))) != NULL) {
        if (nl - p >= 3 && nl[-1] == '\r' && nl[-2] == '\n' && nl[-3] == '\r')
            return nl + 1;
        nl++;
    }
    return NULL;
}

static void conn_close(int ep, struct conn *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->out);
    free(c);
}

/* Sends what is pending. Returns -1 when the connection is dead. */
static int conn_flush(int ep, struct conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | et, .data.ptr = c};
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            return 0;
        }
        if (n < 0)
            return -1;
        c->out_off += (size_t)n;
    }
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_off = 0;
    return 0;
}

/*
 * Reads once, answers every complete request. The unanswered tail moves to the
 * front of rbuf; a head larger than rbuf is a client error and closes.
 * Returns 1 when the read filled the buffer (more may be waiting).
 */
static int conn_on_read(int ep, struct conn *c) {
    size_t room = sizeof c->rbuf - c->rlen;
    ssize_t n = read(c->fd, c->rbuf + c->rlen, room);
    if (n < 0)
        return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
    if (n == 0)
        return -1;
    int full = (size_t)n == room;
    size_t len = c->rlen + (size_t)n, done = 0, count = 0;
    /* Start the search 3 bytes back: the terminator may straddle two reads. */
    size_t from = c->rlen > 3 ? c->rlen - 3 : 0;
    for (;;) {
        char *end = find_head_end(c->rbuf + from, len - from);
        if (!end)
            break;
        count++;
        done = from = (size_t)(end - c->rbuf);
    }
    memmove(c->rbuf, c->rbuf + done, len - done);
    c->rlen = len - done;
    if (c->rlen == sizeof c->rbuf)
        return -1;
    if (count == 0)
        return full;

    size_t add = count * RESPONSE_LEN;
    if (!c->out) {
        ssize_t w = write(c->fd, responses, add);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (w == (ssize_t)add)
            return full;
        size_t sent = w > 0 ? (size_t)w : 0;
        c->out = malloc(add - sent);
        if (!c->out)
            return -1;
        memcpy(c->out, responses + sent, add - sent);
        c->out_len = add - sent;
        c->out_off = 0;
        return conn_flush(ep, c) < 0 ? -1 : full;
    }
    size_t old = c->out_len - c->out_off;
    char *out = malloc(old + add);
    if (!out)
        return -1;
    memcpy(out, c->out + c->out_off, old);
    memcpy(out + old, responses, add);
    free(c->out);
    c->out = out;
    c->out_off = 0;
    c->out_len = old + add;
    /* Waiting for EPOLLOUT already: the pending bytes go out with the rest. */
    return conn_flush(ep, c) < 0 ? -1 : full;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PORT\n", argv[0]);
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    const char *e = getenv("FLOOR_ET");
    et = e && *e == '1' ? EPOLLET : 0;
    for (size_t i = 0; i < MAX_BATCH; i++)
        memcpy(responses + i * RESPONSE_LEN, response, RESPONSE_LEN);

    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((unsigned short)atoi(argv[1])),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(lfd, 4096) < 0) {
        perror("bind/listen");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);

    struct epoll_event evs[MAX_EVENTS];
    while (!stop) {
        int n = epoll_wait(ep, evs, MAX_EVENTS, -1);
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *nc = malloc(sizeof *nc);
                    if (!nc) {
                        close(fd);
                        continue;
                    }
                    nc->fd = fd;
                    nc->rlen = nc->out_len = nc->out_off = 0;
                    nc->out = NULL;
                    struct epoll_event ev = {.events = EPOLLIN | et, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
                }
                continue;
            }
            int rc = 0;
            if (evs[i].events & EPOLLOUT) {
                rc = conn_flush(ep, c);
                if (rc == 0 && !c->out) {
                    struct epoll_event ev = {.events = EPOLLIN | et, .data.ptr = c};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
            }
            if (rc == 0 && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                while ((rc = conn_on_read(ep, c)) == 1 && et)
                    ;
                if (rc > 0)
                    rc = 0; /* level-triggered: the next epoll_wait reports the rest */
            }
            if (rc < 0)
                conn_close(ep, c);
        }
    }
    exit(0);
}
