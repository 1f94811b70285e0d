#ifndef MH_LUA_SCHED_H
#define MH_LUA_SCHED_H
/*
 * The one place Lua coroutines are resumed. A task is a pooled coroutine
 * plus what it waits for: a request's handler, a light thread
 * (http.spawn), a timer callback, an http.on_start function, or a `moonhttp
 * run` script. A yielding built-in follows one template: find the running
 * task (mh_task_check), record what it waits for, how to push its results
 * on resume and how to cancel the wait (mh_task_wait), arm the watcher, and
 * return what mh_task_wait returns.
 *
 * Waiting calls also work inside the user's own coroutines: coroutine.resume
 * and coroutine.wrap are replaced (lua/moonhttp/coroutine.lua) so that a
 * waiting call's yield is passed up to the task's coroutine and from there
 * to the loop, and the results come back down the same way.
 *
 * Things a task owns (sockets, light threads, open client responses) hang on
 * it as links and are released when it ends, however it ends.
 */
#include <ev.h>
#include <lua.h>
#include <stdbool.h>

struct mh_gen;
struct mh_handler;
struct mh_req;
struct mh_task;

enum mh_task_wait {
    MH_WAIT_NONE,
    MH_WAIT_SLEEP,
    MH_WAIT_BODY,     /* request body bytes */
    MH_WAIT_WRITABLE, /* output below the low-water mark */
    MH_WAIT_CALL,     /* a waiting call that owns its state (mh_task_wait) */
};

enum mh_task_kind {
    MH_TASK_HANDLER,
    MH_TASK_THREAD,   /* http.spawn */
    MH_TASK_TIMER,    /* http.timer / http.every callback */
    MH_TASK_ON_START, /* http.on_start */
    MH_TASK_RUN,      /* `moonhttp run` script */
};

/* Pushes the results of a finished wait onto co; returns how many. */
typedef int (*mh_task_resume_fn)(struct mh_task *t, lua_State *co);
/*
 * The task is ending (killed, or its owner ended) while waiting: the waiting
 * call stops its watchers and drops its anchors. The task is not resumed.
 */
typedef void (*mh_task_cancel_fn)(struct mh_task *t);

/* Something a task owns; `release` runs when the task ends, unless unlinked first. */
struct mh_task_link {
    void (*release)(struct mh_task_link *l);
    struct mh_task *_task;
    struct mh_task_link *_prev, *_next;
};

struct mh_task {
    lua_State *co;
    int co_ref;             /* anchors the coroutine in the registry */
    struct mh_lua_req *req; /* this request's objects, invalidated when it ends */
    struct mh_lua_res *res;
    struct mh_gen *gen;
    struct mh_req *request;           /* NULL for a `run` script */
    const struct mh_handler *handoff; /* set by calling a C handler: it finishes the request */
    bool aborted;                     /* the request's stream went away */
    bool stopped; /* its stream was stopped alone (a drain's spread): it hears "stopping" */
    enum mh_task_wait wait;
    mh_task_resume_fn on_resume;
    ev_timer timer;    /* sleep, and deferred resumes */
    size_t want_bytes; /* req:read(n) waiting: its n */
    int exit_status;   /* `run` scripts: 0 ok, 1 error */
    void (*on_done)(struct mh_task *t);
    enum mh_task_kind kind;
    unsigned serial;             /* changes each time the pooled task is reused */
    void *wait_data;             /* the waiting call's state (MH_WAIT_CALL) */
    mh_task_cancel_fn on_cancel; /* how to cancel it */
    struct mh_task_link *_links; /* what it owns */
    /* Called at the end with the results (or the error) on top of co: light threads. */
    void (*on_end)(struct mh_task *t, bool ok, int nres);
    void *end_data;
    const char *label; /* route pattern (or NULL), for the guards' logs and heartbeat */
    struct mh_task *next_free;
    struct mh_task *_bg_prev, *_bg_next; /* the generation's background tasks */
    bool _ready;                               /* on the generation's run queue (mh_task_wake) */
    struct mh_task *_ready_prev, *_ready_next; /* its neighbours there */
};

/* What a handler's req/res userdata point to; r is NULL once the request ended. */
struct mh_lua_req {
    struct mh_req *r;
    struct mh_task *task;
};
struct mh_lua_res {
    struct mh_req *r;
    struct mh_task *task;
};

/*
 * Runs handler `ref` (a registry reference to a function) for request r,
 * with (req, res) and any extra argument pushed by `extra`. The handler may
 * finish before this returns; either way the request is finished
 * (mh_req_finish) when the function returns or fails (a 500 page if nothing
 * was sent), unless it handed the request over to a C handler.
 */
void mh_task_start_handler(struct mh_gen *g, struct mh_req *r, int ref, const char *extra,
                           size_t extra_len);

/*
 * Runs the function on top of g->L's stack as a task (for `moonhttp run`),
 * with nargs arguments below it. on_done is called when it ends.
 */
struct mh_task *mh_task_spawn(struct mh_gen *g, int nargs, void (*on_done)(struct mh_task *));

