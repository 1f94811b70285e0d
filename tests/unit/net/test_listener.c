/*
 * mh_listener_open_set on loopback: a set of SO_REUSEPORT sockets shares
 * one port (port 0: the first socket's), a plain bind of that port and a
 * second set fail with "address in use", a port taken by another socket
 * fails the first bind, and the kernel spreads connections over the set.
 */
#include "listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "unit.h"

#define N 3

/* 0, or the errno of a bind as moonhttp makes it (SO_REUSEADDR: TIME_WAIT does not count) */
static int plain_bind(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    int e = errno;
    close(fd);
    return rc < 0 ? e : 0;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void test_set_shares_port(void)
{
    struct mh_listener ls[N];
    char err[256] = "";
    CHECKF(mh_listener_open_set(ls, N, "127.0.0.1:0", 128, err, sizeof err) == NULL, "%s", err);
    int port = mh_listener_port(&ls[0]);
    CHECK(port > 0);
    for (int i = 1; i < N; i++) {
        CHECK(ls[i].fd >= 0 && ls[i].fd != ls[0].fd);
        CHECK(mh_listener_port(&ls[i]) == port);
    }
    /* a plain bind, as another program makes it, is refused */
    CHECK(plain_bind(port) == EADDRINUSE);
    /* so is a second set: its first bind is a plain one */
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    struct mh_listener other[2];
    err[0] = 0;
    CHECK_STR(mh_listener_open_set(other, 2, addr, 128, err, sizeof err), "address in use");
    CHECK(strstr(err, "address already in use") != NULL);

    /* 300 connections: every socket of the set gets some, none most */
    int counts[N] = {0};
    for (int c = 0; c < 300; c++) {
        int fd = connect_to(port);
        CHECK(fd >= 0);
        for (int i = 0; i < N; i++) {
            int a = accept(ls[i].fd, NULL, NULL);
            if (a >= 0) {
                counts[i]++;
                close(a);
            }
        }
        close(fd);
    }
    for (int i = 0; i < N; i++)
        CHECKF(counts[i] > 50 && counts[i] < 150, "socket %d took %d of 300", i, counts[i]);
    for (int i = 0; i < N; i++)
        mh_listener_close(&ls[i]);
    /* every socket closed: the port is free again */
    CHECK(plain_bind(port) == 0);
}

static void test_busy_port_fails_first(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    /* even a socket that allows SO_REUSEPORT itself does not let the set in */
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 8) == 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    char addr[64], err[256] = "";
    snprintf(addr, sizeof addr, "127.0.0.1:%d", ntohs(a.sin_port));
    struct mh_listener ls[2];
    CHECK_STR(mh_listener_open_set(ls, 2, addr, 128, err, sizeof err), "address in use");
    CHECK_STR(mh_listener_open_set(ls, 1, addr, 128, err, sizeof err), "address in use");
    close(fd);
}

static void test_single_is_plain(void)
{
    struct mh_listener l;
    char err[256] = "";
    CHECK(mh_listener_open_set(&l, 1, "127.0.0.1:0", 16, err, sizeof err) == NULL);
    int on = -1;
    socklen_t len = sizeof on;
    getsockopt(l.fd, SOL_SOCKET, SO_REUSEPORT, &on, &len);
    CHECK(on == 0); /* one socket: no SO_REUSEPORT at all */
    mh_listener_close(&l);
    CHECK_STR(mh_listener_open_set(&l, 2, "nonsense:x", 16, err, sizeof err), "bad listen address");
}

int main(void)
{
    test_set_shares_port();
    test_busy_port_fails_first();
    test_single_is_plain();
    return unit_report();
}
