#include "lua_sched.h"

#include "log.h"
#include "lua_errors.h"
#include "lua_guard.h"
#include "lua_vm.h"
#include "req.h"

#include <lauxlib.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct ev_loop *loop_of(struct mh_task *t)
{
    return mh_gen_loop(t->gen);
}

static void on_task_timer(struct ev_loop *loop, ev_timer *w, int revents);
static void ready_remove(struct mh_task *t);

/*
 * Every pooled coroutine keeps the req and res metatables in its first two
 * stack slots, below whatever it runs: a request's handler sets them on its
 * two new userdata with lua_pushvalue, cheaper than two registry lookups.
 */
#define MT_REQ    1
#define MT_RES    2
#define TASK_BASE 2 /* the stack slots a task's own values start above */

static void push_base(struct mh_gen *g, lua_State *co)
{
    lua_rawgeti(co, LUA_REGISTRYINDEX, g->req_mt_ref);
    lua_rawgeti(co, LUA_REGISTRYINDEX, g->res_mt_ref);
}

static struct mh_task *task_get(struct mh_gen *g)
{
    struct mh_task *t = g->free_tasks;
    if (t) {
        g->free_tasks = t->next_free;
        t->serial++;
        return t;
    }
    lua_State *L = g->L;
    if (!lua_checkstack(L, 4) || !(t = calloc(1, sizeof *t)))
        return NULL;
    t->gen = g;
    t->co = lua_newthread(L);
    t->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    *(struct mh_task **)lua_getextraspace(t->co) = t;
    push_base(g, t->co);
    ev_init(&t->timer, on_task_timer);
    t->timer.data = t;
    g->ntasks++;
    return t;
}

/*
 * A coroutine the CPU hook raised or yielded out of is not reused: an error
 * thrown from a hook leaves the thread's "hooks allowed" flag off (Lua
 * restores it only in a pcall), so no hook could stop its next task.
 */
static void task_renew_thread(struct mh_task *t)
{
    lua_State *L = t->gen->L;
    if (!lua_checkstack(L, 2))
        return;
    luaL_unref(L, LUA_REGISTRYINDEX, t->co_ref);
    t->co = lua_newthread(L);
    t->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    *(struct mh_task **)lua_getextraspace(t->co) = t;
    push_base(t->gen, t->co);
}

static void task_put(struct mh_task *t)
{
    struct mh_gen *g = t->gen;
    /* A wake must not reach the task's next user (a handler seldom armed it: no call then). */
    if (ev_is_active(&t->timer) || ev_is_pending(&t->timer))
        ev_timer_stop(loop_of(t), &t->timer);
    ready_remove(t);
    t->request = NULL;
    t->handoff = NULL;
    t->aborted = false;
    t->stopped = false;
    t->req = NULL;
    t->res = NULL;
    t->wait = MH_WAIT_NONE;
    t->on_resume = NULL;
    t->on_cancel = NULL;
    t->wait_data = NULL;
    t->on_end = NULL;
    t->end_data = NULL;
    t->on_done = NULL;
    t->next_free = g->free_tasks;
    g->free_tasks = t;
}

void mh_task_pool_free(struct mh_gen *g)
{
    while (g->free_tasks) {
        struct mh_task *t = g->free_tasks;
        g->free_tasks = t->next_free;
        free(t);
    }
}

/*
 * The running task lives in the extra space of the generation's main thread
 * (each task's own coroutine also points to its task there, the fast path).
 * A user coroutine's extra space is a stale copy made at its creation, so it
 * is never trusted.
 */
static struct mh_task **running_slot(lua_State *L)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    lua_State *main = lua_tothread(L, -1);
    lua_pop(L, 1);
    return (struct mh_task **)lua_getextraspace(main);
}

struct mh_task *mh_task_current(lua_State *L)
{
    struct mh_task *t = mh_task_of_thread(L);
    return t ? t : *running_slot(L);
}

struct mh_task *mh_task_check(lua_State *L, const char *what)
{
    struct mh_task *t = mh_task_current(L);
    if (!t)
        luaL_error(L,
                   "%s: must be called from a handler, thread, timer, on_start function or `run` "
                   "script, not while the script loads",
                   what);
    if (!lua_isyieldable(L))
        luaL_error(L,
                   "%s: cannot wait here (inside a metamethod or a callback called from C, such "
                   "as table.sort's or string.gsub's)",
                   what);
    return t;
}

