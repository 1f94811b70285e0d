#ifndef MH_LUA_GUARD_H
#define MH_LUA_GUARD_H
/*
 * Guards that keep one handler from taking its worker down.
 *
 * CPU: a task that runs longer than handler_cpu_limit without yielding gets
 * the error "cpu limit exceeded" raised inside it, at its next Lua
 * instruction. The hot path only stores three words per resume
 * (mh_guard_enter/leave); a POSIX timer ticks a signal on the loop thread
 * (limit/40, 5..50 ms), whose handler sees how long the current resume has
 * run and, past the limit, sets a count hook on the running coroutine
 * (lua_sethook is async-signal-safe, as the Lua manual says; lua.c does
 * this for Ctrl-C). No thread: a second thread would make every read, send
 * and epoll_wait of glibc pay for cancellation points. The hook raises,
 * and raises again every few thousand instructions until the task yields or
 * ends; a task that catches it and runs on is yielded out of from the hook
 * (pcall cannot catch that) and ended by the scheduler. The limit is CPU
 * time of the loop thread (CLOCK_THREAD_CPUTIME_ID, read by the tick) spent
 * in one resume: a handler blocked in a system call or a C library call uses
 * none and is not cut; if it holds the loop past worker_stall_timeout, the
 * stall guard below replaces the worker and says it stalled.
 *
 * Memory: the Lua allocator (lua_vm.c) counts the bytes every Lua state of
 * this process took from malloc and, while a task runs, refuses the one that would
 * cross lua_memory_limit: Lua collects garbage and retries once, then raises
 * its memory error in the code that asked. Outside tasks (setting up a
 * request, building a traceback) nothing is refused, so C never meets a
 * memory error it did not expect.
 *
 * Stops: the tick also sees SIGTERM, SIGINT and SIGUSR2 (through a
 * handler chained in front of libev's) and ends the process if it still runs
 * shutdown_delay + shutdown_timeout + MH_GUARD_STOP_GRACE seconds later: a
 * loop stuck in C code cannot run its own shutdown timer.
 *
 * Heartbeat: a timer of the loop bumps a counter in a slot the master
 * mapped (struct mh_heartbeat); the master kills a worker whose counter has
 * not moved for worker_stall_timeout. The tick copies the label (route
 * pattern) of a task that has run for over MH_GUARD_LABEL_AFTER seconds
 * into the slot, and every tick the CPU time the thread used since the last
 * beat, so the master can name the route and say whether the loop spun or
 * was blocked (wall time with little CPU).
 *
 * Blocked loop: a resume that has held the loop (wall time) for over
 * loop_block_warn gets a count hook from the tick, as the CPU guard does; it
 * fires at the task's next Lua instruction, which for a task blocked in C (a
 * socket library's sleep, os.execute) is when that call returns: the hook
 * logs a warning with the route, the time the loop was held so far and the
 * Lua traceback of that spot, counts it, and unhooks. Once per resume; the
 * CPU guard's hook, when set, wins.
 *
 * One guard per process (a worker is a process): the signal handler must
 * find it, so it is the one process-wide object here.
 */
#include <lua.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ev.h>

struct mh_metrics;

#define MH_GUARD_STOP_GRACE  0.5
#define MH_GUARD_BEAT_EVERY  0.25
#define MH_GUARD_LABEL_AFTER 0.5
#define MH_GUARD_LABEL_MAX   96

/* One worker's slot in the master's shared heartbeat table. */
struct mh_heartbeat {
    _Atomic int32_t pid;
    _Atomic uint64_t beats;
    _Atomic uint32_t cpu_ms;        /* CPU time the loop thread used since its last beat */
    char label[MH_GUARD_LABEL_MAX]; /* route of a long-running task, "" if none */
};

/* What the errors raised in a task were, for logs and metrics. */
enum mh_guard_kind { MH_GUARD_NONE, MH_GUARD_CPU, MH_GUARD_MEMORY };

struct mh_guard {
    /* hot path: written by the loop thread at every resume */
    _Atomic(lua_State *) running; /* the coroutine resumed now, or NULL */
    _Atomic unsigned long seq;    /* bumped at every enter and leave */
    const char *_Atomic label;    /* route pattern of the running task, or NULL */
    /* memory (loop thread only) */
    size_t mem_used, mem_limit;
    bool mem_refused;          /* an allocation was refused since the last enter */
    lua_State *_Atomic hooked; /* set by the signal handler, cleared by leave */
    bool cpu_raised;           /* the hook raised once in this resume */
    /* watchdog */
    double cpu_limit;
    _Atomic int stop_signal; /* set by the chained signal handler */
    double stop_after;       /* shutdown_delay + shutdown_timeout */
    struct mh_heartbeat *heartbeat;
    ev_timer beat_timer;
    bool started;
    /* blocked loop: the tick sets these for the hook (see above) */
    double block_warn;
    lua_State *_Atomic block_hooked;
    _Atomic unsigned long block_seq; /* the resume block_hooked belongs to */
    _Atomic uint64_t block_since_ns; /* CLOCK_MONOTONIC when the tick first saw that resume */
    struct mh_metrics *metrics;      /* counts the warnings, or NULL */
};

extern struct mh_guard mh_guard;

/* What mh_guard_enter replaced, for mh_guard_leave to put back. */
struct mh_guard_saved {
    lua_State *running;
    const char *label;
};

