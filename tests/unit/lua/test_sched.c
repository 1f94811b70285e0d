/*
 * The scheduler (lua_sched.c) on a bare generation: a Lua state from
 * mh_gen_alloc with the standard libraries, http.sleep/now/clock and
 * moonhttp.coroutine, and one waiting call of the test's own, `wait([t])`,
 * written to the template every waiting built-in follows (mh_task_check,
 * mh_task_wait with a resume and a cancel, woken by mh_task_wake or after a
 * timeout by mh_task_wake_in). No server, no request: tasks are light
 * threads (MH_TASK_THREAD) run on the default loop.
 */
#include "lua_sched.h"
#include "lua_vm.h"
#include "unit.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>

struct mh_lua_embedded {
    const char *name;
    const char *src;
    size_t len;
};
extern const struct mh_lua_embedded mh_lua_embedded[];

static struct ev_loop *loop;

/* ---- the test's waiting call ----------------------------------------------- */

/* The one pending wait() (the tests wait in one task at a time, except retire). */
struct waiter {
    struct mh_task *task;
    const char *value; /* what the waker hands over; NULL: the timeout fired */
    int cancels;       /* on_cancel calls */
};
static struct waiter w;

static int resume_wait(struct mh_task *t, lua_State *co)
{
    struct waiter *x = t->wait_data;
    x->task = NULL;
    if (!x->value) {
        lua_pushnil(co);
        lua_pushliteral(co, "timeout");
        return 2;
    }
    lua_pushstring(co, x->value);
    return 1;
}

static void cancel_wait(struct mh_task *t)
{
    struct waiter *x = t->wait_data;
    x->task = NULL;
    x->cancels++;
}

/* wait([timeout]): the value a test wakes it with, or nil, "timeout". */
static int l_wait(lua_State *L)
{
    double timeout = luaL_optnumber(L, 1, 0);
    struct mh_task *t = mh_task_check(L, "wait");
    w.task = t;
    w.value = NULL;
    if (timeout > 0)
        mh_task_wake_in(t, timeout);
    return mh_task_wait(L, t, resume_wait, cancel_wait, &w);
}

/* Wakes the waiting task with v (from C, as an event callback would). */
static void wake(const char *v)
{
    struct mh_task *t = w.task;
    w.value = v;
    mh_task_wake(t);
}

/* ---- tasks ------------------------------------------------------------------ */

struct ended {
    int n;        /* on_end calls */
    bool ok;      /* of the last one */
    char res[64]; /* its first result (or error), as text */
};
static struct ended ended;

static void on_end(struct mh_task *t, bool ok, int nres)
{
    ended.n++;
    ended.ok = ok;
    const char *s = nres > 0 ? luaL_tolstring(t->co, -nres, NULL) : "";
    snprintf(ended.res, sizeof ended.res, "%s", s ? s : "?");
    if (nres > 0)
        lua_pop(t->co, 1);
}

static struct mh_gen *gen;

/* A light thread running src, started from the next loop iteration. */
static struct mh_task *spawn(const char *src)
{
    lua_State *L = gen->L;
    if (luaL_loadstring(L, src) != LUA_OK) {
        fprintf(stderr, "%s\n", lua_tostring(L, -1));
        exit(2);
    }
    struct mh_task *t = mh_task_new(gen, L, 0, MH_TASK_THREAD);
    t->on_end = on_end;
    return t;
}

static void on_tick(struct ev_loop *l, ev_timer *tm, int revents)
{
    (void)l;
    (void)tm;
    (void)revents;
}

/* Runs the loop for about `seconds` (0: one iteration). */
static void run(double seconds)
{
    ev_timer tick;
    ev_timer_init(&tick, on_tick, 0.002, 0.002);
    ev_timer_start(loop, &tick);
    ev_now_update(loop);
    double end = ev_now(loop) + seconds;
    do
        ev_run(loop, EVRUN_ONCE);
    while (ev_now(loop) < end);
    ev_timer_stop(loop, &tick);
}

static bool global_true(const char *name)
{
    lua_getglobal(gen->L, name);
    bool b = lua_toboolean(gen->L, -1);
    lua_pop(gen->L, 1);
    lua_pushnil(gen->L);
    lua_setglobal(gen->L, name);
    return b;
}

static void reset(void)
{
    memset(&ended, 0, sizeof ended);
    memset(&w, 0, sizeof w);
}

/* ---- the tests -------------------------------------------------------------- */

/* A new task does not run inside its creator's call: it starts from the loop. */
static void test_starts_from_the_loop(void)
{
    reset();
    spawn("ran = true; return 'done'");
    CHECK(!global_true("ran") && ended.n == 0);
    run(0);
    CHECK(ended.n == 1 && ended.ok);
    CHECK_STR(ended.res, "done");
}

/* A waiting task is suspended in MH_WAIT_CALL; a wake resumes it from the loop with the results. */
static void test_wait_and_wake(void)
{
    reset();
    struct mh_task *t = spawn("local v = wait(); return v .. '!'");
    run(0);
    CHECK(w.task == t && t->wait == MH_WAIT_CALL && t->wait_data == &w && ended.n == 0);
    wake("x");
    CHECK(ended.n == 0); /* not from inside the waker's callback */
    run(0);
    CHECK(ended.n == 1 && ended.ok);
    CHECK_STR(ended.res, "x!");
    CHECK(w.cancels == 0);
}

