#define _GNU_SOURCE /* pipe2 */
#include "master.h"

#include "log.h"
#include "lua_guard.h"
#include "lua_load.h"
#include "lua_vm.h"
#include "metrics.h"
#include "notify.h"
#include "passed_sockets.h"
#include "shared_zones.h"
#include "shm_once.h"
#include "upgrade.h"
#include "worker.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define CRASH_WINDOW 1.0 /* a worker dying sooner than this after its start "crashed at once" */
#define BACKOFF_MIN  0.1
#define BACKOFF_MAX  10.0
/* After a stop's own deadline (worker.h), before SIGKILL. */
#define KILL_GRACE 0.5
/* Heartbeat slots: workers and the old ones still finishing after reloads. */
#define NBEATS 2048
/* How often the master looks at heartbeats and stop deadlines. */
#define SUPERVISE_EVERY 0.1
/*
 * A worker that exits cleanly was signalled itself, most often together with
 * the master (Ctrl-C signals the whole process group): the master's own
 * signal gets this long to arrive before the worker is replaced.
 */
#define CLEAN_EXIT_DELAY 0.3
/* A worker that cannot set up (bad certificate, ...) exits with this (EX_CONFIG). */
#define EXIT_SETUP_FAILED 78
/*
 * A binary upgrade's new master that has not said it serves this long after
 * its workers' once on_start functions may have ended is stopped: loading
 * the script and forking take well under a second (tens of ms in
 * spec/upgrade_spec.lua), so this is a new binary that hangs or whose
 * workers keep crashing.
 */
#define UPGRADE_GRACE 10.0

struct child {
    pid_t pid;
    int slot; /* 0..nworkers-1: which set of listening sockets it accepts on */
    ev_tstamp started;
    bool ready;    /* reported that it serves */
    bool retiring; /* old code: told (or to be told) to stop */
    bool signaled; /* SIGTERM sent */
    bool stalled;  /* killed for a loop that stopped ticking */
    int beat;      /* slot in the heartbeat table, -1 if none was free */
    uint64_t last_beats;
    ev_tstamp last_beat_at;
    ev_tstamp kill_at; /* a retiring worker still running then is killed; 0 = none */
};

struct master {
    pid_t pid; /* the master's own: a worker checks it is still its parent */
    struct ev_loop *loop;
    struct mh_config *config;
    struct mh_ops *ops;
    struct mh_gen *gen; /* the code new workers run */
    int nworkers;
    /*
     * Listening sockets: nsets per configured listener (one per worker slot,
     * or one that every worker shares), socks[i * nsets + s] for listener i
     * and set s; fds[s * nlisteners + i] is the same socket, laid out as the
     * row worker slot s inherits.
     */
    struct mh_listener *socks;
    int *fds;
    size_t nlisteners, nsets;
    struct child *children;
    size_t nchildren, cap;
    int ready_pipe[2]; /* workers write their pid once serving */
    ev_io ready_io;
    ev_signal sigterm, sigint, sighup, sigusr2;
    ev_child child_watcher;
    struct mh_upgrade *upgrade; /* SIGUSR2: the new master, or this one's old master */
    ev_io upgrade_io;           /* the new master's readiness pipe */
    ev_timer upgrade_timer;     /* UPGRADE_GRACE */
    ev_timer restart_timer, kill_timer;
    ev_timer supervise_timer;
    ev_timer watchdog_timer;    /* WATCHDOG=1 to systemd while the workers are healthy */
    struct mh_heartbeat *beats; /* shared with the workers: NBEATS slots */
    int spawning_beat;          /* the heartbeat slot of the worker being forked (child_main) */
    int spawning_slot;          /* and its worker slot */
    double backoff;
    bool stopping;
    bool failed;     /* no worker could start: the master exits 1 */
    bool owes_ready; /* READY=1 is due once every current worker serves (start, reload) */
    bool reloading;  /* a reload's new workers are starting; the old ones still serve */
};

static void child_main(struct master *m) __attribute__((noreturn));

/*
 * In the new process: drop everything of the master's loop, then serve the
 * inherited sockets with the inherited (copy-on-write) generation.
 */
