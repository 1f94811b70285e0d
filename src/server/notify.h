/*
 * The systemd notify protocol (sd_notify(3)) spoken without libsystemd: a
 * datagram of "KEY=value\n" lines to the unix socket named by $NOTIFY_SOCKET
 * (a path, or "@name" for the abstract namespace). Only the process systemd
 * started (the master, or the single worker with --workers 1) talks, so the
 * variables are read once and removed from the environment: workers and the
 * commands an app runs never see them.
 */
#ifndef MH_NOTIFY_H
#define MH_NOTIFY_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/un.h>

struct mh_notify {
    int fd; /* -1: no service manager listening, every call is a no-op */
    struct sockaddr_un addr;
    socklen_t addrlen;
    double watchdog; /* seconds between WATCHDOG=1 (half of WATCHDOG_USEC), 0 = none */
};

/*
 * Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID and unsets them. An
 * unusable NOTIFY_SOCKET is logged and ignored (the server runs unmanaged).
 */
void mh_notify_init(struct mh_notify *n);
void mh_notify_close(struct mh_notify *n);

/*
 * Puts NOTIFY_SOCKET and WATCHDOG_USEC back into this process's environment,
 * for a binary upgrade's new master about to be exec'd from it: systemd
 * makes that one the main process (MAINPID=) once it serves.
 */
void mh_notify_export(const struct mh_notify *n);

/* Sends `state` (lines without the final newline are fine); 0, or -1 with errno. */
int mh_notify_send(struct mh_notify *n, const char *state);

/* RELOADING=1 with MONOTONIC_USEC, as systemd wants for a reload it can follow. */
int mh_notify_reloading(struct mh_notify *n);

static inline bool mh_notify_on(const struct mh_notify *n)
{
    return n && n->fd >= 0;
}

#endif
