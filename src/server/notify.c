#define _GNU_SOURCE /* SOCK_CLOEXEC */
#include "notify.h"

#include "log.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * WATCHDOG_PID, when set, names the process the watchdog is meant for: any
 * other (a moonhttp started by the service's own ExecStartPre, say) must not
 * ping. Pinging at half the period is what sd_watchdog_enabled(3) advises.
 */
static double watchdog_period(void)
{
    const char *usec = getenv("WATCHDOG_USEC");
    const char *pid = getenv("WATCHDOG_PID");
    if (!usec)
        return 0;
    if (pid && strtol(pid, NULL, 10) != (long)getpid())
        return 0;
    char *end;
    unsigned long long us = strtoull(usec, &end, 10);
    if (*end || us == 0)
        return 0;
    return (double)us / 2e6;
}

void mh_notify_init(struct mh_notify *n)
{
    memset(n, 0, sizeof *n);
    n->fd = -1;
    const char *path = getenv("NOTIFY_SOCKET");
    if (path && *path) {
        size_t len = strlen(path);
        if ((path[0] != '/' && path[0] != '@') || len >= sizeof n->addr.sun_path) {
            mh_log(MH_LOG_WARN, "NOTIFY_SOCKET \"%s\" is not a unix socket path: not notifying",
                   path);
        } else {
            n->addr.sun_family = AF_UNIX;
            memcpy(n->addr.sun_path, path, len);
            if (path[0] == '@')
                n->addr.sun_path[0] = 0; /* abstract: the name is exactly len bytes, no NUL */
            n->addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
            n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            if (n->fd < 0)
                mh_log(MH_LOG_WARN, "NOTIFY_SOCKET: socket: %s", strerror(errno));
        }
    }
    if (n->fd >= 0)
        n->watchdog = watchdog_period();
    unsetenv("NOTIFY_SOCKET");
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
}

void mh_notify_export(const struct mh_notify *n)
{
    if (!mh_notify_on(n))
        return;
    char path[sizeof n->addr.sun_path + 1];
    size_t len = n->addrlen - offsetof(struct sockaddr_un, sun_path);
    memcpy(path, n->addr.sun_path, len);
    path[len] = 0;
    if (path[0] == 0)
        path[0] = '@';
    setenv("NOTIFY_SOCKET", path, 1);
    if (n->watchdog > 0) {
        char usec[32];
        snprintf(usec, sizeof usec, "%llu", (unsigned long long)(n->watchdog * 2e6));
        setenv("WATCHDOG_USEC", usec, 1);
    }
}

void mh_notify_close(struct mh_notify *n)
{
    if (n->fd >= 0)
        close(n->fd);
    n->fd = -1;
}

int mh_notify_send(struct mh_notify *n, const char *state)
{
    if (!mh_notify_on(n))
        return 0;
    ssize_t r;
    do
        r = sendto(n->fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&n->addr,
                   n->addrlen);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        mh_log(MH_LOG_DEBUG, "NOTIFY_SOCKET: %s", strerror(errno));
        return -1;
    }
    return 0;
}

int mh_notify_reloading(struct mh_notify *n)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char msg[96];
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
    return mh_notify_send(n, msg);
}
