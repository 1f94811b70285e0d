#include "lua_timer.h"

#include "log.h"
#include "lua_opts.h"
#include "lua_sched.h"
#include "lua_type.h"
#include "lua_vm.h"
#include "shm_once.h"

#include <lauxlib.h>
#include <string.h>
#include <unistd.h>

#define TIMER_MT "moonhttp.Timer"
#define STATE_MT "moonhttp.TimerState"

static const char STATE_KEY = 't';    /* registry: struct timer_state */
static const char ON_START_KEY = 'o'; /* registry: list of on_start functions */
static const char JOBS_KEY = 'j';     /* registry: job key -> how many jobs were made there */
static const char RUNNER_KEY = 'r';   /* registry: once.lua's runner of on_start once jobs */
static const char TOO_MANY[] = "too many pending timers";
static const char RETIRED[] = "retired";

struct ltimer;

struct timer_state {
    struct ev_loop *loop;
    struct ltimer *pending; /* doubly linked */
    long npending, max;
    bool retired;
    struct mh_shm_once *once; /* the generation's lease table, if any */
};

struct ltimer {
    ev_timer w;
    lua_State *L; /* the generation's main state */
    struct timer_state *st;
    struct ltimer *prev, *next;
    int anchor; /* registry: the userdata while pending (it holds fn and args) */
    bool pending;
    bool once;      /* { once = true }: runs where it holds the lease of key */
    size_t key_len; /* of key */
    char key[MH_SHM_ONCE_KEY_MAX];
};

/* The lease table of { once = true } jobs, or NULL (one process serves: each job is its own). */
static struct mh_shm_once *once_zone(const struct mh_gen *g)
{
    return g->host ? g->host->once : NULL;
}

static void unlink_pending(struct ltimer *tm)
{
    struct timer_state *st = tm->st;
    if (!tm->pending)
        return;
    ev_timer_stop(st->loop, &tm->w);
    if (tm->prev)
        tm->prev->next = tm->next;
    else
        st->pending = tm->next;
    if (tm->next)
        tm->next->prev = tm->prev;
    tm->prev = tm->next = NULL;
    tm->pending = false;
    st->npending--;
    luaL_unref(tm->L, LUA_REGISTRYINDEX, tm->anchor);
    tm->anchor = LUA_NOREF;
    struct mh_shm_once *z = tm->once ? st->once : NULL;
    if (z) /* cancelled or retired: another worker's next tick takes the job */
        mh_shm_once_release(z, tm->key, tm->key_len, getpid());
}

static int state_gc(lua_State *L)
{
    struct timer_state *st = lua_touserdata(L, 1);
    while (st->pending)
        unlink_pending(st->pending);
    return 0;
}

static struct timer_state *state_of(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &STATE_KEY) == LUA_TUSERDATA) {
        struct timer_state *st = lua_touserdata(L, -1);
        lua_pop(L, 1);
        return st;
    }
    lua_pop(L, 1);
    struct mh_gen *g = mh_gen_of(L);
    struct timer_state *st = lua_newuserdatauv(L, sizeof *st, 0);
    memset(st, 0, sizeof *st);
    st->loop = mh_gen_loop(g);
    st->max = g->config->max_pending_timers;
    st->once = once_zone(g);
    luaL_setmetatable(L, STATE_MT);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &STATE_KEY);
    return st;
}

/* Pushes the timer's function and arguments (uservalue 1, a sequence with n) onto L. */
static int push_call(lua_State *L, int ud)
{
    lua_getiuservalue(L, ud, 1);
    lua_getfield(L, -1, "n");
    int n = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    for (int i = 1; i <= n; i++)
        lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1);
    return n;
}

