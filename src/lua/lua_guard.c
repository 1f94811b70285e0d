#include "lua_guard.h"

#include "log.h"
#include "metrics.h"

#include <errno.h>
#include <lauxlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct mh_guard mh_guard;

/* The watchdog's tick: a POSIX timer signal aimed at the loop thread. */
#define TICK_SIGNAL (SIGRTMIN + 3)
/* Once the limit fired, the hook raises again every this many instructions. */
#define REHOOK_COUNT 1000
#define TICK_MIN     0.005
#define TICK_MAX     0.05

/* The watchdog's own state: touched only by the tick handler. */
static struct {
    timer_t timer;
    unsigned long last_seq, hooked_seq, block_seq;
    double since, stop_deadline;
    unsigned long cpu_seq; /* the resume cpu_since belongs to */
    double cpu_since;      /* the loop thread's CPU time when that resume was first seen */
    /* The loop thread's CPU time (ns) at the last heartbeat, written by on_beat. */
    _Atomic uint64_t beat_cpu_ns;
} wd;

/* Signals whose arrival starts the forced-stop clock, and libev's handlers for them. */
static int stop_signals[] = {SIGTERM, SIGINT, SIGUSR2, 0 /* MH_SIGNAL_RETIRE: not a constant */};
static struct sigaction chained[4];

static double clock_now(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void mh_guard_set_memory_limit(size_t bytes)
{
    mh_guard.mem_limit = bytes;
}

/*
 * The count hook. The first time it raises "cpu limit exceeded" inside the
 * task, as if the task's own code had failed, so to-be-closed variables and
 * error handlers run. A task that caught it (pcall in a loop) and is still
 * running REHOOK_COUNT instructions later is yielded out of from the hook
 * (which pcall cannot catch); the scheduler then ends it as failed. Where a
 * yield is not possible (inside a metamethod or a C callback) the hook
 * raises again until it is.
 */
static void on_cpu_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    if (L != atomic_load_explicit(&mh_guard.hooked, memory_order_relaxed)) {
        /* a thread that inherited the hook at its creation (lua_newthread copies it) */
        lua_sethook(L, NULL, 0, 0);
        return;
    }
    lua_sethook(L, on_cpu_hook, LUA_MASKCOUNT, REHOOK_COUNT);
    if (mh_guard.cpu_raised && lua_isyieldable(L)) {
        lua_yield(L, 0);
        return;
    }
    mh_guard.cpu_raised = true;
    luaL_error(L, "cpu limit exceeded");
}

/*
 * Only called once the tick hooked a thread in this (outermost) resume, so
 * the tick, which hooks once per resume, cannot race with it.
 */
void mh_guard_move_hook(lua_State *to)
{
    lua_State *from = atomic_exchange_explicit(&mh_guard.hooked, to, memory_order_relaxed);
    if (from && from != to)
        lua_sethook(from, NULL, 0, 0);
    if (to)
        lua_sethook(to, on_cpu_hook, LUA_MASKCOUNT, 1);
    else
        mh_guard.cpu_raised = false;
}

/*
 * The blocked-loop hook (lua_guard.h): on the loop thread, outside the
 * signal handler, so it may build a traceback and log. A hook left on a
 * thread from another resume (or inherited by a new thread) only unhooks.
 */
static void on_block_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    struct mh_guard *g = &mh_guard;
    lua_State *hooked = atomic_load_explicit(&g->block_hooked, memory_order_relaxed);
    if (L != atomic_load_explicit(&g->hooked, memory_order_relaxed))
        lua_sethook(L, NULL, 0, 0);
    if (L != hooked ||
        atomic_load_explicit(&g->block_seq, memory_order_relaxed) !=
            atomic_load_explicit(&g->seq, memory_order_relaxed))
        return;
    atomic_store_explicit(&g->block_hooked, NULL, memory_order_relaxed);
    uint64_t since = atomic_load_explicit(&g->block_since_ns, memory_order_relaxed);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    const char *label = atomic_load_explicit(&g->label, memory_order_relaxed);
    luaL_traceback(L, L, NULL, 0);
    mh_log(MH_LOG_WARN,
           "the event loop was held %.0f ms (loop_block_warn %.0f ms) by %s%s, every other "
           "request of this worker waiting; where it was (the line after a blocking call, or "
           "inside a long computation):\n%s",
           (double)(now > since ? now - since : 0) / 1e6, g->block_warn * 1e3,
           label ? "route " : "a task outside any route", label ? label : "", lua_tostring(L, -1));
    lua_pop(L, 1);
    if (g->metrics)
        mh_metrics_count_guard(g->metrics, MH_METRICS_LOOP_BLOCKED);
}

