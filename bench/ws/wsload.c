/*
 * A WebSocket echo load generator for bench/ws.sh: CONNS connections to
 * ws://127.0.0.1:PORT/PATH, each keeping WINDOW masked SIZE-byte text
 * messages in flight (a new one sent for each echo that comes back), for
 * SECONDS after all handshakes are done. One thread and epoll, so a single
 * core drives a server core harder than a Node.js client can (the figure is
 * the server's CPU per message, so the client must not be the limit).
 *
 * Usage: wsload PORT PATH CONNS WINDOW SECONDS SIZE   -> prints "messages N"
 * Exits 1 on a failed handshake, a closed connection or a frame it does not expect.
 */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
    int fd;
    int upgraded;
    char in[65536];
    size_t inlen;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            die("write");
        }
        p += w;
        n -= (size_t)w;
    }
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: wsload PORT PATH CONNS WINDOW SECONDS SIZE\n");
        return 2;
    }
    int port = atoi(argv[1]), nconns = atoi(argv[3]), window = atoi(argv[4]);
    double seconds = atof(argv[5]);
    size_t size = (size_t)atoi(argv[6]);
    if (size > 125 || nconns < 1 || window < 1) {
        fprintf(stderr, "wsload: SIZE must be at most 125 (one-byte lengths), CONNS and WINDOW >= 1\n");
        return 2;
    }
    /* One masked frame, sent WINDOW times at the start and once per echo. */
    char frame[6 + 125];
    frame[0] = (char)0x81;
    frame[1] = (char)(0x80 | size);
    memcpy(frame + 2, "\x1a\x2b\x3c\x4d", 4);
    for (size_t i = 0; i < size; i++)
        frame[6 + i] = (char)('x' ^ frame[2 + (i & 3)]);
    size_t flen = 6 + size, echo_len = 2 + size;
    char burst[sizeof frame * 64];
    if (window > 64)
        window = 64;
    for (int k = 0; k < 64; k++)
        memcpy(burst + k * flen, frame, flen);

    int ep = epoll_create1(0);
    struct conn *cs = calloc((size_t)nconns, sizeof *cs);
    char req[512];
    int rlen = snprintf(req, sizeof req,
                        "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n",
                        argv[2]);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    for (int i = 0; i < nconns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            die("connect");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        cs[i].fd = fd;
        send_all(fd, req, (size_t)rlen);
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    long count = 0;
    int open = 0;
    double end = 0;
    struct epoll_event evs[256];
    for (;;) {
        if (end && now() >= end)
            break;
        int n = epoll_wait(ep, evs, 256, 1000);
        for (int e = 0; e < n; e++) {
            struct conn *c = evs[e].data.ptr;
            ssize_t r = read(c->fd, c->in + c->inlen, sizeof c->in - c->inlen);
            if (r <= 0) {
                fprintf(stderr, "wsload: connection closed\n");
                return 1;
            }
            c->inlen += (size_t)r;
            size_t off = 0;
            if (!c->upgraded) {
                char *eoh = memmem(c->in, c->inlen, "\r\n\r\n", 4);
                if (!eoh)
                    continue;
                if (strncmp(c->in, "HTTP/1.1 101", 12) != 0) {
                    fprintf(stderr, "wsload: handshake refused: %.40s\n", c->in);
                    return 1;
                }
                c->upgraded = 1;
                off = (size_t)(eoh + 4 - c->in);
                if (++open == nconns) {
                    end = now() + seconds;
                    for (int i = 0; i < nconns; i++)
                        send_all(cs[i].fd, burst, flen * (size_t)window);
                }
            }
            size_t echoes = 0;
            while (c->inlen - off >= echo_len) {
                if ((unsigned char)c->in[off] != 0x81 || (size_t)(c->in[off + 1] & 0x7f) != size) {
                    fprintf(stderr, "wsload: unexpected frame 0x%02x\n", (unsigned char)c->in[off]);
                    return 1;
                }
                off += echo_len;
                echoes++;
            }
            memmove(c->in, c->in + off, c->inlen - off);
            c->inlen -= off;
            if (echoes && end) {
                count += (long)echoes;
                /* Replace what came back: one write for all of them. */
                while (echoes) {
                    size_t k = echoes > 64 ? 64 : echoes;
                    send_all(c->fd, burst, flen * k);
                    echoes -= k;
                }
            }
        }
    }
    printf("messages %ld\n", count);
    return 0;
}