static const char YIELD_MARKER = 'y';

void mh_sched_push_marker(lua_State *L)
{
    lua_pushlightuserdata(L, (void *)&YIELD_MARKER);
}

int mh_task_yield(lua_State *L, struct mh_task *t, enum mh_task_wait wait, mh_task_resume_fn fn)
{
    t->wait = wait;
    t->on_resume = fn;
    /* In a user coroutine, coroutine.resume (coroutine.lua) passes the marker up to the task. */
    mh_sched_push_marker(L);
    return lua_yield(L, 1);
}

static int resume_stopping(struct mh_task *t, lua_State *co);

int mh_task_wait(lua_State *L, struct mh_task *t, mh_task_resume_fn resume,
                 mh_task_cancel_fn cancel, void *data)
{
    if (mh_task_stream_stopping(t)) {
        /* The call armed its wait already: undo it, and answer once this call has returned. */
        t->wait_data = data;
        if (cancel)
            cancel(t);
        t->wait_data = NULL;
        t->on_cancel = NULL;
        mh_task_wake(t);
        return mh_task_yield(L, t, MH_WAIT_SLEEP, resume_stopping);
    }
    t->wait_data = data;
    t->on_cancel = cancel;
    return mh_task_yield(L, t, MH_WAIT_CALL, resume);
}

void mh_task_adopt(struct mh_task *t, struct mh_task_link *l)
{
    mh_task_unlink(l);
    l->_task = t;
    l->_prev = NULL;
    l->_next = t->_links;
    if (l->_next)
        l->_next->_prev = l;
    t->_links = l;
}

void mh_task_unlink(struct mh_task_link *l)
{
    if (!l->_task)
        return;
    if (l->_prev)
        l->_prev->_next = l->_next;
    else
        l->_task->_links = l->_next;
    if (l->_next)
        l->_next->_prev = l->_prev;
    l->_task = NULL;
    l->_prev = l->_next = NULL;
}

/* Releases what the task owns, newest first; a release may unlink others. */
static void release_links(struct mh_task *t)
{
    while (t->_links) {
        struct mh_task_link *l = t->_links;
        mh_task_unlink(l);
        l->release(l);
    }
}

/* Stops a pending wait without resuming (the task is ending). */
static void cancel_wait(struct mh_task *t)
{
    ev_timer_stop(loop_of(t), &t->timer);
    ready_remove(t);
    if (t->wait == MH_WAIT_CALL && t->on_cancel)
        t->on_cancel(t);
    t->wait = MH_WAIT_NONE;
    t->on_resume = NULL;
    t->on_cancel = NULL;
    t->wait_data = NULL;
}

const char *mh_task_kind_name(enum mh_task_kind k)
{
    switch (k) {
    case MH_TASK_THREAD:
        return "light thread";
    case MH_TASK_TIMER:
        return "timer";
    case MH_TASK_ON_START:
        return "on_start";
    default:
        return "script";
    }
}

#define KILLED (-1) /* task_end's status for mh_task_kill */

static bool is_background(const struct mh_task *t)
{
    return t->kind != MH_TASK_HANDLER && t->kind != MH_TASK_RUN;
}

/*
 * Counts t for the worker's stop (a stop also waits for a `run` script) and
 * keeps it on its generation's list of background tasks, the ones a reload
 * may kill (delta +1 or -1).
 */
static void background_count(struct mh_task *t, int delta)
{
    struct mh_gen *g = t->gen;
    const struct mh_gen_host *host = g->host;
    if (t->kind != MH_TASK_HANDLER && host && host->tasks_running)
        host->tasks_running(host, delta);
    if (!is_background(t))
        return;
    if (delta > 0) {
        t->_bg_prev = NULL;
        t->_bg_next = g->_background;
        if (g->_background)
            g->_background->_bg_prev = t;
        g->_background = t;
        return;
    }
    if (t->_bg_prev)
        t->_bg_prev->_bg_next = t->_bg_next;
    else
        g->_background = t->_bg_next;
    if (t->_bg_next)
        t->_bg_next->_bg_prev = t->_bg_prev;
    t->_bg_prev = t->_bg_next = NULL;
    if (!g->_background && ev_is_active(&g->_retire_timer)) {
        /* The last one ended in time. t still holds its own reference to g. */
        ev_timer_stop(mh_gen_loop(g), &g->_retire_timer);
        mh_gen_unref(g);
    }
}

