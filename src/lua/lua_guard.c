#include "lua_guard.h"

#include <errno.h>
#include <lauxlib.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct mh_guard mh_guard;

/* The watchdog asks the loop thread to hook its running coroutine with this signal. */
#define GUARD_SIGNAL (SIGRTMIN + 3)
/* Once the limit fired, the hook raises again every this many instructions. */
#define REHOOK_COUNT 1000
#define POLL_MIN     0.005
#define POLL_MAX     0.05
#define BEAT_EVERY   0.25

static pthread_t loop_thread, watch_thread;
static atomic_bool watch_stop;
static double poll_interval;
static _Atomic unsigned long victim_seq; /* the resume the watchdog wants hooked */

/* Signals whose arrival starts the forced-stop clock, and libev's handlers for them. */
static const int stop_signals[] = {SIGTERM, SIGINT, SIGUSR2};
static struct sigaction chained[3];

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
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
    lua_sethook(L, on_cpu_hook, LUA_MASKCOUNT, REHOOK_COUNT);
    if (mh_guard.cpu_raised && lua_isyieldable(L)) {
        lua_yield(L, 0);
        return;
    }
    mh_guard.cpu_raised = true;
    luaL_error(L, "cpu limit exceeded");
}

/*
 * In the loop thread, between any two instructions of it. Hooks the
 * coroutine only if the resume the watchdog measured is still the one
 * running: seq moves at every enter and leave.
 */
static void on_guard_signal(int sig)
{
    (void)sig;
    int saved = errno;
    lua_State *co = atomic_load_explicit(&mh_guard.running, memory_order_relaxed);
    if (co && atomic_load_explicit(&mh_guard.seq, memory_order_relaxed) ==
                  atomic_load_explicit(&victim_seq, memory_order_relaxed)) {
        atomic_store_explicit(&mh_guard.hooked, co, memory_order_relaxed);
        lua_sethook(co, on_cpu_hook, LUA_MASKCOUNT, 1);
    }
    errno = saved;
}

void mh_guard_unhook(lua_State *co)
{
    atomic_store_explicit(&mh_guard.hooked, NULL, memory_order_relaxed);
    mh_guard.cpu_raised = false;
    lua_sethook(co, NULL, 0, 0);
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
static void publish_label(struct mh_heartbeat *hb, unsigned long seq, bool running_long)
{
    if (!hb)
        return;
    char buf[MH_GUARD_LABEL_MAX] = "";
    const char *label = atomic_load_explicit(&mh_guard.label, memory_order_relaxed);
    if (running_long && label) {
        snprintf(buf, sizeof buf, "%s", label);
        /* The task moved on while we copied: the label may be stale, drop it. */
        if (atomic_load_explicit(&mh_guard.seq, memory_order_relaxed) != seq)
            buf[0] = 0;
    }
    if (strcmp(hb->label, buf))
        memcpy(hb->label, buf, sizeof buf);
}

/*
 * The watchdog. It never touches Lua: it measures how long one resume has
 * been running (the same seq seen across polls) and, past the limit, sends
 * GUARD_SIGNAL to the loop thread, once per resume. It also ends the
 * process when a stop has taken longer than it may.
 */
static void *watch_main(void *arg)
{
    (void)arg;
    unsigned long last_seq = (unsigned long)-1, signalled = (unsigned long)-1;
    double since = mono_now(), stop_deadline = 0;
    struct timespec pause = {0, (long)(poll_interval * 1e9)};
    while (!atomic_load(&watch_stop)) {
        nanosleep(&pause, NULL);
        double now = mono_now();
        unsigned long seq = atomic_load_explicit(&mh_guard.seq, memory_order_relaxed);
        bool running = atomic_load_explicit(&mh_guard.running, memory_order_relaxed) != NULL;
        if (seq != last_seq) {
            last_seq = seq;
            since = now;
        }
        publish_label(mh_guard.heartbeat, seq, running && now - since > MH_GUARD_LABEL_AFTER);
        if (running && mh_guard.cpu_limit > 0 && now - since >= mh_guard.cpu_limit &&
            signalled != seq) {
            signalled = seq;
            atomic_store_explicit(&victim_seq, seq, memory_order_relaxed);
            pthread_kill(loop_thread, GUARD_SIGNAL);
        }
        if (!stop_deadline && atomic_load_explicit(&mh_guard.stop_signal, memory_order_relaxed))
            stop_deadline = now + mh_guard.stop_after + MH_GUARD_STOP_GRACE;
        if (stop_deadline && now >= stop_deadline) {
            say("moonhttp: the stop did not finish in shutdown_timeout: the event loop is "
                "stuck; exiting now\n");
            _exit(1);
        }
    }
    return NULL;
}

static void on_beat(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)t;
    (void)revents;
    atomic_fetch_add_explicit(&mh_guard.heartbeat->beats, 1, memory_order_relaxed);
}

int mh_guard_start(struct ev_loop *loop, double cpu_limit, double stop_after,
                   struct mh_heartbeat *slot, char *err, size_t errlen)
{
    struct mh_guard *g = &mh_guard;
    if (g->started)
        return 0;
    g->cpu_limit = cpu_limit;
    g->stop_after = stop_after;
    g->heartbeat = slot;
    poll_interval = cpu_limit > 0 ? cpu_limit / 40 : POLL_MAX;
    if (poll_interval < POLL_MIN)
        poll_interval = POLL_MIN;
    if (poll_interval > POLL_MAX)
        poll_interval = POLL_MAX;
    loop_thread = pthread_self();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_guard_signal;
    sa.sa_flags = SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(GUARD_SIGNAL, &sa, NULL) < 0) {
        snprintf(err, errlen, "guard: sigaction: %s", strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++) {
        struct sigaction stop;
        memset(&stop, 0, sizeof stop);
        stop.sa_sigaction = on_stop_signal;
        stop.sa_flags = SA_SIGINFO | SA_RESTART;
        sigfillset(&stop.sa_mask);
        sigaction(stop_signals[i], &stop, &chained[i]);
    }
    sigset_t mask, old;
    sigfillset(&mask);
    pthread_sigmask(SIG_BLOCK, &mask, &old); /* the watchdog takes no signals */
    atomic_store(&watch_stop, false);
    int rc = pthread_create(&watch_thread, NULL, watch_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        snprintf(err, errlen, "guard: cannot start the watchdog thread: %s", strerror(rc));
        return -1;
    }
    if (slot) {
        atomic_store(&slot->pid, (int32_t)getpid());
        ev_timer_init(&g->beat_timer, on_beat, BEAT_EVERY, BEAT_EVERY);
        ev_timer_start(loop, &g->beat_timer);
        ev_unref(loop); /* the heartbeat alone must not keep the loop running */
    }
    g->started = true;
    return 0;
}

void mh_guard_stop(struct ev_loop *loop)
{
    struct mh_guard *g = &mh_guard;
    if (!g->started)
        return;
    if (g->heartbeat) {
        ev_ref(loop);
        ev_timer_stop(loop, &g->beat_timer);
    }
    atomic_store(&watch_stop, true);
    pthread_join(watch_thread, NULL);
    for (size_t i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaction(stop_signals[i], &chained[i], NULL);
    g->started = false;
}