static void on_fire(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct ltimer *tm = (struct ltimer *)w;
    lua_State *L = tm->L;
    (void)loop;
    (void)revents;
    if (!lua_checkstack(L, 8))
        return;
    if (tm->once && tm->st->once) {
        enum mh_once_claim c = mh_shm_once_claim(tm->st->once, tm->key, tm->key_len, 0, getpid());
        if (c == MH_ONCE_FULL)
            mh_log(MH_LOG_ERROR, "http.every: no lease for %.*s (too many once jobs); skipped",
                   (int)tm->key_len, tm->key);
        if (c != MH_ONCE_MINE)
            return; /* another worker runs it */
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, tm->anchor);
    int ud = lua_gettop(L);
    int n = push_call(L, ud);
    if (w->repeat == 0.)
        unlink_pending(tm); /* a one-shot timer is no longer pending once it fires */
    if (!mh_task_new(mh_gen_of(L), L, n - 1, MH_TASK_TIMER)) {
        mh_log(MH_LOG_ERROR, "timer: out of memory starting its callback");
        lua_settop(L, ud - 1);
        return;
    }
    lua_settop(L, ud - 1);
}

/*
 * Pushes the key of a { once = true } job whose function is at fn: where the
 * function was written and how many jobs were made there before in this
 * Lua state ("every:app.lua:12#1"). Every worker loads the same script, so
 * the same job has the same key in each, without the user naming it.
 */
static void push_job_key(lua_State *L, int fn, const char *kind)
{
    lua_Debug ar;
    lua_pushvalue(L, fn);
    lua_getinfo(L, ">S", &ar);
    lua_pushfstring(L, "%s:%s:%d", kind, ar.short_src, ar.linedefined);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &JOBS_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &JOBS_KEY);
    }
    lua_pushvalue(L, -2);
    lua_rawget(L, -2);
    lua_Integer n = lua_tointeger(L, -1) + 1;
    lua_pop(L, 1);
    lua_pushvalue(L, -2);
    lua_pushinteger(L, n);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    lua_pushfstring(L, "#%I", n);
    lua_concat(L, 2);
}

/* Reads { once = } at idx (nil: none); raises for unknown keys. */
static bool opt_once(lua_State *L, int idx, const char *what)
{
    static const char *const known[] = {"once", NULL};
    if (lua_isnoneornil(L, idx))
        return false;
    luaL_checktype(L, idx, LUA_TTABLE);
    mh_lua_check_opts(L, idx, what, known, 2);
    lua_getfield(L, idx, "once");
    bool once = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return once;
}

static int new_timer(lua_State *L, const char *what, bool every)
{
    double delay = luaL_checknumber(L, 1);
    luaL_argcheck(L, every ? delay > 0 : delay >= 0, 1,
                  every ? "interval must be > 0 seconds" : "delay must be >= 0 seconds");
    luaL_checktype(L, 2, LUA_TFUNCTION);
    struct mh_gen *g = mh_gen_of(L);
    if (!g->started)
        return luaL_error(L, "%s: not while the script loads (use http.on_start)", what);
    /* http.every(interval, fn [, opts], ...): a table right after fn is its options. */
    bool once = every && lua_type(L, 3) == LUA_TTABLE && opt_once(L, 3, what);
    if (every && lua_type(L, 3) == LUA_TTABLE)
        lua_remove(L, 3);
    struct timer_state *st = state_of(L);
    if (st->retired || st->npending >= st->max) {
        lua_pushnil(L);
        lua_pushstring(L, st->retired ? RETIRED : TOO_MANY);
        return 2;
    }
    int n = lua_gettop(L) - 1; /* fn and its arguments */
    lua_createtable(L, n, 1);
    for (int i = 1; i <= n; i++) {
        lua_pushvalue(L, i + 1);
        lua_rawseti(L, -2, i);
    }
    lua_pushinteger(L, n);
    lua_setfield(L, -2, "n");
    struct ltimer *tm = lua_newuserdatauv(L, sizeof *tm, 1);
    memset(tm, 0, sizeof *tm);
    luaL_setmetatable(L, TIMER_MT);
    lua_insert(L, -2);
    lua_setiuservalue(L, -2, 1);
    tm->L = g->L;
    tm->st = st;
    if (once) {
        push_job_key(L, 2, "every");
        const char *k = lua_tolstring(L, -1, &tm->key_len);
        if (tm->key_len > sizeof tm->key)
            tm->key_len = sizeof tm->key;
        memcpy(tm->key, k, tm->key_len);
        tm->once = true;
        lua_pop(L, 1);
    }
    ev_timer_init(&tm->w, on_fire, delay, every ? delay : 0.);
    lua_pushvalue(L, -1);
    tm->anchor = luaL_ref(L, LUA_REGISTRYINDEX);
    tm->pending = true;
    tm->next = st->pending;
    if (tm->next)
        tm->next->prev = tm;
    st->pending = tm;
    st->npending++;
    ev_timer_start(st->loop, &tm->w);
    return 1;
}