static void on_retire_timeout(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct mh_gen *g = w->data;
    (void)loop;
    (void)revents;
    unsigned n = 0;
    for (struct mh_task *t = g->_background; t; t = t->_bg_next)
        n++;
    mh_log(MH_LOG_WARN,
           "reload: %u background task%s of the previous code still running after "
           "shutdown_timeout; killing them",
           n, n == 1 ? "" : "s");
    /*
     * At most the tasks there are now: a killed task's cleanup could start
     * another thread. Killing one may end others (its threads), so take the
     * head each time. The timer's reference keeps g alive meanwhile.
     */
    for (; n > 0 && g->_background; n--)
        mh_task_kill(g->_background);
    mh_gen_unref(g);
}

static void stop_background(struct mh_gen *g)
{
    /* Wakes are deferred to the next loop turn: the list does not change under us. */
    for (struct mh_task *t = g->_background; t; t = t->_bg_next)
        mh_task_on_stopping(t);
}

void mh_task_retire_background(struct mh_gen *g, double grace)
{
    if (!g->_background || ev_is_active(&g->_retire_timer))
        return;
    ev_timer_init(&g->_retire_timer, on_retire_timeout, grace, 0.);
    g->_retire_timer.data = g;
    mh_gen_ref(g);
    ev_timer_start(mh_gen_loop(g), &g->_retire_timer);
}

/*
 * A guard cut a task: what it built is garbage now, often hundreds of MB (a
 * loop filling a table). The generational collector would keep it until the
 * heap doubles again, and glibc keeps freed pages: collect it all now and
 * give the pages back to the system. Collections are repeated while they
 * still free a tenth of the heap: Lua halves its short-string table at most
 * once per cycle, and a million short strings leave it at 8 MB after one.
 * Cheap once the garbage is gone (the live heap of an app is small), and
 * guard cuts are rare.
 */
static void collect_after_guard(lua_State *L)
{
    int kib = lua_gc(L, LUA_GCCOUNT);
    for (int i = 0; i < 32; i++) {
        lua_gc(L, LUA_GCCOLLECT);
        int now = lua_gc(L, LUA_GCCOUNT);
        if (now > kib - kib / 10)
            break;
        kib = now;
    }
    malloc_trim(0);
}

/*
 * The end of a task, however it ended: st is LUA_OK with nres results on
 * co, an error status with the message on top, or KILLED. Everything the
 * task owns is released before it goes back to the pool.
 */
static void task_end(struct mh_task *t, int st, int nres, enum mh_guard_kind guard)
{
    struct mh_gen *g = t->gen;
    lua_State *co = t->co;
    struct mh_req *r = t->request;
    const struct mh_handler *handoff = st == LUA_OK ? t->handoff : NULL;
    if (st != LUA_OK && st != KILLED) {
        /* The value is shown from the main thread: co has failed and runs nothing more. */
        lua_pushvalue(co, -1);
        lua_xmove(co, g->L, 1);
        mh_lua_traceback(g->L, co, mh_lua_error_text(g->L, -1));
        lua_replace(g->L, -3);
        lua_pop(g->L, 1);
        const char *trace = lua_tostring(g->L, -1);
        if (!trace)
            trace = "?";
        if (st == LUA_ERRMEM)
            guard = MH_GUARD_MEMORY;
        if (g->ops && g->ops->task_failed) /* what it costs is policy: lua_failure.c */
            g->ops->task_failed(t, trace, guard);
        else
            mh_log(MH_LOG_ERROR, "%s: %s", t->label ? t->label : "task", trace);
        lua_pop(g->L, 1);
        t->exit_status = 1;
    }
    if (st == KILLED)
        lua_pushliteral(co, "killed");
    if (t->on_end)
        t->on_end(t, st == LUA_OK, st == LUA_OK ? nres : 1);
    /* Stray references to req/res now raise "request finished". */
    if (t->req)
        t->req->r = t->res->r = NULL;
    if (st != LUA_OK) {
        lua_resetthread(co); /* closes pending to-be-closed variables; the thread is reusable */
        lua_settop(co, 0);   /* ...and empties its stack, the metatables too */
        push_base(g, co);
    }
    lua_settop(co, TASK_BASE);
    if (guard == MH_GUARD_CPU)
        task_renew_thread(t);
    if (guard != MH_GUARD_NONE)
        collect_after_guard(g->L);
    release_links(t); /* its sockets, threads and client responses */
    if (t->on_done)
        t->on_done(t);
    if (t->kind != MH_TASK_HANDLER) /* handlers are not counted */
        background_count(t, -1);
    task_put(t);
    if (r) {
        r->handler_data = NULL; /* the task is gone: callbacks until finish find nothing */
        if (handoff && !r->closed)
            mh_req_start(r, handoff); /* the C handler finishes the request */
        else
            mh_req_finish(r);
    }
    mh_gen_unref(g);
}