/* A wait with a timeout: woken first, its value; else nil, "timeout" after the delay. */
static void test_wait_timeout(void)
{
    reset();
    spawn("local v, err = wait(0.05); return tostring(v) .. ' ' .. tostring(err)");
    run(0);
    run(0.01);
    CHECK(ended.n == 0);
    run(0.1);
    CHECK(ended.n == 1);
    CHECK_STR(ended.res, "nil timeout");

    reset();
    spawn("local v, err = wait(0.05); return tostring(v) .. ' ' .. tostring(err)");
    run(0);
    wake("early");
    run(0);
    CHECK(ended.n == 1);
    CHECK_STR(ended.res, "early nil");
    run(0.1); /* the timeout must not resume it a second time (nor its pooled successor) */
    CHECK(ended.n == 1);
}

/* http.sleep waits on the loop, not the thread, and for at least its delay. */
static void test_sleep(void)
{
    reset();
    spawn("local a = http.clock(); assert(http.sleep(0.03) == true); return http.clock() - a");
    run(0);
    CHECK(ended.n == 0);
    run(0.2);
    double slept = ended.n == 1 ? atof(ended.res) : 0;
    CHECKF(ended.ok && slept >= 0.03 && slept < 0.2, "slept %f", slept);
}

/* A kill cancels the wait, closes to-be-closed variables, releases links, reports "killed". */
static int link_released;
static void release_link(struct mh_task_link *l)
{
    (void)l;
    link_released++;
}

static void test_kill(void)
{
    reset();
    link_released = 0;
    struct mh_task *t = spawn("local c <close> = setmetatable({}, {__close = function() "
                              "closed = true end}); wait(); return 'not reached'");
    struct mh_task_link link = {.release = release_link};
    mh_task_adopt(t, &link);
    run(0);
    CHECK(w.task == t);
    mh_task_kill(t);
    CHECK(ended.n == 1 && !ended.ok);
    CHECK_STR(ended.res, "killed");
    CHECK(w.cancels == 1 && link_released == 1 && global_true("closed"));
    run(0.01);
    CHECK(ended.n == 1);
}

/* An unlinked link is not released when its task ends. */
static void test_unlink(void)
{
    reset();
    link_released = 0;
    struct mh_task *t = spawn("return 1");
    struct mh_task_link a = {.release = release_link}, b = {.release = release_link};
    mh_task_adopt(t, &a);
    mh_task_adopt(t, &b);
    mh_task_unlink(&a);
    mh_task_unlink(&a); /* idempotent */
    run(0);
    CHECK(ended.n == 1 && link_released == 1);
}

/* An error ends the task with its message; the pooled coroutine serves the next task. */
static void test_error_and_reuse(void)
{
    reset();
    unsigned before = gen->ntasks;
    spawn("error('boom', 0)");
    run(0);
    CHECK(ended.n == 1 && !ended.ok);
    CHECK_STR(ended.res, "boom");
    spawn("return 'again'");
    run(0);
    CHECK(ended.n == 2 && ended.ok);
    CHECK_STR(ended.res, "again");
    CHECK(gen->ntasks == before);
}

/* A waiting call inside the user's own coroutine waits for the whole task. */
static void test_wait_in_user_coroutine(void)
{
    reset();
    spawn("local f = coroutine.wrap(function(a) local v = wait(); coroutine.yield(a .. v); "
          "return 'end' end); local first = f('in '); return first .. ',' .. f()");
    run(0);
    CHECK(w.task != NULL && ended.n == 0);
    wake("co");
    run(0);
    CHECK(ended.n == 1 && ended.ok);
    CHECK_STR(ended.res, "in co,end");
}

/* Outside a task (the main thread, as while the script loads) a waiting call raises. */
static void test_wait_outside_a_task(void)
{
    lua_State *L = gen->L;
    CHECK(mh_task_current(L) == NULL);
    luaL_loadstring(L, "wait()");
    CHECK(lua_pcall(L, 0, 0, 0) != LUA_OK);
    const char *msg = lua_tostring(L, -1);
    CHECKF(msg && strstr(msg, "wait: must be called from a handler"), "%s", msg ? msg : "(null)");
    lua_pop(L, 1);
}

/* A retired generation's background tasks still waiting after the grace period are killed. */
static void test_retire_background(void)
{
    reset();
    spawn("wait(); return 'woken'");
    spawn("http.sleep(10); return 'slept'");
    spawn("return 'quick'");
    run(0);
    CHECK(ended.n == 1);
    mh_task_retire_background(gen, 0.05);
    run(0.02);
    CHECK(ended.n == 1);
    run(0.1);
    CHECKF(ended.n == 3 && !ended.ok, "ended %d", ended.n);
    CHECK_STR(ended.res, "killed");
    CHECK(gen->_background == NULL);
}

static const struct mh_gen_ops gen_ops = {.before_close = mh_task_pool_free};

static void open_gen(struct mh_config *config)
{
    gen = mh_gen_alloc(config, &gen_ops);
    if (!gen)
        exit(2);
    lua_State *L = gen->L;
    luaL_openlibs(L);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "preload");
    for (const struct mh_lua_embedded *m = mh_lua_embedded; m->name; m++) {
        if (strcmp(m->name, "moonhttp.coroutine") != 0)
            continue;
        luaL_loadbuffer(L, m->src, m->len, m->name);
        lua_setfield(L, -2, m->name);
    }
    lua_pop(L, 2);
    lua_newtable(L);
    mh_sched_open(L);
    lua_setglobal(L, "http");
    lua_register(L, "wait", l_wait);
}

int main(void)
{
    loop = EV_DEFAULT; /* a generation without a host serves on the default loop */
    struct mh_config config;
    mh_config_init(&config);
    open_gen(&config);
    test_starts_from_the_loop();
    test_wait_and_wake();
    test_wait_timeout();
    test_sleep();
    test_kill();
    test_unlink();
    test_error_and_reuse();
    test_wait_in_user_coroutine();
    test_wait_outside_a_task();
    test_retire_background();
    mh_gen_unref(gen);
    mh_config_free(&config);
    return unit_report();
}
