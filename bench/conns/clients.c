/*
 * Connection-pressure client for bench/conns.sh (loopback only).
 *
 *   clients idle PORT N HOLD_S [PATH]
 *       Opens N keep-alive connections to 127.0.0.1:PORT, sends one
 *       "GET PATH" (default /api/users) on each, reads each response fully
 *       (Content-Length or chunked), then leaves them idle. When all N have
 *       their answer it prints "READY ok=N failed=F" on stdout (flushed) and
 *       holds the connections open for HOLD_S seconds, or until SIGTERM /
 *       SIGINT; then it prints "DONE alive=A closed_by_server=C" and exits.
 *       A connection the server closes while idle is counted, not reopened.
 *
 *   clients slowloris PORT N DURATION_S
 *       Keeps N slow-header connections open for DURATION_S seconds: each
 *       sends a partial request head ("GET /api/users HTTP/1.1\r\nHost: ..\r\n
 *       X-Slow: "), then one more header byte every 0.5-1 s (random), never
 *       finishing the head. When the server cuts a connection (EOF, reset, or
 *       a response such as 408) it is counted and a new one is opened at
 *       once, so N stay open. Prints every 5 s and at the end:
 *       "connects=.. cutoffs=.. responses=.. bytes_sent=.. lifetime_ms
 *       min/median/max=.." (lifetime: from connect to the cut).
 *
 * Single-threaded epoll; bounded in time; exits on SIGTERM/SIGINT.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static struct sockaddr_in addr;
static int ep;

static int open_conn(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- idle mode ---------------------------------------------------------- */

enum { C_CONNECTING, C_READING, C_IDLE, C_DEAD };
struct iconn {
    int fd, state;
    size_t sent, got;
    char *buf; /* response bytes until complete, then freed */
    size_t cap;
};

/* 1 = complete response in b[0..n), 0 = need more, -1 = cannot frame it. */
static int response_complete(const char *b, size_t n) {
    const char *end = memmem(b, n, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head = (size_t)(end - b) + 4;
    if (n < 12 || memcmp(b + 9, "200", 3) != 0)
        return -1;
    const char *p = b;
    while (p < end) {
        const char *nl = memmem(p, (size_t)(end + 2 - p), "\r\n", 2);
        if (!nl)
            break;
        if ((size_t)(nl - p) > 15 && strncasecmp(p, "content-length:", 15) == 0)
            return n >= head + strtoul(p + 15, NULL, 10) ? 1 : 0;
        if ((size_t)(nl - p) > 18 && strncasecmp(p, "transfer-encoding:", 18) == 0)
            return memmem(b + head, n - head, "\r\n0\r\n\r\n", 7) || (n - head >= 5 && memcmp(b + head, "0\r\n\r\n", 5) == 0) ? 1 : 0;
        p = nl + 2;
    }
    return 1; /* no body */
}

static int run_idle(int port, int n, double hold, const char *path) {
    (void)port;
    char req[512];
    int rl = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: conns-idle\r\n\r\n", path);
    struct iconn *cs = calloc((size_t)n, sizeof *cs);
    int ok = 0, failed = 0, open_now = 0, next = 0;
    const int batch = 200; /* connect in batches so the backlog never overflows */
    double deadline = now_s() + 120;
    struct epoll_event evs[512];
    while (ok + failed < n && !stop) {
        while (next < n && open_now < batch) {
            struct iconn *c = &cs[next];
            c->fd = open_conn();
            if (c->fd < 0) {
                fprintf(stderr, "clients: connect %d: %s\n", next, strerror(errno));
                c->state = C_DEAD;
                failed++;
                next++;
                continue;
            }
            struct epoll_event ev = {.events = EPOLLOUT | EPOLLIN, .data.u32 = (uint32_t)next};
            epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
            c->state = C_CONNECTING;
            open_now++;
            next++;
        }
        if (now_s() > deadline) {
            fprintf(stderr, "clients: gave up after 120 s with %d/%d answered\n", ok, n);
            break;
        }
        int k = epoll_wait(ep, evs, 512, 100);
        for (int i = 0; i < k; i++) {
            struct iconn *c = &cs[evs[i].data.u32];
            if (c->state == C_CONNECTING && (evs[i].events & EPOLLOUT)) {
                ssize_t w = write(c->fd, req + c->sent, (size_t)rl - c->sent);
                if (w > 0)
                    c->sent += (size_t)w;
                if (c->sent == (size_t)rl) {
                    c->state = C_READING;
                    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = evs[i].data.u32};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                } else if (w < 0 && errno != EAGAIN) {
                    goto dead;
                }
                continue;
            }
            if (c->state == C_READING && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
                if (c->cap - c->got < 4096) {
                    c->cap = c->cap ? c->cap * 2 : 8192;
                    c->buf = realloc(c->buf, c->cap);
                }
                ssize_t r = read(c->fd, c->buf + c->got, c->cap - c->got);
                if (r < 0 && errno == EAGAIN)
                    continue;
                if (r <= 0)
                    goto dead;
                c->got += (size_t)r;
                int st = response_complete(c->buf, c->got);
                if (st < 0)
                    goto dead;
                if (st == 1) {
                    free(c->buf);
                    c->buf = NULL;
                    c->state = C_IDLE;
                    ok++;
                    open_now--;
                    /* keep watching for the server closing it */
                    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = evs[i].data.u32};
                    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                }
                continue;
            }
            if (c->state == C_IDLE) { /* server closed an idle one early: counted at the end */
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                continue;
            }
            if (c->state == C_CONNECTING && (evs[i].events & (EPOLLHUP | EPOLLERR)))
                goto dead;
            continue;
        dead:
            epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);
            c->state = C_DEAD;
            failed++;
            open_now--;
        }
    }
    printf("READY ok=%d failed=%d\n", ok, failed);
    fflush(stdout);
    double end = now_s() + hold;
    while (!stop && now_s() < end)
        usleep(50000);
    int alive = 0, closed = 0;
    for (int i = 0; i < n; i++) {
        if (cs[i].state != C_IDLE)
            continue;
        char b[64];
        ssize_t r = recv(cs[i].fd, b, sizeof b, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN))
            closed++;
        else
            alive++;
    }
    printf("DONE alive=%d closed_by_server=%d\n", alive, closed);
    return ok == n ? 0 : 1;
}