/*
 * Resumes a task with nargs values on its stack, and deals with how it
 * stopped: a wait (nothing to do until the watcher fires), the end of the
 * function, or an error. The running task is recorded for mh_task_current,
 * saved and restored around the resume.
 */
static void task_resume(struct mh_task *t, int nargs)
{
    struct mh_gen *g = t->gen;
    lua_State *co = t->co;
    int nres;
    t->wait = MH_WAIT_NONE;
    struct mh_task **running = (struct mh_task **)lua_getextraspace(g->L);
    struct mh_task *outer = *running;
    *running = t;
    struct mh_guard_saved saved = mh_guard_enter(co, t->label);
    int st = lua_resume(co, g->L, nargs, &nres);
    enum mh_guard_kind guard = mh_guard_leave(saved);
    *running = outer;
    if (st == LUA_YIELD) {
        lua_pop(co, nres);
        if (t->wait != MH_WAIT_NONE) {
            /*
             * The flush rule: what a handler wrote before it waits is sent
             * before it waits. Every wait suspends here (http.sleep, a
             * channel's receive, moonhttp.waiter, a socket read, a fetch, a
             * Redis or PostgreSQL reply, the request body), and none can
             * tell how long it lasts: a stream's event held until the next
             * one wakes the handler is the next one's age late. Writes
             * within one run of the handler still batch into one send, and
             * a handler that never waits never gets here. Nothing written
             * yet: the head stays open to status and headers.
             */
            if (t->request && t->request->res.written)
                mh_req_flush(t->request);
            return;
        }
        if (guard == MH_GUARD_CPU) /* yielded out of by the CPU hook: the task ends here */
            lua_pushliteral(co, "cpu limit exceeded (the error was caught; the task is ended)");
        else
            lua_pushliteral(co,
                            "coroutine.yield() outside a coroutine: only moonhttp calls may wait");
        st = LUA_ERRRUN;
    } else if (st == LUA_OK) {
        nres -= TASK_BASE; /* a finished coroutine's results are its whole stack, the base too */
    }
    task_end(t, st, nres, guard);
}

void mh_task_kill(struct mh_task *t)
{
    cancel_wait(t);
    task_end(t, KILLED, 0, MH_GUARD_NONE);
}

void mh_task_start_handler(struct mh_gen *g, struct mh_req *r, int ref, const char *extra,
                           size_t extra_len)
{
    struct mh_task *t = task_get(g);
    if (!t) {
        mh_log(MH_LOG_ERROR, "out of memory starting a handler");
        mh_req_respond(r, 500, "500 Internal Server Error\n");
        return;
    }
    mh_gen_ref(g);
    t->kind = MH_TASK_HANDLER;
    t->request = r;
    t->on_done = NULL;
    r->handler_data = t;
    t->label = r->routed.route ? mh_route_pattern(r->routed.route) : NULL;
    lua_State *co = t->co;
    /*
     * Fresh req/res objects per request, so a reference a handler keeps
     * cannot see a later request; the copies just above the metatables keep
     * them alive until the task ends and invalidates them.
     */
    t->req = lua_newuserdatauv(co, sizeof *t->req, 1); /* user value 1: req.ctx (lua_request.c) */
    lua_pushvalue(co, MT_REQ);
    lua_setmetatable(co, -2);
    t->res = lua_newuserdatauv(co, sizeof *t->res, 0);
    lua_pushvalue(co, MT_RES);
    lua_setmetatable(co, -2);
    t->req->r = t->res->r = r;
    t->req->task = t->res->task = t;
    lua_rawgeti(co, LUA_REGISTRYINDEX, ref);
    lua_pushvalue(co, TASK_BASE + 1);
    lua_pushvalue(co, TASK_BASE + 2);
    int nargs = 2;
    if (extra) {
        lua_pushlstring(co, extra, extra_len);
        nargs++;
    }
    task_resume(t, nargs);
}