/* In front of libev's handler: notes the stop for the watchdog, then lets libev see it. */
static void on_stop_signal(int sig, siginfo_t *info, void *uctx)
{
    atomic_store_explicit(&mh_guard.stop_signal, sig, memory_order_relaxed);
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++) {
        if (stop_signals[i] != sig)
            continue;
        if (chained[i].sa_flags & SA_SIGINFO)
            chained[i].sa_sigaction(sig, info, uctx);
        else if (chained[i].sa_handler != SIG_IGN && chained[i].sa_handler != SIG_DFL)
            chained[i].sa_handler(sig);
    }
}

static void say(const char *msg)
{
    ssize_t n = write(STDERR_FILENO, msg, strlen(msg));
    (void)n;
}

/* Copies the running task's label into the heartbeat slot, or clears it. */
static void publish_label(struct mh_heartbeat *hb, const char *label)
{
    if (!hb)
        return;
    size_t n = label ? strnlen(label, MH_GUARD_LABEL_MAX - 1) : 0;
    if (strncmp(hb->label, label ? label : "", MH_GUARD_LABEL_MAX) == 0)
        return;
    if (n)
        memcpy(hb->label, label, n);
    hb->label[n] = 0;
}

/*
 * The watchdog: a timer signal handled on the loop thread, between any two
 * of its instructions. It notes when (wall clock) and at what CPU time of
 * this thread it first saw the current resume (the same seq seen across
 * ticks: mh_guard_enter bumps seq before it sets running, leave clears
 * running before it bumps seq; the CPU mark is only taken with running
 * set, so a tick between the two stores cannot leave a stale one). Past
 * handler_cpu_limit of CPU time it hooks the running coroutine, once per
 * resume: lua_sethook may be called from a signal handler (the Lua manual;
 * lua.c does it for Ctrl-C). CPU time, not wall time: a handler blocked in
 * a system call (os.execute, a blocking read) uses none, so it is no CPU
 * overrun. If the loop is held too long, in a task or not, the master's
 * stall guard names it with the wall time and the CPU time since the last
 * heartbeat, published here. Everything here is async-signal-safe:
 * clock_gettime, memcpy, write, _exit. It also ends the process when a stop
 * has taken longer than it may.
 */
static void on_tick(int sig)
{
    (void)sig;
    int saved = errno;
    struct mh_guard *g = &mh_guard;
    double now = clock_now(CLOCK_MONOTONIC);
    unsigned long seq = atomic_load_explicit(&g->seq, memory_order_relaxed);
    lua_State *co = atomic_load_explicit(&g->running, memory_order_relaxed);
    uint64_t cpu_ns = thread_cpu_ns();
    double cpu = (double)cpu_ns * 1e-9;
    if (seq != wd.last_seq) {
        wd.last_seq = seq;
        wd.since = now;
    }
    if (co && seq != wd.cpu_seq) {
        wd.cpu_seq = seq;
        wd.cpu_since = cpu;
    }
    bool long_run = co && now - wd.since > MH_GUARD_LABEL_AFTER;
    publish_label(g->heartbeat,
                  long_run ? atomic_load_explicit(&g->label, memory_order_relaxed) : NULL);
    if (g->heartbeat) {
        uint64_t beat = atomic_load_explicit(&wd.beat_cpu_ns, memory_order_relaxed);
        atomic_store_explicit(&g->heartbeat->cpu_ms,
                              (uint32_t)((cpu_ns > beat ? cpu_ns - beat : 0) / 1000000u),
                              memory_order_relaxed);
    }
    if (co && g->cpu_limit > 0 && cpu - wd.cpu_since >= g->cpu_limit && wd.hooked_seq != seq) {
        wd.hooked_seq = seq;
        atomic_store_explicit(&g->hooked, co, memory_order_relaxed);
        lua_sethook(co, on_cpu_hook, LUA_MASKCOUNT, 1);
    }
    if (co && g->block_warn > 0 && now - wd.since >= g->block_warn && wd.block_seq != seq &&
        !atomic_load_explicit(&g->hooked, memory_order_relaxed)) {
        wd.block_seq = seq;
        atomic_store_explicit(&g->block_since_ns, (uint64_t)(wd.since * 1e9), memory_order_relaxed);
        atomic_store_explicit(&g->block_seq, seq, memory_order_relaxed);
        atomic_store_explicit(&g->block_hooked, co, memory_order_relaxed);
        lua_sethook(co, on_block_hook, LUA_MASKCOUNT, 1);
    }
    if (!wd.stop_deadline && atomic_load_explicit(&g->stop_signal, memory_order_relaxed))
        wd.stop_deadline = now + g->stop_after + MH_GUARD_STOP_GRACE;
    if (wd.stop_deadline && now >= wd.stop_deadline) {
        say("moonhttp: the stop did not finish in shutdown_timeout: the event loop is "
            "stuck; exiting now\n");
        _exit(1);
    }
    errno = saved;
}