/* ---- slowloris mode ----------------------------------------------------- */

struct sconn {
    int fd;
    int connected;
    double born, next_send;
    size_t pos; /* bytes of the head sent */
};

static const char slow_head[] = "GET /api/users HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slowloris\r\nX-Slow: ";
static long connects, cutoffs, responses, bytes_sent, connect_fail;
static double *lifetimes;
static size_t nlife, caplife;

static double jitter(void) { return 0.5 + (double)rand() / RAND_MAX * 0.5; }

static void s_open(struct sconn *c, int idx) {
    c->fd = open_conn();
    if (c->fd < 0) {
        connect_fail++;
        c->next_send = now_s() + 0.1; /* retry soon */
        return;
    }
    connects++;
    c->connected = 0;
    c->pos = 0;
    c->born = now_s();
    c->next_send = c->born; /* head goes out as soon as connected */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP, .data.u32 = (uint32_t)idx};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
}

static void s_cut(struct sconn *c, int idx) {
    if (nlife == caplife) {
        caplife = caplife ? caplife * 2 : 4096;
        lifetimes = realloc(lifetimes, caplife * sizeof *lifetimes);
    }
    lifetimes[nlife++] = (now_s() - c->born) * 1000;
    cutoffs++;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    s_open(c, idx);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void s_report(const char *tag, int n, struct sconn *cs) {
    int open_now = 0;
    for (int i = 0; i < n; i++)
        open_now += cs[i].fd >= 0;
    double mn = 0, md = 0, mx = 0;
    if (nlife) {
        double *t = malloc(nlife * sizeof *t);
        memcpy(t, lifetimes, nlife * sizeof *t);
        qsort(t, nlife, sizeof *t, cmp_d);
        mn = t[0], md = t[nlife / 2], mx = t[nlife - 1];
        free(t);
    }
    printf("%s open=%d connects=%ld cutoffs=%ld responses=%ld connect_fail=%ld bytes_sent=%ld lifetime_ms min/median/max=%.0f/%.0f/%.0f\n",
           tag, open_now, connects, cutoffs, responses, connect_fail, bytes_sent, mn, md, mx);
    fflush(stdout);
}

static int run_slowloris(int n, double duration) {
    struct sconn *cs = calloc((size_t)n, sizeof *cs);
    double start = now_s(), end = start + duration, next_report = start + 5;
    for (int i = 0; i < n; i++) {
        cs[i].fd = -1;
        s_open(&cs[i], i);
    }
    struct epoll_event evs[512];
    while (!stop && now_s() < end) {
        int k = epoll_wait(ep, evs, 512, 20);
        for (int i = 0; i < k; i++) {
            int idx = (int)evs[i].data.u32;
            struct sconn *c = &cs[idx];
            if (c->fd < 0)
                continue;
            if (evs[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
                char b[4096];
                ssize_t r = read(c->fd, b, sizeof b);
                if (r > 0)
                    responses++; /* e.g. 408: the server will close next */
                if (r > 0 || r == 0 || (r < 0 && errno != EAGAIN)) {
                    s_cut(c, idx);
                    continue;
                }
            }
            if ((evs[i].events & EPOLLOUT) && !c->connected) {
                c->connected = 1;
                struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = (uint32_t)idx};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                ssize_t w = write(c->fd, slow_head, sizeof slow_head - 1);
                if (w > 0) {
                    c->pos = (size_t)w;
                    bytes_sent += w;
                }
                c->next_send = now_s() + jitter();
            }
        }
        double t = now_s();
        for (int i = 0; i < n; i++) {
            struct sconn *c = &cs[i];
            if (c->fd < 0) {
                if (t >= c->next_send)
                    s_open(c, i);
                continue;
            }
            if (!c->connected || t < c->next_send)
                continue;
            ssize_t w = write(c->fd, "a", 1);
            if (w == 1) {
                bytes_sent++;
                c->pos++;
                c->next_send = t + jitter();
            } else if (w < 0 && errno != EAGAIN) {
                s_cut(c, i);
            }
        }
        if (t >= next_report) {
            s_report("progress", n, cs);
            next_report += 5;
        }
    }
    s_report("final", n, cs);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: clients idle PORT N HOLD_S [PATH] | clients slowloris PORT N DURATION_S\n");
        return 2;
    }
    int port = atoi(argv[2]), n = atoi(argv[3]);
    double t = atof(argv[4]);
    if (n <= 0 || n > 100000 || t < 0 || t > 3600) {
        fprintf(stderr, "clients: bad N or duration\n");
        return 2;
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if ((rlim_t)n + 64 > rl.rlim_cur) {
        fprintf(stderr, "clients: %d connections need more than the fd limit %lu\n", n, (unsigned long)rl.rlim_cur);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    srand((unsigned)getpid());
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (strcmp(argv[1], "idle") == 0)
        return run_idle(port, n, t, argc > 5 ? argv[5] : "/api/users");
    if (strcmp(argv[1], "slowloris") == 0)
        return run_slowloris(n, t);
    fprintf(stderr, "clients: unknown mode %s\n", argv[1]);
    return 2;
}