static void child_main(struct master *m)
{
    /*
     * A worker dies with its master, however the master ends (SIGKILL, the
     * OOM killer): orphans would keep serving old code and hold the port. It
     * gets SIGUSR2, a stop without shutdown_delay, so its listening sockets
     * close at once and what is in flight still finishes. A master that died
     * before the prctl took effect is seen in getppid().
     */
    if (prctl(PR_SET_PDEATHSIG, SIGUSR2) < 0 || getppid() != m->pid)
        _exit(0);
    struct ev_loop *loop = m->loop;
    ev_signal_stop(loop, &m->sigterm);
    ev_signal_stop(loop, &m->sigint);
    ev_signal_stop(loop, &m->sighup);
    ev_signal_stop(loop, &m->sigusr2);
    ev_child_stop(loop, &m->child_watcher);
    ev_io_stop(loop, &m->ready_io);
    ev_io_stop(loop, &m->upgrade_io);
    ev_timer_stop(loop, &m->upgrade_timer);
    ev_timer_stop(loop, &m->restart_timer);
    ev_timer_stop(loop, &m->kill_timer);
    ev_timer_stop(loop, &m->supervise_timer);
    ev_timer_stop(loop, &m->watchdog_timer);
    ev_loop_fork(loop);
    close(m->ready_pipe[0]);
    if (m->upgrade->ready_fd >= 0)
        close(m->upgrade->ready_fd);
    if (m->upgrade->tell_fd >= 0)
        close(m->upgrade->tell_fd);
    struct mh_worker w;
    char err[512];
    mh_gen_reseed(m->gen);
    /* Its own slot's sockets only: a copy of another's would keep that one open past its stop. */
    size_t own = m->nsets > 1 ? (size_t)m->spawning_slot : 0;
    for (size_t i = 0; i < m->nlisteners * m->nsets; i++) {
        if (i % m->nsets == own) {
            free(m->socks[i].addr); /* the fd is the worker's now */
            m->socks[i].addr = NULL;
        } else {
            mh_listener_close(&m->socks[i]);
        }
    }
    const int *fds = &m->fds[own * m->nlisteners];
    if (mh_worker_init_inherited(&w, loop, m->config, m->gen, fds, err, sizeof err) < 0) {
        mh_log(MH_LOG_ERROR, "worker: %s", err);
        _exit(EXIT_SETUP_FAILED);
    }
    /* Counted from 1 for http.worker_id(); a restart or a reload keeps the number. */
    w.host.worker_id = m->spawning_slot + 1;
    mh_gen_unref(m->gen); /* the worker holds this process's copy now */
    m->gen = NULL;
    mh_worker_set_ops(&w, m->ops);
    if (m->spawning_beat >= 0)
        w.heartbeat = &m->beats[m->spawning_beat];
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    w.ready_fd = m->ready_pipe[1]; /* the worker says when it serves */
    int rc = mh_worker_run(&w);
    mh_worker_destroy(&w);
    free(m->children);
    free(m->socks);
    free(m->fds);
    mh_config_free(m->config);
    exit(rc);
}

static struct child *find_child(struct master *m, pid_t pid)
{
    for (size_t i = 0; i < m->nchildren; i++)
        if (m->children[i].pid == pid)
            return &m->children[i];
    return NULL;
}

static size_t count_current(const struct master *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nchildren; i++)
        n += !m->children[i].retiring;
    return n;
}

static int spawn(struct master *m, int slot)
{
    if (m->nchildren == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        struct child *c = realloc(m->children, cap * sizeof *c);
        if (!c)
            return -1;
        m->children = c;
        m->cap = cap;
    }
    m->spawning_beat = -1;
    for (int i = 0; m->beats && i < NBEATS && m->spawning_beat < 0; i++) {
        if (atomic_load(&m->beats[i].pid) == 0) {
            m->spawning_beat = i;
            atomic_store(&m->beats[i].pid, -1); /* taken; the worker writes its pid */
            atomic_store(&m->beats[i].beats, 0);
            m->beats[i].label[0] = 0;
            atomic_store(&m->beats[i].cpu_ms, 0);
        }
    }
    m->spawning_slot = slot;
    /* Signals wait until the child has its own watchers (unblocked in child_main). */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid == 0)
        child_main(m);
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        mh_log(MH_LOG_ERROR, "fork: %s", strerror(errno));
        if (m->spawning_beat >= 0)
            atomic_store(&m->beats[m->spawning_beat].pid, 0);
        return -1;
    }
    struct child *c = &m->children[m->nchildren++];
    memset(c, 0, sizeof *c);
    c->pid = pid;
    c->slot = slot;
    c->started = ev_time();
    c->beat = m->spawning_beat;
    c->last_beat_at = c->started;
    mh_log(MH_LOG_DEBUG, "worker %d started in slot %d", (int)pid, slot);
    return 0;
}

static bool slot_taken(const struct master *m, int slot)
{
    for (size_t i = 0; i < m->nchildren; i++)
        if (!m->children[i].retiring && m->children[i].slot == slot)
            return true;
    return false;
}

/* Every slot without a current worker gets one (the start, a reload, a death). */
static void fill_workers(struct master *m)
{
    for (int s = 0; !m->stopping && s < m->nworkers; s++)
        if (!slot_taken(m, s) && spawn(m, s) < 0)
            break;
}

/* Stops accepting; its long-lived requests drain, and it is killed if still running after. */
static void retire(struct master *m, struct child *c)
{
    c->retiring = true;
    if (c->signaled)
        return;
    kill(c->pid, MH_SIGNAL_RETIRE);
    c->signaled = true;
    c->kill_at = ev_time() + m->config->drain_timeout + m->config->drain_spread +
                 m->config->shutdown_timeout + KILL_GRACE;
}