/* core.timer(delay, fn, ...) → timer | nil, err */
static int l_timer(lua_State *L)
{
    return new_timer(L, "http.timer", false);
}

/* core.every(interval, fn, ...) → timer | nil, err */
static int l_every(lua_State *L)
{
    return new_timer(L, "http.every", true);
}

/* timer:cancel() → true if it was pending */
static int l_cancel(lua_State *L)
{
    struct ltimer *tm = luaL_checkudata(L, 1, TIMER_MT);
    bool was = tm->pending;
    unlink_pending(tm);
    lua_pushboolean(L, was);
    return 1;
}

/*
 * core.on_start(fn [, opts]): while the script loads; fn runs in each worker
 * once it serves, or with { once = true } in one worker per start and per
 * reload (an entry { fn, key } in the list instead of fn).
 */
static int l_on_start(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    bool once = opt_once(L, 2, "http.on_start");
    if (mh_gen_of(L)->started)
        return luaL_error(L, "http.on_start: only while the script loads");
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &ON_START_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &ON_START_KEY);
    }
    if (once) {
        lua_createtable(L, 2, 0);
        lua_pushvalue(L, 1);
        lua_rawseti(L, -2, 1);
        push_job_key(L, 1, "start");
        lua_rawseti(L, -2, 2);
    } else {
        lua_pushvalue(L, 1);
    }
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    return 0;
}

/* once.lua's claim(key) for the running worker's epoch -> "mine" | "busy" | "done" | "full" */
static int l_once_claim(lua_State *L)
{
    size_t len;
    const char *key = luaL_checklstring(L, 1, &len);
    const struct mh_gen *g = mh_gen_of(L);
    static const char *const names[] = {"mine", "busy", "done", "full"};
    enum mh_once_claim c =
        mh_shm_once_claim(g->host->once, key, len, *g->host->once_epoch, getpid());
    if (c == MH_ONCE_FULL)
        mh_log(MH_LOG_ERROR, "http.on_start: no lease for %s (too many once jobs); skipped", key);
    lua_pushstring(L, names[c]);
    return 1;
}

/* once.lua's done(key): the job ran in this epoch. */
static int l_once_done(lua_State *L)
{
    size_t len;
    const char *key = luaL_checklstring(L, 1, &len);
    const struct mh_gen *g = mh_gen_of(L);
    if (g->host && g->host->once)
        mh_shm_once_done(g->host->once, key, len, *g->host->once_epoch, getpid());
    return 0;
}

/*
 * core.want_worker_exits() -> bool: the running worker's code has an
 * http.on_worker_exit hook (worker_exit.lua); false where one process serves
 * alone, so no other worker outlives it.
 */
static int l_want_worker_exits(lua_State *L)
{
    struct mh_shm_once *z = once_zone(mh_gen_of(L));
    if (z)
        mh_shm_once_want_exits(z);
    lua_pushboolean(L, z != NULL);
    return 1;
}

