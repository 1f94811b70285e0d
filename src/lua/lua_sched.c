#include "lua_sched.h"

#include "conn.h"
#include "log.h"
#include "lua_client.h"
#include "lua_errors.h"
#include "lua_request.h"
#include "lua_response.h"
#include "lua_vm.h"
#include "worker.h"

#include <lauxlib.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Output queued beyond this makes res:write wait for the client. */
#define HIGH_WATER (256 * 1024)
#define LOW_WATER  (64 * 1024)

static struct ev_loop *loop_of(struct mh_task *t)
{
    return t->gen->worker ? t->gen->worker->loop : EV_DEFAULT;
}

static void on_task_timer(struct ev_loop *loop, ev_timer *w, int revents);

static struct mh_task *task_get(struct mh_gen *g)
{
    struct mh_task *t = g->free_tasks;
    if (t) {
        g->free_tasks = t->next_free;
        return t;
    }
    lua_State *L = g->L;
    if (!lua_checkstack(L, 4) || !(t = calloc(1, sizeof *t)))
        return NULL;
    t->gen = g;
    t->co = lua_newthread(L);
    t->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    *(struct mh_task **)lua_getextraspace(t->co) = t;
    ev_init(&t->timer, on_task_timer);
    t->timer.data = t;
    g->ntasks++;
    return t;
}

static void task_put(struct mh_task *t)
{
    struct mh_gen *g = t->gen;
    t->conn = NULL;
    t->req = NULL;
    t->res = NULL;
    t->wait = MH_WAIT_NONE;
    t->on_resume = NULL;
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

struct mh_task *mh_task_current(lua_State *L)
{
    struct mh_task *t = *(struct mh_task **)lua_getextraspace(L);
    return (t && t->co == L) ? t : NULL;
}

struct mh_task *mh_task_check(lua_State *L, const char *what)
{
    struct mh_task *t = mh_task_current(L);
    if (!t || !lua_isyieldable(L))
        luaL_error(L,
                   "%s: must be called from a handler or a `run` script, not from another "
                   "coroutine or a metamethod",
                   what);
    return t;
}

int mh_task_yield(lua_State *L, struct mh_task *t, enum mh_task_wait wait, mh_task_resume_fn fn)
{
    t->wait = wait;
    t->on_resume = fn;
    return lua_yield(L, 0);
}

/* A handler failed: 500 if the response has not started, else cut it off. */
static void handler_failed(struct mh_task *t, struct mh_conn *c, const char *trace)
{
    char where[64];
    mh_log(MH_LOG_ERROR, "handler error (%s %.*s from %s): %s",
           llhttp_method_name((llhttp_method_t)c->req.method), (int)c->req.target.len,
           mh_conn_head(c) + c->req.target.off, mh_conn_remote_addr(c, where, sizeof where), trace);
    if (c->closed)
        return;
    if (c->res.head_sent) {
        mh_conn_close(c);
        return;
    }
    mh_lua_answer_error(t, c, trace);
}

/*
 * Resumes a task with nargs values on its stack, and deals with how it
 * stopped: a wait (nothing to do until the watcher fires), the end of the
 * function (the response is complete), or an error.
 */
static void task_resume(struct mh_task *t, int nargs)
{
    struct mh_gen *g = t->gen;
    lua_State *co = t->co;
    int nres;
    t->wait = MH_WAIT_NONE;
    int st = lua_resume(co, g->L, nargs, &nres);
    if (st == LUA_YIELD) {
        lua_pop(co, nres);
        if (t->wait != MH_WAIT_NONE) {
            /* Let the client see what was written before a long wait. */
            if (t->conn && t->wait == MH_WAIT_SLEEP && t->conn->res.written)
                mh_conn_flush_response(t->conn);
            return;
        }
        lua_pushliteral(co, "coroutine.yield() in a handler: only moonhttp calls may wait");
        st = LUA_ERRRUN;
    }
    struct mh_conn *c = t->conn;
    if (st != LUA_OK) {
        mh_lua_traceback(g->L, co, lua_tostring(co, -1));
        const char *trace = lua_tostring(g->L, -1);
        if (c)
            handler_failed(t, c, trace ? trace : "?");
        else
            mh_log(MH_LOG_ERROR, "%s", trace ? trace : "?");
        lua_pop(g->L, 1);
        t->exit_status = 1;
    }
    /* Stray references to req/res now raise "request finished". */
    if (t->req)
        t->req->conn = t->res->conn = NULL;
    if (st != LUA_OK)
        lua_resetthread(co); /* closes pending to-be-closed variables; the thread is reusable */
    lua_settop(co, 0);
    if (t->client_open)
        mh_lua_client_task_end(t);
    if (t->on_done)
        t->on_done(t);
    task_put(t);
    if (c) {
        mh_conn_finish_response(c);
        mh_conn_unref(c);
    }
    mh_gen_unref(g);
}

void mh_task_start_handler(struct mh_gen *g, struct mh_conn *c, int ref, const char *extra,
                           size_t extra_len)
{
    struct mh_task *t = task_get(g);
    if (!t) {
        mh_log(MH_LOG_ERROR, "out of memory starting a handler");
        mh_conn_respond_simple(c, 500, NULL, "500 Internal Server Error\n");
        return;
    }
    mh_gen_ref(g);
    mh_conn_ref(c);
    t->conn = c;
    t->on_done = NULL;
    c->task = t;
    lua_State *co = t->co;
    /*
     * Fresh req/res objects per request, so a reference a handler keeps
     * cannot see a later request; the copies at the bottom of the stack keep
     * them alive until the task ends and invalidates them.
     */
    t->req = lua_newuserdatauv(co, sizeof *t->req, 0);
    lua_rawgetp(co, LUA_REGISTRYINDEX, &mh_request_mt_key);
    lua_setmetatable(co, -2);
    t->res = lua_newuserdatauv(co, sizeof *t->res, 0);
    lua_rawgetp(co, LUA_REGISTRYINDEX, &mh_response_mt_key);
    lua_setmetatable(co, -2);
    t->req->conn = t->res->conn = c;
    t->req->task = t->res->task = t;
    lua_rawgeti(co, LUA_REGISTRYINDEX, ref);
    lua_pushvalue(co, 1);
    lua_pushvalue(co, 2);
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
    t->conn = NULL;
    t->on_done = on_done;
    t->exit_status = 0;
    lua_xmove(g->L, t->co, nargs + 1);
    task_resume(t, nargs);
    return t;
}

static void on_task_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct mh_task *t = w->data;
    (void)loop;
    (void)revents;
    int n = t->on_resume ? t->on_resume(t, t->co) : 0;
    task_resume(t, n);
}