/*
 * Old workers stop once every current worker serves: until then they keep
 * accepting. That moment is also when systemd hears READY=1, after the
 * start and after each reload.
 */
static void retire_old_if_ready(struct master *m)
{
    for (size_t i = 0; i < m->nchildren; i++)
        if (!m->children[i].retiring && !m->children[i].ready)
            return;
    if (count_current(m) < (size_t)m->nworkers)
        return;
    /* A binary upgrade's new master: the old one makes it systemd's main process (MAINPID). */
    if (m->owes_ready && !m->stopping && m->upgrade->tell_fd < 0)
        mh_notify_send(m->ops->notify, "READY=1");
    if (m->owes_ready)
        mh_upgrade_tell_ready(m->upgrade);
    m->owes_ready = m->reloading = false;
    for (size_t i = 0; i < m->nchildren; i++)
        if (m->children[i].retiring)
            retire(m, &m->children[i]);
}

static void on_ready(struct ev_loop *loop, ev_io *io, int revents)
{
    struct master *m = io->data;
    pid_t pid;
    (void)loop;
    (void)revents;
    while (read(m->ready_pipe[0], &pid, sizeof pid) == (ssize_t)sizeof pid) {
        struct child *c = find_child(m, pid);
        if (c)
            c->ready = true;
    }
    retire_old_if_ready(m);
}

static void on_restart_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)revents;
    fill_workers(t->data);
}

static void describe_exit(int status, char *buf, size_t len)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
}

/*
 * Every SUPERVISE_EVERY: a serving worker whose heartbeat has not moved for
 * worker_stall_timeout has a loop stuck in one task (or in C): it is killed
 * and, like any worker that died, replaced. A retiring worker still running
 * at its deadline is killed too.
 */
static void on_supervise(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct master *m = t->data;
    (void)revents;
    ev_tstamp now = ev_time();
    double stall = m->config->worker_stall_timeout;
    for (size_t i = 0; i < m->nchildren; i++) {
        struct child *c = &m->children[i];
        if (c->kill_at > 0 && now >= c->kill_at) {
            mh_log(MH_LOG_WARN, "old worker %d did not stop in shutdown_timeout; killing it",
                   (int)c->pid);
            kill(c->pid, SIGKILL);
            c->kill_at = 0;
        }
        if (c->beat < 0 || c->stalled)
            continue;
        struct mh_heartbeat *hb = &m->beats[c->beat];
        uint64_t beats = atomic_load(&hb->beats);
        if (beats != c->last_beats || atomic_load(&hb->pid) != c->pid) {
            c->last_beats = beats;
            c->last_beat_at = now;
            continue;
        }
        /*
         * The slot names this worker once its loop runs (mh_guard_start), ready
         * or not: one blocked in a once on_start before it serves is a stall too.
         */
        if (stall <= 0 || now - c->last_beat_at < stall)
            continue;
        char label[MH_GUARD_LABEL_MAX];
        memcpy(label, hb->label, sizeof label);
        label[sizeof label - 1] = 0;
        /*
         * Wall time with (next to) no CPU: blocked in a system call or C
         * library call (os.execute, a blocking read), not a spin. Said so
         * the log tells which fix is needed. A spin on a busy machine may
         * get a small share of a core, hence the low bar for "busy".
         */
        double wall = now - c->last_beat_at;
        double cpu = atomic_load(&hb->cpu_ms) / 1000.0;
        mh_log(MH_LOG_ERROR,
               "worker %d stalled: its event loop has not run for %.1f s of wall time, %.1f s of "
               "it on CPU (%s; worker_stall_timeout; stuck in route %s); killing and replacing it",
               (int)c->pid, wall, cpu,
               cpu < wall / 10 ? "blocked in a C or system call" : "busy on CPU",
               label[0] ? label : "unknown");
        mh_metrics_count_guard(m->ops->metrics, MH_METRICS_STALL);
        c->stalled = true;
        kill(c->pid, SIGKILL);
    }
    (void)loop;
}

/*
 * The systemd watchdog vouches for the workers, not just the master: a ping
 * goes out only while every current worker serves (or, during a reload, the
 * old ones still do) and the loop of each one that serves has turned within
 * the last ping period (at least 1 s: heartbeats come every
 * MH_GUARD_BEAT_EVERY and are read every SUPERVISE_EVERY). A worker stuck
 * past worker_stall_timeout is killed and replaced first; workers that keep
 * crashing, or stalls with the stall watchdog off, stop the pings and let
 * systemd restart the service after WatchdogSec.
 */
