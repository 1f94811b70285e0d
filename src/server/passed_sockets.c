#include "passed_sockets.h"

#include "listener.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_PASSED          256
#define SD_LISTEN_FDS_START 3 /* sd_listen_fds(3) */

struct passed {
    int fd; /* -1 once taken */
    char name[64];
    struct sockaddr_storage addr;
};

static struct passed passed[MAX_PASSED];
static size_t npassed;
static enum mh_passed_from from;

enum mh_passed_from mh_passed_sockets_from(void)
{
    return from;
}

static int add(int fd, const char *name, size_t namelen, char *err, size_t errlen)
{
    if (npassed == MAX_PASSED) {
        snprintf(err, errlen, "more than %d listening sockets passed", MAX_PASSED);
        return -1;
    }
    struct passed *p = &passed[npassed];
    int type = 0, listening = 0;
    socklen_t len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0 || type != SOCK_STREAM ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &(socklen_t){sizeof listening}) < 0 ||
        !listening) {
        snprintf(err, errlen, "passed descriptor %d is not a listening stream socket%s%s", fd,
                 errno == EBADF ? ": " : "", errno == EBADF ? strerror(errno) : "");
        return -1;
    }
    len = sizeof p->addr;
    if (getsockname(fd, (struct sockaddr *)&p->addr, &len) < 0 ||
        (p->addr.ss_family != AF_INET && p->addr.ss_family != AF_INET6)) {
        snprintf(err, errlen, "passed socket %d is not a TCP/IP socket", fd);
        return -1;
    }
    /* Close-on-exec: workers get them by fork, commands an app runs never. */
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    p->fd = fd;
    if (namelen >= sizeof p->name)
        namelen = sizeof p->name - 1;
    memcpy(p->name, name, namelen);
    p->name[namelen] = 0;
    npassed++;
    return 0;
}

/* MOONHTTP_LISTEN_FDS="3;4;5:metrics;": what the old master of a binary upgrade held. */
static int load_upgrade(const char *v, char *err, size_t errlen)
{
    while (*v) {
        char *end;
        long fd = strtol(v, &end, 10);
        const char *name = end;
        if (*end == ':')
            name = ++end;
        end += strcspn(end, ";");
        if (name == v || fd < 0 || fd > 65535) {
            snprintf(err, errlen, MH_PASSED_UPGRADE_VAR " is malformed at \"%s\"", v);
            return -1;
        }
        if (add((int)fd, name, (size_t)(end - name), err, errlen) < 0)
            return -1;
        v = *end ? end + 1 : end;
    }
    return 0;
}

/* LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES: systemd's socket activation. */
static int load_systemd(const char *count, char *err, size_t errlen)
{
    const char *pid = getenv("LISTEN_PID");
    if (!pid || atol(pid) != (long)getpid())
        return 0; /* meant for another process (a parent that did not unset them) */
    char *end;
    long n = strtol(count, &end, 10);
    if (*end || n < 0 || n > MAX_PASSED) {
        snprintf(err, errlen, "LISTEN_FDS=\"%s\" is not a count of sockets", count);
        return -1;
    }
    const char *names = getenv("LISTEN_FDNAMES");
    for (long i = 0; i < n; i++) {
        const char *name = "";
        size_t namelen = 0;
        if (names) {
            name = names;
            const char *colon = strchr(names, ':');
            namelen = colon ? (size_t)(colon - names) : strlen(names);
            names = colon ? colon + 1 : names + namelen;
        }
        if (add(SD_LISTEN_FDS_START + (int)i, name, namelen, err, errlen) < 0)
            return -1;
    }
    return 0;
}

int mh_passed_sockets_load(char *err, size_t errlen)
{
    const char *upgrade = getenv(MH_PASSED_UPGRADE_VAR);
    const char *systemd = getenv("LISTEN_FDS");
    int rc = 0;
    if (upgrade) {
        from = MH_PASSED_UPGRADE;
        rc = load_upgrade(upgrade, err, errlen);
    } else if (systemd) {
        from = MH_PASSED_SYSTEMD;
        rc = load_systemd(systemd, err, errlen);
    }
    if (npassed == 0 && rc == 0)
        from = MH_PASSED_NONE;
    unsetenv(MH_PASSED_UPGRADE_VAR);
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDNAMES");
    return rc;
}

static bool is_any(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
}

static unsigned port_of(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)a)->sin_port);
    return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
}

/* Whether a socket bound to `bound` serves the entry that parsed to `want` (header: the rule). */
static bool matches(const struct sockaddr_storage *want, const struct sockaddr_storage *bound)
{
    if (port_of(want) != 0 && port_of(want) != port_of(bound))
        return false;
    if (is_any(want) && is_any(bound))
        return true;
    if (want->ss_family != bound->ss_family)
        return false;
    if (want->ss_family == AF_INET)
        return ((const struct sockaddr_in *)want)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)bound)->sin_addr.s_addr;
    return IN6_ARE_ADDR_EQUAL(&((const struct sockaddr_in6 *)want)->sin6_addr,
                              &((const struct sockaddr_in6 *)bound)->sin6_addr);
}

size_t mh_passed_sockets_take(const char *addr, bool metrics, int *fds, size_t max)
{
    struct sockaddr_storage want;
    socklen_t len;
    if (npassed == 0 || mh_listen_addr_parse(addr, &want, &len))
        return 0; /* a bad address fails where the caller opens it */
    size_t n = 0;
    unsigned port = 0; /* port 0 entries: the sockets of the first port that matched */
    for (size_t i = 0; i < npassed && n < max; i++) {
        struct passed *p = &passed[i];
        if (p->fd < 0 || metrics != (strcmp(p->name, MH_PASSED_METRICS) == 0) ||
            !matches(&want, &p->addr) || (n && port_of(&p->addr) != port))
            continue;
        port = port_of(&p->addr);
        fds[n++] = p->fd;
        p->fd = -1;
    }
    return n;
}

static void describe(const struct passed *p, char *buf, size_t len)
{
    char host[64] = "?";
    if (p->addr.ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&p->addr)->sin_addr, host, sizeof host);
    else
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&p->addr)->sin6_addr, host, sizeof host);
    bool v6 = p->addr.ss_family == AF_INET6;
    snprintf(buf, len, "%s%s%s:%u%s%s%s", v6 ? "[" : "", host, v6 ? "]" : "", port_of(&p->addr),
             p->name[0] ? " (named " : "", p->name, p->name[0] ? ")" : "");
}

int mh_passed_sockets_finish(char *err, size_t errlen)
{
    for (size_t i = 0; i < npassed; i++) {
        struct passed *p = &passed[i];
        if (p->fd < 0)
            continue;
        char what[160];
        describe(p, what, sizeof what);
        if (from == MH_PASSED_SYSTEMD) {
            snprintf(err, errlen,
                     "systemd passed a socket on %s (fd %d) that no listen entry of the script "
                     "names: the .socket unit's ListenStream= and the script's listen list "
                     "disagree",
                     what, p->fd);
            return -1;
        }
        mh_log(MH_LOG_WARN,
               "upgrade: the old master's socket on %s is not in the new script's listen list; "
               "closing it",
               what);
        close(p->fd);
        p->fd = -1;
    }
    return 0;
}