/* Resumes from a fresh loop iteration rather than from inside a connection callback. */
static void resume_soon(struct mh_task *t)
{
    ev_timer_stop(loop_of(t), &t->timer);
    ev_timer_set(&t->timer, 0., 0.);
    ev_timer_start(loop_of(t), &t->timer);
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
    if (t->wait != MH_WAIT_WRITABLE || mh_conn_pending_output(t->conn) > LOW_WATER)
        return;
    int n = t->on_resume ? t->on_resume(t, t->co) : 0;
    task_resume(t, n);
}

void mh_task_on_conn_closed(struct mh_task *t)
{
    if (t->wait == MH_WAIT_BODY || t->wait == MH_WAIT_WRITABLE)
        resume_soon(t);
}

bool mh_task_stream_stopping(const struct mh_task *t)
{
    return t->conn && t->conn->res.head_sent && t->gen->worker && t->gen->worker->shutting_down;
}

static int resume_stopping(struct mh_task *t, lua_State *co)
{
    (void)t;
    lua_pushnil(co);
    lua_pushliteral(co, "stopping");
    return 2;
}

/*
 * The graceful stop began: a streaming handler waiting on a timer or on a
 * slow client hears nil, "stopping" from a fresh loop iteration. Its wait
 * becomes a timer wait, so a later writable event cannot resume it twice.
 */
void mh_task_on_stopping(struct mh_task *t)
{
    if ((t->wait != MH_WAIT_SLEEP && t->wait != MH_WAIT_WRITABLE) || !mh_task_stream_stopping(t))
        return;
    t->wait = MH_WAIT_SLEEP;
    t->on_resume = resume_stopping;
    resume_soon(t);
}

/* ---- http.sleep, http.now, http.clock ------------------------------------------------ */

static int resume_slept(struct mh_task *t, lua_State *co)
{
    (void)t;
    lua_pushboolean(co, 1);
    return 1;
}

/* http.sleep(s): true after s seconds; nil, "stopping" in a streaming handler once a stop began. */
static int l_sleep(lua_State *L)
{
    double s = luaL_checknumber(L, 1);
    luaL_argcheck(L, s >= 0, 1, "negative duration");
    struct mh_task *t = mh_task_check(L, "http.sleep");
    if (mh_task_stream_stopping(t))
        return resume_stopping(t, L);
    ev_timer_stop(loop_of(t), &t->timer);
    ev_timer_set(&t->timer, s, 0.);
    ev_timer_start(loop_of(t), &t->timer);
    return mh_task_yield(L, t, MH_WAIT_SLEEP, resume_slept);
}

static int l_now(lua_State *L)
{
    struct mh_gen *g = mh_gen_of(L);
    struct ev_loop *loop = g->worker ? g->worker->loop : EV_DEFAULT;
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
    return t->conn && mh_conn_pending_output(t->conn) > HIGH_WATER;
}

void mh_sched_open(lua_State *L)
{
    lua_pushcfunction(L, l_sleep);
    lua_setfield(L, -2, "sleep");
    lua_pushcfunction(L, l_now);
    lua_setfield(L, -2, "now");
    lua_pushcfunction(L, l_clock);
    lua_setfield(L, -2, "clock");
}