/* core.claim_worker_exit() -> { worker, pid, reason } | nil: a death no other worker claimed. */
static int l_claim_worker_exit(lua_State *L)
{
    struct mh_worker_exit e;
    if (!mh_shm_once_claim_exit(once_zone(mh_gen_of(L)), &e))
        return 0;
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, e.worker);
    lua_setfield(L, -2, "worker");
    lua_pushinteger(L, e.pid);
    lua_setfield(L, -2, "pid");
    lua_pushstring(L, e.reason);
    lua_setfield(L, -2, "reason");
    return 1;
}

/* Pushes once.lua's runner, made on first use with claim, done, http.sleep and http.stopping. */
static void push_runner(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &RUNNER_KEY) == LUA_TFUNCTION)
        return;
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "moonhttp.once");
    lua_call(L, 1, 1);
    lua_pushcfunction(L, l_once_claim);
    lua_pushcfunction(L, l_once_done);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "moonhttp.core");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "sleep");
    lua_getfield(L, -2, "stopping");
    lua_remove(L, -3);
    lua_call(L, 4, 1);
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &RUNNER_KEY);
}

/* A { once = true } on_start task ended, however: the last one tells the host. */
static void once_start_done(struct mh_task *t)
{
    struct mh_gen *g = t->gen;
    if (g->once_starting > 0 && --g->once_starting == 0 && g->host && g->host->once_started)
        g->host->once_started(g->host, g);
}

unsigned mh_timer_gen_started(struct mh_gen *g)
{
    lua_State *L = g->L;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &ON_START_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    g->once_starting = 0;
    for (lua_Integer i = 1; i <= n; i++) {
        int nargs = 0;
        bool once = false;
        if (lua_rawgeti(L, -1, i) == LUA_TTABLE) { /* { fn, key }: once */
            once = true;
            int entry = lua_gettop(L);
            if (once_zone(g)) {
                push_runner(L);
                lua_rawgeti(L, entry, 1);
                lua_rawgeti(L, entry, 2);
                nargs = 2;
            } else {
                lua_rawgeti(L, entry, 1);
            }
            lua_remove(L, entry);
        }
        struct mh_task *t = mh_task_new(g, L, nargs, MH_TASK_ON_START);
        if (!t) {
            lua_pop(L, nargs + 1);
            mh_log(MH_LOG_ERROR, "on_start: out of memory starting a function");
        } else if (once) {
            t->on_done = once_start_done;
            g->once_starting++;
        }
    }
    lua_pop(L, 1);
    return g->once_starting;
}

void mh_timer_gen_retired(struct mh_gen *g)
{
    lua_State *L = g->L;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &STATE_KEY) == LUA_TUSERDATA) {
        struct timer_state *st = lua_touserdata(L, -1);
        st->retired = true;
        while (st->pending)
            unlink_pending(st->pending);
    }
    lua_pop(L, 1);
}

/* A stop or a reload: timers of g not yet fired never will, and new ones are refused. */
static void on_gen_stop(struct mh_gen *g, unsigned added)
{
    if (added & (MH_GEN_RETIRED | MH_GEN_STOPPING))
        mh_timer_gen_retired(g);
}

void mh_timer_open(lua_State *L)
{
    mh_gen_on_stop(mh_gen_of(L), on_gen_stop);
    static const luaL_Reg methods[] = {{"cancel", l_cancel}, {NULL, NULL}};
    static const luaL_Reg state_meta[] = {{"__gc", state_gc}, {NULL, NULL}};
    mh_lua_register_type(L, &(struct mh_lua_type){.name = TIMER_MT, .methods = methods});
    mh_lua_register_type(L, &(struct mh_lua_type){.name = STATE_MT, .meta = state_meta});
    static const luaL_Reg fns[] = {
        {"timer", l_timer},
        {"every", l_every},
        {"on_start", l_on_start},
        {"want_worker_exits", l_want_worker_exits},
        {"claim_worker_exit", l_claim_worker_exit},
        {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