/* The task running now (L is its coroutine or a user coroutine inside it), or NULL. */
struct mh_task *mh_task_current(lua_State *L);

/*
 * The task whose own coroutine L is, or NULL (a user coroutine, the main
 * thread): its extra space names its task. No call, so cheap enough for
 * every req/res method.
 */
static inline struct mh_task *mh_task_of_thread(lua_State *L)
{
    struct mh_task *t = *(struct mh_task **)lua_getextraspace(L);
    return t && t->co == L ? t : NULL;
}

/* Like mh_task_current, but raises a Lua error naming `what` when L cannot wait. */
struct mh_task *mh_task_check(lua_State *L, const char *what);

/* Suspends the running task: records the wait and yields (to the loop, through user coroutines). */
int mh_task_yield(lua_State *L, struct mh_task *t, enum mh_task_wait wait, mh_task_resume_fn fn);
/*
 * Suspends the running task in a waiting call that owns its state: `data`
 * (read back with t->wait_data), `resume` pushes the results, `cancel`
 * (may be NULL) undoes the wait if the task ends first. Wake it with
 * mh_task_wake.
 */
int mh_task_wait(lua_State *L, struct mh_task *t, mh_task_resume_fn resume,
                 mh_task_cancel_fn cancel, void *data);
/*
 * Resumes a waiting task after the callbacks of this loop iteration, before
 * the loop polls again (never from inside the caller's callback): it joins
 * its generation's run queue, drained by an ev_prepare. A wake costs no
 * system call; a task woken while the queue drains waits for the next
 * drain, one zero-timeout poll later, so tasks that wake each other cannot
 * keep the loop from its sockets.
 */
void mh_task_wake(struct mh_task *t);
/* Resumes it after `seconds` unless woken earlier (a wait with a timeout: its resume tells which).
 */
void mh_task_wake_in(struct mh_task *t, double seconds);

/* Links l to t: released when t ends. */
void mh_task_adopt(struct mh_task *t, struct mh_task_link *l);
/* Unlinks l from its task, if any (idempotent); release is not called. */
void mh_task_unlink(struct mh_task_link *l);

/*
 * A new task of `kind` in g, running the function on top of `from`'s stack
 * with the nargs values above it... (moved onto the task's coroutine). It
 * starts from the next loop iteration. NULL when out of memory (nothing
 * moved).
 */
struct mh_task *mh_task_new(struct mh_gen *g, lua_State *from, int nargs, enum mh_task_kind kind);
/*
 * Ends a suspended task now (not the running one): cancels its wait, closes
 * its to-be-closed variables, releases what it owns, and reports "killed"
 * to on_end.
 */
void mh_task_kill(struct mh_task *t);

/* Whether the task's client has so much output queued that writers should wait. */
bool mh_task_output_high(const struct mh_task *t);

/* Request events for a task that may be waiting on them (the Lua route handler's callbacks). */
void mh_task_on_body(struct mh_task *t);
void mh_task_on_writable(struct mh_task *t);
void mh_task_on_abort(struct mh_task *t);

/*
 * Streams and a graceful stop: once the worker stops serving (after
 * shutdown_delay), a handler whose response is streaming (head sent), and
 * any background task, gets nil, "stopping" from http.sleep and res:write, so its loop ends instead of
 * holding the stop for the whole shutdown_timeout. mh_task_on_stopping wakes
 * one already waiting there or in any waiting call (mh_task_wait: a socket
 * read, a fetch, a thread join) with the same nil, "stopping";
 * mh_task_stream_stopping tells a call about to wait.
 * Both follow the generation's stop (mh_gen_stop, MH_GEN_STOPPING): a
 * generation retired by a reload in place stops its streams the same way,
 * and its background tasks hear "stopping" from the next loop turn, as
 * streaming handlers do, so a subscriber loop does not hold the stop for
 * its read timeout.
 */
void mh_task_on_stopping(struct mh_task *t);
bool mh_task_stream_stopping(const struct mh_task *t);
/*
 * This streaming handler alone stops (a drained generation closes its
 * streams one by one): from now on its waits answer nil, "stopping", as if
 * its generation stopped, and one waiting now is woken with it.
 */
void mh_task_stop_stream(struct mh_task *t);

/*
 * A generation retired by a reload: its background tasks (timer callbacks,
 * light threads, on_start functions) still running get `grace` seconds
 * (shutdown_timeout) to end, then they are killed, so a loop that never
 * returns cannot keep the old code and its memory alive. Without background
 * tasks this does nothing. Requests in flight end on their own.
 */
void mh_task_retire_background(struct mh_gen *g, double grace);

/* "light thread", "timer", "on_start", "script": a task's kind in logs. */
const char *mh_task_kind_name(enum mh_task_kind k);

/* Frees the pooled coroutines of a generation (before lua_close). */
void mh_task_pool_free(struct mh_gen *g);

/* Registers http.sleep, http.now and http.clock into the table on top of L. */
void mh_sched_open(lua_State *L);

/* The yield marker lua/moonhttp/coroutine.lua passes up through user coroutines. */
void mh_sched_push_marker(lua_State *L);

#endif