struct mh_task *mh_task_spawn(struct mh_gen *g, int nargs, void (*on_done)(struct mh_task *))
{
    struct mh_task *t = task_get(g);
    if (!t)
        return NULL;
    mh_gen_ref(g);
    t->kind = MH_TASK_RUN;
    t->request = NULL;
    t->on_done = on_done;
    t->exit_status = 0;
    t->label = "(run script)";
    lua_xmove(g->L, t->co, nargs + 1);
    background_count(t, 1); /* its end counts it down: the worker leaves at zero */
    task_resume(t, nargs);
    return t;
}

/* A new task's first resume: its function and arguments are already on its stack. */
static int push_start_args(struct mh_task *t, lua_State *co)
{
    (void)t;
    return lua_gettop(co) - TASK_BASE - 1;
}

struct mh_task *mh_task_new(struct mh_gen *g, lua_State *from, int nargs, enum mh_task_kind kind)
{
    struct mh_task *t = task_get(g);
    if (!t)
        return NULL;
    mh_gen_ref(g);
    t->kind = kind;
    t->request = NULL;
    t->exit_status = 0;
    t->label = mh_task_kind_name(kind); /* "timer", "light thread", "on_start" in the stall logs */
    lua_xmove(from, t->co, nargs + 1);
    background_count(t, 1);
    /* Started from the loop, so no task ever runs inside another's C call. */
    t->wait = MH_WAIT_SLEEP;
    t->on_resume = push_start_args;
    mh_task_wake(t);
    return t;
}

/* A wait is over (its timer, or the run queue): the task goes on with what its wait gave. */
static void resume_woken(struct mh_task *t)
{
    int n = t->on_resume ? t->on_resume(t, t->co) : 0;
    task_resume(t, n);
}

static void on_task_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    (void)loop;
    (void)revents;
    resume_woken(w->data);
}

void mh_task_wake_in(struct mh_task *t, double seconds)
{
    ready_remove(t);
    ev_timer_stop(loop_of(t), &t->timer);
    ev_timer_set(&t->timer, seconds, 0.);
    ev_timer_start(loop_of(t), &t->timer);
}

/*
 * The run queue. A woken task used to get a 0 s timer, which cost every
 * wake-up a zero-timeout epoll_wait of its own. The queue's ev_prepare runs
 * before the loop polls, at the highest priority, so a resumed task's
 * output is still written by the worker's own prepare (which flushes
 * connections) in the same iteration. The idle watcher, active while the
 * queue is not empty, keeps the poll from blocking when a task is woken
 * after the prepares ran (from the worker's flush) or while the queue
 * drains.
 */
static void ready_stop(struct mh_gen *g)
{
    struct ev_loop *loop = mh_gen_loop(g);
    ev_prepare_stop(loop, &g->_ready_prepare);
    ev_idle_stop(loop, &g->_ready_idle);
}

static void ready_remove(struct mh_task *t)
{
    if (!t->_ready)
        return;
    struct mh_gen *g = t->gen;
    if (t->_ready_prev)
        t->_ready_prev->_ready_next = t->_ready_next;
    else
        g->_ready_head = t->_ready_next;
    if (t->_ready_next)
        t->_ready_next->_ready_prev = t->_ready_prev;
    else
        g->_ready_tail = t->_ready_prev;
    t->_ready_prev = t->_ready_next = NULL;
    t->_ready = false;
    if (!g->_ready_head)
        ready_stop(g);
}