static void on_watchdog(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct master *m = t->data;
    (void)loop;
    (void)revents;
    ev_tstamp now = ev_time();
    double fresh = m->ops->notify->watchdog > 1.0 ? m->ops->notify->watchdog : 1.0;
    size_t serving = 0;
    for (size_t i = 0; i < m->nchildren; i++) {
        const struct child *c = &m->children[i];
        if (!c->ready)
            continue;
        if (c->stalled || (c->beat >= 0 && now - c->last_beat_at > fresh))
            return;
        serving += !c->retiring;
    }
    if (serving >= (size_t)m->nworkers || m->reloading)
        mh_notify_send(m->ops->notify, "WATCHDOG=1");
}

static void on_stop(struct ev_loop *loop, ev_signal *s, int revents);

/* The shared-dict keys a dead worker owned (dict:set(k, v, { owner = "worker" })) go with it. */
static void forget_owned_keys(struct master *m, pid_t pid)
{
    const struct mh_shm_dicts *set = m->ops->shared;
    for (size_t i = 0; set && i < set->n; i++) {
        size_t n = 0;
        const char *err = mh_shm_dict_forget_owner(set->v[i].dict, (int32_t)pid, &n);
        if (err)
            mh_log(MH_LOG_ERROR, "shared dict %s: the keys of worker %d stay: %s", set->v[i].name,
                   (int)pid, err);
        else if (n)
            mh_log(MH_LOG_INFO, "shared dict %s: %zu keys of worker %d removed with it",
                   set->v[i].name, n, (int)pid);
    }
}

/*
 * http.on_worker_exit: a worker that died (a signal, a failing exit status)
 * may leave the app's state behind elsewhere, and a surviving worker's hook
 * hears of it. A clean exit (a stop, a drained reload) ended its work itself,
 * and in a stop nobody survives to run the hook.
 */