static void on_beat(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)t;
    (void)revents;
    atomic_store_explicit(&wd.beat_cpu_ns, thread_cpu_ns(), memory_order_relaxed);
    atomic_fetch_add_explicit(&mh_guard.heartbeat->beats, 1, memory_order_relaxed);
}

int mh_guard_start(struct ev_loop *loop, const struct mh_guard_opts *o, char *err, size_t errlen)
{
    struct mh_guard *g = &mh_guard;
    if (g->started)
        return 0;
    double cpu_limit = o->cpu_limit;
    struct mh_heartbeat *slot = o->slot;
    g->cpu_limit = cpu_limit;
    g->stop_after = o->stop_after;
    g->heartbeat = slot;
    g->block_warn = o->block_warn;
    g->metrics = o->metrics;
    double tick = cpu_limit > 0 ? cpu_limit / 40 : TICK_MAX;
    /* a warning's time is measured from the first tick that saw the resume: a tick late at most */
    if (o->block_warn > 0 && o->block_warn / 4 < tick)
        tick = o->block_warn / 4;
    tick = tick < TICK_MIN ? TICK_MIN : tick > TICK_MAX ? TICK_MAX : tick;
    memset(&wd, 0, sizeof wd);
    wd.last_seq = wd.hooked_seq = wd.cpu_seq = wd.block_seq = (unsigned long)-1;
    atomic_store(&wd.beat_cpu_ns, thread_cpu_ns());

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_tick;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(TICK_SIGNAL, &sa, NULL) < 0) {
        snprintf(err, errlen, "guard: sigaction: %s", strerror(errno));
        return -1;
    }
    /* Aimed at this thread: a resolver thread must not take the tick. */
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = TICK_SIGNAL;
    sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    if (timer_create(CLOCK_MONOTONIC, &sev, &wd.timer) < 0) {
        snprintf(err, errlen, "guard: timer_create: %s", strerror(errno));
        return -1;
    }
    long ns = (long)(tick * 1e9);
    struct itimerspec its = {{ns / 1000000000, ns % 1000000000},
                             {ns / 1000000000, ns % 1000000000}};
    timer_settime(wd.timer, 0, &its, NULL);
    stop_signals[3] = MH_SIGNAL_RETIRE;
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++) {
        struct sigaction stop;
        memset(&stop, 0, sizeof stop);
        stop.sa_sigaction = on_stop_signal;
        stop.sa_flags = SA_SIGINFO | SA_RESTART;
        sigfillset(&stop.sa_mask);
        sigaction(stop_signals[i], &stop, &chained[i]);
    }
    if (slot) {
        atomic_store(&slot->pid, (int32_t)getpid());
        ev_timer_init(&g->beat_timer, on_beat, MH_GUARD_BEAT_EVERY, MH_GUARD_BEAT_EVERY);
        ev_timer_start(loop, &g->beat_timer);
    }
    g->started = true;
    return 0;
}

void mh_guard_stop(struct ev_loop *loop)
{
    struct mh_guard *g = &mh_guard;
    if (!g->started)
        return;
    if (g->heartbeat)
        ev_timer_stop(loop, &g->beat_timer);
    timer_delete(wd.timer);
    signal(TICK_SIGNAL, SIG_IGN); /* a tick already queued must not kill us */
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaction(stop_signals[i], &chained[i], NULL);
    g->started = false;
}

void mh_guard_stop_after(double seconds)
{
    mh_guard.stop_after = seconds;
    wd.stop_deadline = 0; /* the next tick starts the clock again, from its own now */
}