static void on_ready(struct ev_loop *loop, ev_prepare *p, int revents)
{
    struct mh_gen *g = p->data;
    (void)loop;
    (void)revents;
    /*
     * Only the tasks queued now: one they wake waits for the next drain. A
     * resumed task may kill a queued one (which leaves the queue) or end the
     * last reference to g: the drain holds its own.
     */
    size_t n = 0;
    for (struct mh_task *t = g->_ready_head; t; t = t->_ready_next)
        n++;
    mh_gen_ref(g);
    while (n-- > 0 && g->_ready_head) {
        struct mh_task *t = g->_ready_head;
        ready_remove(t);
        resume_woken(t);
    }
    mh_gen_unref(g);
}

/* Its only task is to be active: libev does not block in the poll while an idle watcher is. */
static void on_ready_idle(struct ev_loop *loop, ev_idle *w, int revents)
{
    (void)loop;
    (void)w;
    (void)revents;
}

void mh_task_wake(struct mh_task *t)
{
    struct mh_gen *g = t->gen;
    ev_timer_stop(loop_of(t), &t->timer); /* a wait's timeout; also a wake_in(0) not yet run */
    if (t->_ready)
        return;
    t->_ready = true;
    t->_ready_next = NULL;
    t->_ready_prev = g->_ready_tail;
    if (g->_ready_tail)
        g->_ready_tail->_ready_next = t;
    else
        g->_ready_head = t;
    g->_ready_tail = t;
    if (ev_is_active(&g->_ready_prepare))
        return;
    if (!ev_cb(&g->_ready_prepare)) {
        ev_prepare_init(&g->_ready_prepare, on_ready);
        ev_set_priority(&g->_ready_prepare, EV_MAXPRI);
        g->_ready_prepare.data = g;
        ev_idle_init(&g->_ready_idle, on_ready_idle);
    }
    struct ev_loop *loop = loop_of(t);
    ev_prepare_start(loop, &g->_ready_prepare);
    ev_idle_start(loop, &g->_ready_idle);
}

void mh_task_on_body(struct mh_task *t)
{
    if (t->wait != MH_WAIT_BODY)
        return;
    int n = t->on_resume(t, t->co);
    task_resume(t, n);
}

void mh_task_on_writable(struct mh_task *t)
{
    if (t->wait != MH_WAIT_WRITABLE ||
        (!t->request->closed &&
         t->request->res.body.bytes + t->request->ops->pending(t->request) > MH_REQ_LOW_WATER))
        return;
    int n = t->on_resume ? t->on_resume(t, t->co) : 0;
    task_resume(t, n);
}

void mh_task_on_abort(struct mh_task *t)
{
    t->aborted = true;
    if (t->wait == MH_WAIT_BODY || t->wait == MH_WAIT_WRITABLE)
        mh_task_wake(t);
}

/*
 * A streaming handler (head sent: an SSE stream, a WebSocket) and a
 * background task (timer callback, light thread, on_start) have nothing to
 * finish that a stop should wait for: their waits end with "stopping". A
 * handler still answering finishes its response as usual.
 */
bool mh_task_stream_stopping(const struct mh_task *t)
{
    const struct mh_gen *g = t->gen;
    if (is_background(t)) /* a retired generation's: the new code runs its own */
        return (g->stop & (MH_GEN_RETIRED | MH_GEN_STOPPING)) != 0;
    return t->request && t->request->res.head_sent && (t->stopped || mh_gen_stopping(g));
}

static int resume_stopping(struct mh_task *t, lua_State *co)
{
    (void)t;
    lua_pushnil(co);
    lua_pushliteral(co, "stopping");
    return 2;
}

/*
 * The graceful stop began, or a reload retired the task's code: a streaming
 * handler waiting on a timer, on a slow client, or in a waiting call (a
 * socket read, a fetch, a pool, a thread: a Redis subscription feeding an
 * SSE stream, say) hears nil, "stopping" from a fresh loop iteration. The
 * call's own state lets go of the task first (on_cancel leaves the socket
 * or fetch usable), and the wait becomes a timer wait, so a later event
 * cannot resume it twice. A body read is left alone: the client still
 * sends it.
 */
/* The wait was answered and its resume is due (mh_task_wake): that answer stands. */
static bool wake_due(struct mh_task *t)
{
    struct ev_loop *loop = loop_of(t);
    return t->_ready || ev_is_pending(&t->timer) ||
           (ev_is_active(&t->timer) && ev_timer_remaining(loop, &t->timer) <= 0.);
}