static void tell_worker_exit(struct master *m, const struct child *dead, int status,
                             const char *how)
{
    if (m->stopping || m->upgrade->handed_over || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
        return;
    struct mh_worker_exit e = {.worker = dead->slot + 1, .pid = dead->pid};
    snprintf(e.reason, sizeof e.reason, "%s", dead->stalled ? "killed: stalled" : how);
    mh_shm_once_worker_exited(m->ops->once, &e);
}

/* The old master's copies: the new master, or a stop's workers, hold their own. */
static void close_listeners(struct master *m)
{
    for (size_t i = 0; i < m->nlisteners * m->nsets; i++)
        mh_listener_close(&m->socks[i]);
    m->nlisteners = 0;
}

/* The new master exited: before it served, the upgrade failed and nothing changed here. */
static void upgrade_ended(struct master *m, int status)
{
    char how[64];
    describe_exit(status, how, sizeof how);
    pid_t pid = m->upgrade->child;
    ev_io_stop(m->loop, &m->upgrade_io);
    ev_timer_stop(m->loop, &m->upgrade_timer);
    if (m->upgrade->handed_over) {
        mh_log(MH_LOG_WARN, "the new master %d ended (%s) while this old one drains", (int)pid,
               how);
        m->upgrade->child = 0;
        return;
    }
    mh_upgrade_failed(m->upgrade, m->config->pid_file);
    mh_log(MH_LOG_ERROR,
           "upgrade (SIGUSR2) failed: the new master %d ended (%s) before it served (its own "
           "lines above say why); this master serves on",
           (int)pid, how);
}

static void on_upgrade_timeout(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct master *m = t->data;
    (void)loop;
    (void)revents;
    mh_log(MH_LOG_ERROR,
           "upgrade (SIGUSR2): the new master %d did not serve within %.0f s; stopping it",
           (int)m->upgrade->child, m->config->once_start_timeout + UPGRADE_GRACE);
    kill(m->upgrade->child, SIGTERM);
}

/*
 * The new master serves on the same sockets: this one stops accepting, its
 * workers drain as a reload's old ones do, and it exits after the last.
 */
static void on_upgrade_ready(struct ev_loop *loop, ev_io *io, int revents)
{
    struct master *m = io->data;
    (void)revents;
    bool serves = mh_upgrade_new_serves(m->upgrade);
    ev_io_stop(loop, io); /* EOF without a byte: its exit is on the way (upgrade_ended) */
    if (!serves)
        return;
    ev_timer_stop(loop, &m->upgrade_timer);
    m->upgrade->handed_over = true;
    mh_log(MH_LOG_INFO,
           "upgrade (SIGUSR2): the new master %d serves; this master stops accepting, drains its "
           "%zu workers and exits",
           (int)m->upgrade->child, m->nchildren);
    char main_pid[32];
    snprintf(main_pid, sizeof main_pid, "MAINPID=%d", (int)m->upgrade->child);
    mh_notify_send(m->ops->notify, main_pid);
    ev_timer_stop(loop, &m->watchdog_timer); /* the new master pings now */
    ev_timer_stop(loop, &m->restart_timer);
    close_listeners(m);
    for (size_t i = 0; i < m->nchildren; i++)
        retire(m, &m->children[i]);
    if (m->nchildren == 0)
        ev_break(loop, EVBREAK_ALL);
}

static void on_sigusr2(struct ev_loop *loop, ev_signal *s, int revents)
{
    struct master *m = s->data;
    (void)revents;
    struct mh_upgrade *u = m->upgrade;
    const char *busy = m->stopping                     ? "the server is stopping"
                       : u->handed_over                ? "this master already handed over"
                       : u->child                      ? "a new master is already starting"
                       : mh_upgrade_old_master_runs(u) ? "the master this one replaces still drains"
                                                       : NULL;
    if (busy) {
        mh_log(MH_LOG_WARN, "upgrade (SIGUSR2) ignored: %s", busy);
        return;
    }
    size_t n = m->nlisteners * m->nsets;
    int *fds = calloc(n + 1, sizeof *fds);
    const char **names = calloc(n + 1, sizeof *names);
    char err[512];
    int rc = -1;
    if (fds && names) {
        for (size_t i = 0; i < n; i++)
            fds[i] = m->socks[i].fd; /* listener by listener: a set's sockets side by side */
        if (m->ops->metrics_fd >= 0) {
            fds[n] = m->ops->metrics_fd;
            names[n++] = MH_PASSED_METRICS;
        }
        rc = mh_upgrade_start(u, fds, names, n, m->config->pid_file, m->ops->notify, err,
                              sizeof err);
    } else {
        snprintf(err, sizeof err, "out of memory");
    }
    free(fds);
    free(names);
    if (rc < 0) {
        mh_log(MH_LOG_ERROR, "upgrade (SIGUSR2) failed: %s; this master serves on", err);
        return;
    }
    mh_log(MH_LOG_INFO,
           "upgrade (SIGUSR2): started %s as new master %d with %zu listening sockets; this "
           "master serves until the new one does",
           u->exe, (int)u->child, n);
    ev_io_set(&m->upgrade_io, u->ready_fd, EV_READ);
    ev_io_start(loop, &m->upgrade_io);
    ev_timer_set(&m->upgrade_timer, m->config->once_start_timeout + UPGRADE_GRACE, 0.);
    ev_timer_start(loop, &m->upgrade_timer);
}

static void on_child_exit(struct ev_loop *loop, ev_child *w, int revents)
{
    struct master *m = w->data;
    (void)revents;
    if (w->rpid == m->upgrade->child) {
        upgrade_ended(m, w->rstatus);
        return;
    }
    struct child *c = find_child(m, w->rpid);
    if (!c)
        return;
    struct child dead = *c;
    *c = m->children[--m->nchildren];
    if (dead.beat >= 0)
        atomic_store(&m->beats[dead.beat].pid, 0);
    mh_metrics_forget_worker(m->ops->metrics, dead.pid);
    if (m->ops->channels) /* a worker killed with subscribers: nobody wakes its slot any more */
        mh_shm_chan_forget(m->ops->channels, dead.pid);
    mh_shm_once_forget(m->ops->once, dead.pid); /* its once jobs go to the next claimer */
    forget_owned_keys(m, dead.pid);
    char how[MH_SHM_EXIT_REASON]; /* what an on_worker_exit hook hears, uncut */
    describe_exit(w->rstatus, how, sizeof how);
    tell_worker_exit(m, &dead, w->rstatus, how);
    if (m->stopping || m->upgrade->handed_over) {
        mh_log(MH_LOG_DEBUG, "worker %d stopped (%s)", (int)dead.pid, how);
        if (m->nchildren == 0)
            ev_break(loop, EVBREAK_ALL);
        return;
    }
    if (dead.retiring) {
        mh_log(MH_LOG_INFO, "old worker %d stopped (%s)", (int)dead.pid, how);
        return;
    }
    bool any_ready = false;
    for (size_t i = 0; i < m->nchildren; i++)
        any_ready = any_ready || m->children[i].ready;
    if (!dead.ready && !any_ready && WIFEXITED(w->rstatus) &&
        WEXITSTATUS(w->rstatus) == EXIT_SETUP_FAILED) {
        /* Nothing serves and workers cannot even start: retrying cannot help. */
        mh_log(MH_LOG_ERROR, "workers cannot start (see above); stopping");
        m->failed = true;
        on_stop(loop, &m->sigterm, 0);
        if (m->nchildren == 0)
            ev_break(loop, EVBREAK_ALL);
        return;
    }
    if (WIFEXITED(w->rstatus) && WEXITSTATUS(w->rstatus) == 0) {
        mh_log(MH_LOG_INFO, "worker %d stopped; replacing it in %.1f s unless the server stops",
               (int)dead.pid, CLEAN_EXIT_DELAY);
        if (!ev_is_active(&m->restart_timer)) {
            ev_timer_set(&m->restart_timer, CLEAN_EXIT_DELAY, 0.);
            ev_timer_start(loop, &m->restart_timer);
        }
        return;
    }
    ev_tstamp lived = ev_time() - dead.started;
    if (lived < CRASH_WINDOW)
        m->backoff = m->backoff ? (m->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : m->backoff * 2)
                                : BACKOFF_MIN;
    else
        m->backoff = 0;
    if (dead.stalled)
        m->backoff = 0; /* it served fine until one request stalled it */
    mh_log(MH_LOG_ERROR, "worker %d exited unexpectedly (%s) after %.1f s; restarting%s",
           (int)dead.pid, dead.stalled ? "killed: stalled" : how, lived,
           m->backoff ? " after a back-off" : "");
    if (m->backoff) {
        mh_log(MH_LOG_WARN, "worker restart in %.1f s", m->backoff);
        if (!ev_is_active(&m->restart_timer)) {
            ev_timer_set(&m->restart_timer, m->backoff, 0.);
            ev_timer_start(loop, &m->restart_timer);
        }
    } else {
        fill_workers(m);
    }
    retire_old_if_ready(m);
}

static void on_kill_timer(struct ev_loop *loop, ev_timer *t, int revents)
{
    struct master *m = t->data;
    (void)loop;
    (void)revents;
    for (size_t i = 0; i < m->nchildren; i++) {
        mh_log(MH_LOG_WARN, "worker %d did not stop in time; killing it", (int)m->children[i].pid);
        kill(m->children[i].pid, SIGKILL);
    }
}

/*
 * SIGTERM: the workers stop gracefully (their long-lived connections drain:
 * worker.h); SIGINT, or SIGTERM once more: they stop at once.
 */
static void on_stop(struct ev_loop *loop, ev_signal *s, int revents)
{
    struct master *m = s->data;
    (void)revents;
    const struct mh_config *c = m->config;
    bool at_once = s->signum == SIGINT || m->stopping;
    for (size_t i = 0; i < m->nchildren; i++)
        kill(m->children[i].pid, at_once ? SIGINT : SIGTERM);
    ev_tstamp deadline =
        (at_once ? c->shutdown_timeout : c->shutdown_delay + mh_worker_stop_seconds(c)) +
        KILL_GRACE;
    if (m->stopping) {
        if (ev_timer_remaining(loop, &m->kill_timer) > deadline) {
            ev_timer_stop(loop, &m->kill_timer);
            ev_timer_set(&m->kill_timer, deadline, 0.);
            ev_timer_start(loop, &m->kill_timer);
        }
        return;
    }
    m->stopping = true;
    mh_notify_send(m->ops->notify, "STOPPING=1");
    mh_log(MH_LOG_INFO, "%s stop of %zu workers", at_once ? "immediate" : "graceful",
           m->nchildren);
    ev_timer_stop(loop, &m->restart_timer);
    /* Our copies must go too, or connections would queue where no worker accepts. */
    close_listeners(m);
    if (m->upgrade->child && !m->upgrade->handed_over)
        mh_log(MH_LOG_WARN, "the new master %d that an upgrade is starting goes on by itself",
               (int)m->upgrade->child);
    ev_timer_set(&m->kill_timer, deadline, 0.);
    ev_timer_start(loop, &m->kill_timer);
    if (m->nchildren == 0)
        ev_break(loop, EVBREAK_ALL);
}

static void on_sighup(struct ev_loop *loop, ev_signal *s, int revents)
{
    struct master *m = s->data;
    (void)loop;
    (void)revents;
    if (m->stopping)
        return;
    if (m->upgrade->handed_over) { /* its workers drain; the new master reloads its own */
        mh_log(MH_LOG_WARN, "reload (SIGHUP) ignored: the new master %d serves, this one drains",
               (int)m->upgrade->child);
        return;
    }
    char err[4096];
    ev_tstamp t0 = ev_time();
    mh_notify_reloading(m->ops->notify);
    struct mh_gen *g = mh_gen_new(m->config, true, err, sizeof err);
    struct mh_reload_stats *st = mh_metrics_reload_stats(m->ops->metrics);
    if (!g) {
        mh_reload_stats_failed(st, err);
        mh_log(MH_LOG_ERROR, "reload (SIGHUP) failed; the workers keep the previous code: %s", err);
        if (!m->owes_ready) /* the workers serve as before */
            mh_notify_send(m->ops->notify, "READY=1");
        return;
    }
    if (m->ops->shared)
        mh_shared_zones_reload(m->ops->shared, g); /* before the new workers fork */
    mh_gen_unref(m->gen);
    m->gen = g;
    st->reloads++;
    st->last_failed = false;
    g->number = st->reloads;
    for (size_t i = 0; i < m->nchildren; i++)
        m->children[i].retiring = true;
    m->owes_ready = m->reloading = true;
    if (m->ops->once) /* before the fork: the new workers run the once jobs of the new code */
        mh_shm_once_next_epoch(m->ops->once);
    mh_log(MH_LOG_INFO,
           "reload (SIGHUP): new code checked in %.1f ms (%zu routes); starting %d "
           "new workers",
           (ev_time() - t0) * 1000, mh_router_size(g->router), m->nworkers);
    m->backoff = 0;
    ev_timer_stop(loop, &m->restart_timer);
    fill_workers(m);
}

/*
 * The sockets passed for listener i (passed_sockets.h), at most nsets, into
 * fds: how many, or (size_t)-1 with err when systemd passed sockets and
 * none is for this address.
 */
static size_t passed_sockets(struct master *m, size_t i, int *fds, char *err, size_t errlen)
{
    size_t got = mh_passed_sockets_take(m->config->listen[i], false, fds, m->nsets);
    if (got == 0 && mh_passed_sockets_from() == MH_PASSED_SYSTEMD) {
        snprintf(err, errlen,
                 "listen \"%s\": systemd passed no socket for this address (LISTEN_FDS): the "
                 ".socket unit's ListenStream= and the script's listen list disagree",
                 m->config->listen[i]);
        return (size_t)-1;
    }
    return got;
}

/*
 * One socket per listener and worker slot (reuseport, more than one
 * worker), else one per listener that all workers share. The kernel hands
 * each new connection to one socket of a SO_REUSEPORT set by a hash of its
 * addresses, so the workers get even shares whatever their speed at
 * waking up. The other way to spread accepts, one shared socket polled with
 * EPOLLEXCLUSIVE, was not taken: it wakes one waiter instead of all, but
 * the waiter woken first is the one that went back to epoll_wait last, so a
 * worker that is quick to return keeps taking the connections (the uneven
 * load issue 33 saw); and libev registers its fds without it. Measured on
 * bursts of 1,000 connections to 2 processes (bench/workers/accept_modes.py,
 * bench/notes/2026-12-02-workers.md): the busier one took 1.08-1.50x of an even share with
 * EPOLLEXCLUSIVE, 1.10-1.75x with plain epoll, 1.00-1.05x with SO_REUSEPORT.
 */
static int open_listeners(struct master *m, char *err, size_t errlen)
{
    size_t n = m->config->nlisten;
    m->nsets = m->config->reuseport && m->nworkers > 1 ? (size_t)m->nworkers : 1;
    m->socks = calloc(n * m->nsets, sizeof *m->socks);
    m->fds = calloc(n * m->nsets, sizeof *m->fds);
    size_t want = m->nsets; /* passed sockets per listener at most */
    size_t *npassed = calloc(n + 1, sizeof *npassed);
    int *passed = calloc(n * want + 1, sizeof *passed);
    if (!m->socks || !m->fds || !npassed || !passed) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        npassed[i] = passed_sockets(m, i, &passed[i * want], err, errlen);
        if (npassed[i] == (size_t)-1)
            goto fail;
    }
    /*
     * Passed sockets keep their layout, so what waits in their backlogs is
     * taken: systemd's one socket per address is shared by every worker,
     * an old master's set of the same size as ours is one per slot. A
     * smaller set than ours is shared too (fewer sets, never more).
     */
    for (size_t i = 0; i < n; i++)
        if (npassed[i] && npassed[i] < m->nsets)
            m->nsets = 1;
    for (size_t i = 0; i < n; i++) {
        struct mh_listener *set = &m->socks[i * m->nsets];
        const char *addr = m->config->listen[i];
        for (size_t s = 0; s < npassed[i]; s++) {
            int fd = passed[i * want + s];
            if (s < m->nsets) {
                mh_listener_adopt(&set[s], fd, addr);
            } else {
                mh_log(MH_LOG_WARN,
                       "upgrade: listen \"%s\" came with more sockets than workers here; the "
                       "connections waiting in the extra ones are reset when the old workers go",
                       addr);
                close(fd);
            }
        }
        if (!npassed[i] &&
            mh_listener_open_set(set, m->nsets, addr, (int)m->config->backlog, err, errlen))
            goto fail;
        for (size_t s = 0; s < m->nsets; s++)
            m->fds[s * n + i] = set[s].fd;
        m->nlisteners++;
    }
    free(npassed);
    free(passed);
    return mh_passed_sockets_finish(err, errlen);
fail:
    free(npassed);
    free(passed);
    return -1;
}