/* Moves the CPU hook to `to` (the watchdog hooked the thread that ran before). */
void mh_guard_move_hook(lua_State *to);

/*
 * Marks co as running for the watchdog; the scheduler calls it before each
 * lua_resume. Resumes nest (a task started from inside another: a light
 * thread's first run): only the outermost bumps seq, so the time keeps
 * counting from the outermost resume, and a loop that starts tasks cannot
 * reset it. seq moves before running is set (and, in leave, after it is
 * cleared), so a tick never sees a running task with a stale seq.
 */
static inline struct mh_guard_saved mh_guard_enter(lua_State *co, const char *label)
{
    struct mh_guard *g = &mh_guard;
    struct mh_guard_saved saved = {atomic_load_explicit(&g->running, memory_order_relaxed),
                                   atomic_load_explicit(&g->label, memory_order_relaxed)};
    if (!saved.running) {
        atomic_store_explicit(&g->seq, atomic_load_explicit(&g->seq, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
    }
    atomic_store_explicit(&g->label, label, memory_order_relaxed);
    atomic_store_explicit(&g->running, co, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    g->mem_refused = false;
    if (atomic_load_explicit(&g->hooked, memory_order_relaxed))
        mh_guard_move_hook(co); /* started from a task past its limit: so is this one */
    return saved;
}

/*
 * The resume returned. Says which guard, if any, raised the error the task
 * stopped with; the CPU hook, if the watchdog set one, goes back to the
 * resume outside (nested) or is cleared (outermost).
 */
static inline enum mh_guard_kind mh_guard_leave(struct mh_guard_saved saved)
{
    struct mh_guard *g = &mh_guard;
    enum mh_guard_kind k = g->mem_refused ? MH_GUARD_MEMORY : MH_GUARD_NONE;
    g->mem_refused = false;
    if (atomic_load_explicit(&g->hooked, memory_order_relaxed))
        k = MH_GUARD_CPU;
    atomic_store_explicit(&g->label, saved.label, memory_order_relaxed);
    atomic_store_explicit(&g->running, saved.running, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    if (!saved.running) {
        atomic_store_explicit(&g->seq, atomic_load_explicit(&g->seq, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
    }
    if (k == MH_GUARD_CPU)
        mh_guard_move_hook(saved.running); /* NULL: unhooks */
    return k;
}

/*
 * A user coroutine (coroutine.resume, coroutine.wrap) starts or stops
 * running inside a task: the watchdog must hook the thread that actually
 * runs, and a hook set on the inner one follows the code back out. Called
 * from lua/moonhttp/coroutine.lua; does nothing outside tasks.
 */
static inline void mh_guard_switch(lua_State *to)
{
    struct mh_guard *g = &mh_guard;
    if (!atomic_load_explicit(&g->running, memory_order_relaxed))
        return;
    atomic_store_explicit(&g->running, to, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    lua_State *hooked = atomic_load_explicit(&g->hooked, memory_order_relaxed);
    if (hooked && hooked != to)
        mh_guard_move_hook(to);
}

/*
 * The allocator's question: may `grow` more bytes be taken? Refused only
 * while a task runs and the total would pass the limit.
 */
static inline bool mh_guard_mem_grow(size_t grow)
{
    struct mh_guard *g = &mh_guard;
    if (g->mem_limit && g->mem_used + grow > g->mem_limit &&
        atomic_load_explicit(&g->running, memory_order_relaxed)) {
        g->mem_refused = true;
        return false;
    }
    g->mem_used += grow;
    return true;
}

static inline void mh_guard_mem_shrink(size_t n)
{
    mh_guard.mem_used -= n < mh_guard.mem_used ? n : mh_guard.mem_used;
}

/* Sets the memory limit (0 = none); the allocator counts from the first state on. */
void mh_guard_set_memory_limit(size_t bytes);

/* What mh_guard_start watches for. */
struct mh_guard_opts {
    double cpu_limit;           /* handler_cpu_limit, 0 = off */
    double stop_after;          /* shutdown_delay + shutdown_timeout */
    double block_warn;          /* loop_block_warn, 0 = off */
    struct mh_heartbeat *slot;  /* this worker's heartbeat slot, or NULL */
    struct mh_metrics *metrics; /* where loop_block_warn's warnings are counted, or NULL */
};

/*
 * Starts the watchdog for the loop of this thread: the CPU limit, the forced
 * end of a stop, the blocked-loop warning and the heartbeat. Returns 0, or
 * -1 with err (the server then runs without the CPU and stop guards).
 */
int mh_guard_start(struct ev_loop *loop, const struct mh_guard_opts *o, char *err, size_t errlen);
/* Stops the watchdog (before the process exits normally). */
void mh_guard_stop(struct ev_loop *loop);

/*
 * The master's word to a worker a reload replaced: drain, then stop. Its
 * arrival starts the forced-stop clock like SIGTERM's, so a worker whose
 * loop is stuck still ends within stop_after; a loop that takes it and
 * drains moves the deadline (mh_guard_stop_after).
 */
#define MH_SIGNAL_RETIRE (SIGRTMIN + 4)

/*
 * The stop under way may take `seconds` from now (a drain's window, or
 * shutdown_timeout when a stop cuts a drain short): the forced-stop clock
 * starts again with it.
 */
void mh_guard_stop_after(double seconds);

#endif