void mh_task_on_stopping(struct mh_task *t)
{
    /*
     * Left alone: a task not started yet (it starts with its arguments and
     * hears "stopping" at its first wait), and one already woken (a
     * WebSocket's receive ended by the close 1001 says "closed").
     */
    if ((t->wait != MH_WAIT_SLEEP && t->wait != MH_WAIT_WRITABLE && t->wait != MH_WAIT_CALL) ||
        t->on_resume == push_start_args || wake_due(t) || !mh_task_stream_stopping(t))
        return;
    if (t->wait == MH_WAIT_CALL && t->on_cancel)
        t->on_cancel(t);
    t->on_cancel = NULL;
    t->wait_data = NULL;
    t->wait = MH_WAIT_SLEEP;
    t->on_resume = resume_stopping;
    mh_task_wake(t);
}

void mh_task_stop_stream(struct mh_task *t)
{
    t->stopped = true;
    mh_task_on_stopping(t);
}

/* ---- http.sleep, http.now, http.clock ------------------------------------ */

static int resume_slept(struct mh_task *t, lua_State *co)
{
    (void)t;
    lua_pushboolean(co, 1);
    return 1;
}

/*
 * http.sleep(s): true after s seconds; nil, "stopping" in a streaming
 * handler or a background task once a stop began. A sleep begun after that
 * answers within STOPPING_NAP, not at once: a loop that ignores the answer
 * then turns at most 100 times a second until shutdown_timeout ends it,
 * instead of spinning a core.
 */
#define STOPPING_NAP 0.01
static int l_sleep(lua_State *L)
{
    double s = luaL_checknumber(L, 1);
    luaL_argcheck(L, s >= 0, 1, "negative duration");
    struct mh_task *t = mh_task_check(L, "http.sleep");
    bool stopping = mh_task_stream_stopping(t);
    mh_task_wake_in(t, stopping && s > STOPPING_NAP ? STOPPING_NAP : s);
    return mh_task_yield(L, t, MH_WAIT_SLEEP, stopping ? resume_stopping : resume_slept);
}

static int l_now(lua_State *L)
{
    struct mh_gen *g = mh_gen_of(L);
    struct ev_loop *loop = mh_gen_loop(g);
    lua_pushnumber(L, ev_now(loop));
    return 1;
}

/* http.clock(): a fresh monotonic reading (arbitrary origin), for measuring durations. */
static int l_clock(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec / 1e9);
    return 1;
}

bool mh_task_output_high(const struct mh_task *t)
{
    return t->request && mh_req_output_high(t->request);
}

/* coroutine.lua: a user coroutine is resumed (the CPU watchdog hooks the thread that runs) */
static int l_guard_into(lua_State *L)
{
    lua_State *co = lua_tothread(L, 1);
    if (co)
        mh_guard_switch(co);
    return 0;
}

/* ...and its resume returned to the calling thread, L: passes the results through */
static int l_guard_back(lua_State *L)
{
    mh_guard_switch(L);
    return lua_gettop(L);
}

/*
 * g's part of a stop (mh_gen_stop): its background tasks hear "stopping"
 * (retired, drain or not: the new code runs its own); retired by a reload,
 * those still running after shutdown_timeout are killed.
 */
static void on_gen_stop(struct mh_gen *g, unsigned added)
{
    if (added & (MH_GEN_STOPPING | MH_GEN_RETIRED))
        stop_background(g);
    if (added & MH_GEN_RETIRED)
        mh_task_retire_background(g, g->config->shutdown_timeout);
}

void mh_sched_open(lua_State *L)
{
    mh_gen_on_stop(mh_gen_of(L), on_gen_stop);
    lua_pushcfunction(L, l_sleep);
    lua_setfield(L, -2, "sleep");
    lua_pushcfunction(L, l_now);
    lua_setfield(L, -2, "now");
    lua_pushcfunction(L, l_clock);
    lua_setfield(L, -2, "clock");
    /* Waiting calls in user coroutines: see lua/moonhttp/coroutine.lua. */
    lua_getglobal(L, "require");
    lua_pushliteral(L, "moonhttp.coroutine");
    lua_call(L, 1, 1);
    mh_sched_push_marker(L);
    lua_pushcfunction(L, l_guard_into);
    lua_pushcfunction(L, l_guard_back);
    lua_call(L, 3, 0);
}
