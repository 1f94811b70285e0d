#ifndef MH_UPGRADE_H
#define MH_UPGRADE_H
/*
 * Binary upgrade, both ends of it (SIGUSR2 to the master, as nginx's).
 *
 * The old master forks and execs the binary now on disk at the path it was
 * started from (a package update replaces that file), with its command
 * line, its listening sockets named in MOONHTTP_LISTEN_FDS
 * (passed_sockets.h) and the write end of a pipe in MOONHTTP_UPGRADE_READY.
 * The new master loads and checks the script, serves the inherited sockets
 * with its own workers and, once every one of them serves, writes one byte
 * on that pipe (mh_upgrade_tell_ready). Only then does the old master stop
 * accepting and drain its workers as a reload does, and exit. Both sets of
 * workers accept on the same sockets meanwhile, so a connection is never
 * refused nor reset.
 *
 * A new binary that cannot start (exec fails, the script does not load,
 * workers cannot set up, a crash, no readiness within the time allowed)
 * exits or is stopped before it said ready: the old master logs why and
 * serves on, as if nothing had happened.
 *
 * The pid file: while the new master starts, the old master's is renamed
 * to <pid_file>.oldbin and the new master writes <pid_file>; a failed
 * upgrade renames it back, and the old master removes the .oldbin file
 * when it exits after the handover.
 *
 * Shared zones (shared dicts, channels, once leases, metrics) are not
 * carried over: the new master maps fresh ones. They are anonymous shared
 * mappings laid out by the binary that made them, and the new binary may
 * lay them out differently; the data of shared dicts starts empty, as after
 * a restart.
 */
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct mh_notify;

struct mh_upgrade {
    char exe[PATH_MAX]; /* the binary's path when this process started */
    char **argv;        /* its command line, for the new binary */
    pid_t child;        /* the new master while it starts; 0: no upgrade under way */
    int ready_fd;       /* the read end of its readiness pipe, or -1 */
    int tell_fd;        /* in a new master: the old master's pipe, or -1 */
    pid_t old_master;   /* in a new master: the master that started it */
    bool handed_over;   /* in the old master: the new one serves; this one drains and exits */
};

/*
 * Notes where the binary is and, in a new master, reads (and unsets)
 * MOONHTTP_UPGRADE_READY. argv must outlive u.
 */
void mh_upgrade_init(struct mh_upgrade *u, char **argv);

/*
 * In the old master: starts the new binary with the listening sockets
 * fds[0..n) (names[i] NULL, or a tag such as "metrics"), renames pid_file
 * ("off": none) and passes systemd's notify socket on. 0, or -1 with err
 * (nothing started, nothing renamed).
 */
int mh_upgrade_start(struct mh_upgrade *u, const int *fds, const char *const *names, size_t n,
                     const char *pid_file, const struct mh_notify *notify, char *err,
                     size_t errlen);

/* In the old master: the new one ended before it served; the pid file is its own again. */
void mh_upgrade_failed(struct mh_upgrade *u, const char *pid_file);

/* In the old master: whether the new one said it serves (reads its pipe). */
bool mh_upgrade_new_serves(struct mh_upgrade *u);

/* In the old master, exiting after the handover: removes <pid_file>.oldbin. */
void mh_upgrade_remove_old_pid_file(const char *pid_file);

/* In a new master: every worker serves; the old master may drain. No-op otherwise. */
void mh_upgrade_tell_ready(struct mh_upgrade *u);

/* In a new master: whether the master that started it still runs (it is the parent). */
bool mh_upgrade_old_master_runs(const struct mh_upgrade *u);

#endif
