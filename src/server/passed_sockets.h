#ifndef MH_PASSED_SOCKETS_H
#define MH_PASSED_SOCKETS_H
/*
 * Listening sockets this process was started with instead of binding its
 * own, from one of two senders:
 *
 *   - a binary upgrade (upgrade.h): the old master execs the new binary
 *     with MOONHTTP_LISTEN_FDS="3;4;5;" naming every listening socket it
 *     holds (as nginx's NGINX variable does), so the new master serves the
 *     very sockets the old one accepted on and no connection is refused;
 *   - systemd's socket activation (sd_listen_fds(3)): LISTEN_PID names this
 *     process, LISTEN_FDS how many sockets start at fd 3, LISTEN_FDNAMES
 *     their names (used in errors only). systemd keeps the sockets across
 *     `systemctl restart`, so connections wait in their backlog meanwhile.
 *
 * Sockets are matched to `listen` entries (and the metrics address) by the
 * address they are bound to, read with getsockname: host and port must be
 * equal, except that an entry's port 0 matches any port on its host (the
 * old master's port 0 resolved to one port, which an upgrade keeps), and
 * the any-address ("[::]" of ":8080") matches IPv4's 0.0.0.0 as well.
 * Several sockets on one address (an old master's SO_REUSEPORT set) all go
 * to that entry, in the order passed. A socket named "metrics" (systemd's
 * FileDescriptorName=, or the old master's tag) serves the metrics address
 * only, and only it does: both may be port 0 on one host.
 *
 * The passed set is read once at start, before any fork, and is the
 * process's (like its environment); the variables are removed, so workers
 * and commands an app runs do not see them.
 */
#include <stdbool.h>
#include <stddef.h>

enum mh_passed_from {
    MH_PASSED_NONE,
    MH_PASSED_UPGRADE, /* MOONHTTP_LISTEN_FDS */
    MH_PASSED_SYSTEMD, /* LISTEN_FDS */
};

/*
 * Reads and unsets the variables. Every passed descriptor must be a
 * listening TCP socket. 0 (also when nothing was passed), or -1 with err.
 */
int mh_passed_sockets_load(char *err, size_t errlen);

enum mh_passed_from mh_passed_sockets_from(void);

/*
 * Takes the passed sockets bound to addr (a `listen` entry's text, or with
 * `metrics` the metrics address), at most max, in the order passed, into fds (close-on-exec set).
 * They are the caller's. Returns how many (0: none matched; with systemd's sockets the caller says
 * that the unit and the script disagree).
 */
size_t mh_passed_sockets_take(const char *addr, bool metrics, int *fds, size_t max);

/*
 * Once every address took its own: a socket from systemd that no entry
 * took is an error (-1 with err naming it and its address: the .socket
 * unit and the script's listen list disagree); one from an upgrade that
 * the new script no longer listens on is closed and logged. 0 otherwise.
 */
int mh_passed_sockets_finish(char *err, size_t errlen);

/* The environment variable an upgrade uses, for upgrade.c. */
#define MH_PASSED_UPGRADE_VAR "MOONHTTP_LISTEN_FDS"
#define MH_PASSED_METRICS     "metrics"

#endif