int mh_master_run(struct mh_config *config, struct mh_gen *gen, int nworkers, struct mh_ops *ops,
                  struct mh_upgrade *upgrade)
{
    struct master m;
    memset(&m, 0, sizeof m);
    m.pid = getpid();
    m.loop = EV_DEFAULT;
    m.config = config;
    m.ops = ops;
    m.gen = gen;
    m.nworkers = nworkers;
    m.upgrade = upgrade;
    char err[512];
    int rc = 1;
    if (open_listeners(&m, err, sizeof err) < 0) {
        mh_log(MH_LOG_ERROR, "%s", err);
        goto out;
    }
    if (pipe2(m.ready_pipe, O_CLOEXEC) < 0) {
        mh_log(MH_LOG_ERROR, "pipe: %s", strerror(errno));
        goto out;
    }
    fcntl(m.ready_pipe[0], F_SETFL, O_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);
    struct ev_loop *loop = m.loop;
    ev_signal_init(&m.sigterm, on_stop, SIGTERM);
    ev_signal_init(&m.sigint, on_stop, SIGINT);
    ev_signal_init(&m.sighup, on_sighup, SIGHUP);
    ev_signal_init(&m.sigusr2, on_sigusr2, SIGUSR2);
    m.sigterm.data = m.sigint.data = m.sighup.data = m.sigusr2.data = &m;
    ev_signal_start(loop, &m.sigterm);
    ev_signal_start(loop, &m.sigint);
    ev_signal_start(loop, &m.sighup);
    ev_signal_start(loop, &m.sigusr2);
    ev_init(&m.upgrade_io, on_upgrade_ready);
    m.upgrade_io.data = &m;
    ev_init(&m.upgrade_timer, on_upgrade_timeout);
    m.upgrade_timer.data = &m;
    ev_child_init(&m.child_watcher, on_child_exit, 0, 0);
    m.child_watcher.data = &m;
    ev_child_start(loop, &m.child_watcher);
    ev_io_init(&m.ready_io, on_ready, m.ready_pipe[0], EV_READ);
    m.ready_io.data = &m;
    ev_io_start(loop, &m.ready_io);
    ev_init(&m.restart_timer, on_restart_timer);
    m.restart_timer.data = &m;
    ev_init(&m.kill_timer, on_kill_timer);
    m.kill_timer.data = &m;
    m.beats = mmap(NULL, NBEATS * sizeof *m.beats, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m.beats == MAP_FAILED) {
        mh_log(MH_LOG_WARN, "cannot map the heartbeat table (%s): no worker_stall_timeout",
               strerror(errno));
        m.beats = NULL;
    }
    ev_timer_init(&m.supervise_timer, on_supervise, SUPERVISE_EVERY, SUPERVISE_EVERY);
    m.supervise_timer.data = &m;
    ev_timer_start(loop, &m.supervise_timer);
    ev_init(&m.watchdog_timer, on_watchdog);
    m.watchdog_timer.data = &m;
    if (mh_notify_on(ops->notify) && ops->notify->watchdog > 0) {
        ev_timer_set(&m.watchdog_timer, ops->notify->watchdog, ops->notify->watchdog);
        ev_timer_start(loop, &m.watchdog_timer);
    }
    m.owes_ready = true;
    for (size_t i = 0; i < m.nlisteners; i++)
        mh_log(MH_LOG_INFO, "listening on %s%s (port %d)",
               mh_config_listen_tls(m.config, i) ? "https://" : "http://",
               m.socks[i * m.nsets].addr, mh_listener_port(&m.socks[i * m.nsets]));
    if (m.nsets > 1)
        mh_log(MH_LOG_DEBUG, "one listening socket per worker (reuseport)");
    mh_log(MH_LOG_INFO, "master %d: starting %d workers", (int)getpid(), nworkers);
    fill_workers(&m);
    ev_run(loop, 0); /* every watcher holds the loop: only a stop (ev_break) ends it */
    rc = m.failed ? 1 : 0;
    if (!m.stopping && !upgrade->handed_over) {
        mh_log(MH_LOG_ERROR, "bug: the master's event loop ended while not stopping");
        rc = MH_EXIT_LOOP_ENDED;
    }
    ev_io_stop(loop, &m.ready_io);
    ev_child_stop(loop, &m.child_watcher);
    ev_timer_stop(loop, &m.kill_timer);
    ev_timer_stop(loop, &m.restart_timer);
    ev_timer_stop(loop, &m.supervise_timer);
    ev_timer_stop(loop, &m.watchdog_timer);
    if (m.beats)
        munmap(m.beats, NBEATS * sizeof *m.beats);
    ev_signal_stop(loop, &m.sigterm);
    ev_signal_stop(loop, &m.sigint);
    ev_signal_stop(loop, &m.sighup);
    ev_signal_stop(loop, &m.sigusr2);
    ev_io_stop(loop, &m.upgrade_io);
    ev_timer_stop(loop, &m.upgrade_timer);
    close(m.ready_pipe[0]);
    close(m.ready_pipe[1]);
out:
    for (size_t i = 0; m.socks && i < m.nlisteners * m.nsets; i++)
        mh_listener_close(&m.socks[i]);
    free(m.socks);
    free(m.fds);
    free(m.children);
    mh_gen_unref(m.gen);
    return rc;
}
