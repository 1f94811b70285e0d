#include "lua_timer.h"

#include "log.h"
#include "lua_sched.h"
#include "lua_vm.h"

#include <lauxlib.h>
#include <string.h>

#define TIMER_MT "moonhttp.Timer"
#define STATE_MT "moonhttp.TimerState"

static const char STATE_KEY = 't';    /* registry: struct timer_state */
static const char ON_START_KEY = 'o'; /* registry: list of on_start functions */
static const char TOO_MANY[] = "too many pending timers";
static const char RETIRED[] = "retired";

struct ltimer;

struct timer_state {
    struct ev_loop *loop;
    struct ltimer *pending; /* doubly linked */
    long npending, max;
    bool retired;
};

struct ltimer {
    ev_timer w;
    lua_State *L; /* the generation's main state */
    struct timer_state *st;
    struct ltimer *prev, *next;
    int anchor; /* registry: the userdata while pending (it holds fn and args) */
    bool pending;
};

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

static int new_timer(lua_State *L, const char *what, bool every)
{
    double delay = luaL_checknumber(L, 1);
    luaL_argcheck(L, every ? delay > 0 : delay >= 0, 1,
                  every ? "interval must be > 0 seconds" : "delay must be >= 0 seconds");
    luaL_checktype(L, 2, LUA_TFUNCTION);
    struct mh_gen *g = mh_gen_of(L);
    if (!g->started)
        return luaL_error(L, "%s: not while the script loads (use http.on_start)", what);
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

/* core.on_start(fn): while the script loads; fn runs in each worker once it serves. */
static int l_on_start(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    if (mh_gen_of(L)->started)
        return luaL_error(L, "http.on_start: only while the script loads");
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &ON_START_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &ON_START_KEY);
    }
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    return 0;
}

void mh_timer_gen_started(struct mh_gen *g)
{
    lua_State *L = g->L;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &ON_START_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        return;
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        if (!mh_task_new(g, L, 0, MH_TASK_ON_START)) {
            lua_pop(L, 1);
            mh_log(MH_LOG_ERROR, "on_start: out of memory starting a function");
        }
    }
    lua_pop(L, 1);
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

void mh_timer_open(lua_State *L)
{
    static const luaL_Reg methods[] = {{"cancel", l_cancel}, {NULL, NULL}};
    if (luaL_newmetatable(L, TIMER_MT)) {
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    if (luaL_newmetatable(L, STATE_MT)) {
        lua_pushcfunction(L, state_gc);
        lua_setfield(L, -2, "__gc");
    }
    lua_pop(L, 1);
    static const luaL_Reg fns[] = {
        {"timer", l_timer}, {"every", l_every}, {"on_start", l_on_start}, {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
}
