#define _GNU_SOURCE /* pipe2 */
#include "upgrade.h"

#include "log.h"
#include "notify.h"
#include "passed_sockets.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READY_VAR "MOONHTTP_UPGRADE_READY" /* "fd:pid" of the old master's pipe */

void mh_upgrade_init(struct mh_upgrade *u, char **argv)
{
    memset(u, 0, sizeof *u);
    u->argv = argv;
    u->ready_fd = u->tell_fd = -1;
    /*
     * The path, not the file: once a package update renamed a new binary
     * over it, /proc/self/exe names the old file "(deleted)"; read now, it
     * names the place the new one lands.
     */
    ssize_t len = readlink("/proc/self/exe", u->exe, sizeof u->exe - 1);
    u->exe[len > 0 ? len : 0] = 0;
    const char *tell = getenv(READY_VAR);
    if (tell) {
        int fd = -1;
        long pid = 0;
        if (sscanf(tell, "%d:%ld", &fd, &pid) == 2 && fd > STDERR_FILENO &&
            fcntl(fd, F_SETFD, FD_CLOEXEC) == 0) {
            u->tell_fd = fd;
            u->old_master = (pid_t)pid;
        }
        unsetenv(READY_VAR);
    }
}

static void old_pid_file(const char *pid_file, char *buf, size_t len)
{
    snprintf(buf, len, "%s.oldbin", pid_file);
}

static bool has_pid_file(const char *pid_file)
{
    return pid_file && strcmp(pid_file, "off") != 0;
}

/* In the forked child: the sockets and the pipe survive the exec, nothing else of ours does. */
static void exec_new_binary(struct mh_upgrade *u, const int *fds, const char *const *names,
                            size_t n, int tell, const struct mh_notify *notify)
{
    size_t cap = n * 24 + 1;
    char *list = malloc(cap);
    if (!list)
        _exit(127);
    size_t used = 0;
    list[0] = 0;
    for (size_t i = 0; i < n; i++) {
        fcntl(fds[i], F_SETFD, 0);
        used += (size_t)snprintf(list + used, cap - used, "%d%s%s;", fds[i], names[i] ? ":" : "",
                                 names[i] ? names[i] : "");
    }
    fcntl(tell, F_SETFD, 0);
    char ready[48];
    snprintf(ready, sizeof ready, "%d:%ld", tell, (long)getppid());
    setenv(MH_PASSED_UPGRADE_VAR, list, 1);
    setenv(READY_VAR, ready, 1);
    mh_notify_export(notify);
    /* The master's loop blocks signals and ignores SIGPIPE; exec keeps both. */
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(u->exe, u->argv);
    mh_log(MH_LOG_ERROR, "upgrade (SIGUSR2): cannot execute %s: %s", u->exe, strerror(errno));
    _exit(127);
}

int mh_upgrade_start(struct mh_upgrade *u, const int *fds, const char *const *names, size_t n,
                     const char *pid_file, const struct mh_notify *notify, char *err, size_t errlen)
{
    if (!u->exe[0] || access(u->exe, X_OK) < 0) {
        snprintf(err, errlen, "cannot execute %s: %s", u->exe[0] ? u->exe : "this binary",
                 u->exe[0] ? strerror(errno) : "its path is unknown");
        return -1;
    }
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        return -1;
    }
    char old[PATH_MAX + 8];
    if (has_pid_file(pid_file)) {
        old_pid_file(pid_file, old, sizeof old);
        if (rename(pid_file, old) < 0) {
            snprintf(err, errlen, "cannot rename pid_file %s to %s: %s", pid_file, old,
                     strerror(errno));
            close(pipefd[0]);
            close(pipefd[1]);
            return -1;
        }
    }
    /* As the master's spawn does: signals wait until the child has its own (exec'd) handlers. */
    sigset_t all, saved;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &saved);
    pid_t pid = fork();
    if (pid == 0) {
        close(pipefd[0]);
        exec_new_binary(u, fds, names, n, pipefd[1], notify);
    }
    sigprocmask(SIG_SETMASK, &saved, NULL);
    int e = errno;
    close(pipefd[1]);
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(e));
        close(pipefd[0]);
        if (has_pid_file(pid_file))
            rename(old, pid_file);
        return -1;
    }
    fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
    u->child = pid;
    u->ready_fd = pipefd[0];
    return 0;
}

void mh_upgrade_failed(struct mh_upgrade *u, const char *pid_file)
{
    if (has_pid_file(pid_file)) {
        char old[PATH_MAX + 8];
        old_pid_file(pid_file, old, sizeof old);
        if (rename(old, pid_file) < 0)
            mh_log(MH_LOG_WARN, "upgrade: cannot rename %s back to %s: %s", old, pid_file,
                   strerror(errno));
    }
    if (u->ready_fd >= 0)
        close(u->ready_fd);
    u->ready_fd = -1;
    u->child = 0;
}

bool mh_upgrade_new_serves(struct mh_upgrade *u)
{
    char c;
    return u->ready_fd >= 0 && read(u->ready_fd, &c, 1) == 1;
}

void mh_upgrade_remove_old_pid_file(const char *pid_file)
{
    if (!has_pid_file(pid_file))
        return;
    char old[PATH_MAX + 8];
    old_pid_file(pid_file, old, sizeof old);
    unlink(old);
}

void mh_upgrade_tell_ready(struct mh_upgrade *u)
{
    if (u->tell_fd < 0)
        return;
    ssize_t n = write(u->tell_fd, "R", 1); /* EPIPE if the old master died meanwhile: fine */
    (void)n;
    close(u->tell_fd);
    u->tell_fd = -1;
}

bool mh_upgrade_old_master_runs(const struct mh_upgrade *u)
{
    return u->old_master > 0 && getppid() == u->old_master;
}
