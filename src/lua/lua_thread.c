#include "lua_thread.h"

#include "lua_sched.h"
#include "lua_type.h"
#include "lua_vm.h"

#include <lauxlib.h>
#include <string.h>

#define THREAD_MT "moonhttp.Thread"

struct lthread {
    struct mh_task *t;         /* NULL once it ended */
    struct mh_task_link owner; /* on the spawning task: kills the thread when that ends */
    struct mh_task *joiner;
    int results; /* registry: { ok, values..., n = } once ended */
    int anchor;  /* registry: the userdata while the thread runs */
};

/* The thread ended (returned, failed or was killed): keep its results for join. */
static void on_thread_end(struct mh_task *t, bool ok, int nres)
{
    struct lthread *th = t->end_data;
    lua_State *co = t->co;
    lua_createtable(co, nres + 1, 1);
    lua_pushboolean(co, ok);
    lua_rawseti(co, -2, 1);
    for (int i = 0; i < nres; i++) {
        lua_pushvalue(co, -nres - 1 + i);
        lua_rawseti(co, -2, i + 2);
    }
    lua_pushinteger(co, nres + 1);
    lua_setfield(co, -2, "n");
    th->results = luaL_ref(co, LUA_REGISTRYINDEX);
    th->t = NULL;
    mh_task_unlink(&th->owner);
    if (th->joiner)
        mh_task_wake(th->joiner);
    luaL_unref(co, LUA_REGISTRYINDEX, th->anchor);
    th->anchor = LUA_NOREF;
}

static void on_owner_end(struct mh_task_link *l)
{
    struct lthread *th = (struct lthread *)((char *)l - offsetof(struct lthread, owner));
    if (th->t)
        mh_task_kill(th->t);
}

/* core.spawn(fn, ...) → thread */
static int l_spawn(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    struct mh_task *parent = mh_task_current(L);
    if (!parent)
        return luaL_error(L, "http.spawn: must be called from a handler, thread, timer, on_start "
                             "function or `run` script, not while the script loads");
    int nargs = lua_gettop(L) - 1;
    struct lthread *th = lua_newuserdatauv(L, sizeof *th, 0);
    memset(th, 0, sizeof *th);
    th->results = th->anchor = LUA_NOREF;
    luaL_setmetatable(L, THREAD_MT);
    lua_insert(L, 1); /* the handle stays below fn and its arguments */
    struct mh_task *t = mh_task_new(mh_gen_of(L), L, nargs, MH_TASK_THREAD);
    if (!t)
        return luaL_error(L, "http.spawn: out of memory");
    t->on_end = on_thread_end;
    t->end_data = th;
    th->t = t;
    th->owner.release = on_owner_end;
    mh_task_adopt(parent, &th->owner);
    lua_pushvalue(L, 1);
    th->anchor = luaL_ref(L, LUA_REGISTRYINDEX);
    return 1;
}

static int push_results(lua_State *L, struct lthread *th)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, th->results);
    lua_getfield(L, -1, "n");
    int n = (int)lua_tointeger(L, -1);
    lua_pop(L, 1);
    luaL_checkstack(L, n, "too many results to join");
    for (int i = 1; i <= n; i++)
        lua_rawgeti(L, -i, i);
    lua_remove(L, -n - 1);
    return n;
}

static int resume_join(struct mh_task *t, lua_State *co)
{
    struct lthread *th = t->wait_data;
    th->joiner = NULL;
    if (th->results != LUA_NOREF)
        return push_results(co, th);
    lua_pushboolean(co, 0);
    lua_pushliteral(co, "timeout");
    return 2;
}

static void cancel_join(struct mh_task *t)
{
    struct lthread *th = t->wait_data;
    th->joiner = NULL;
}

/* thread:join([timeout]) → true, results... | false, err */
static int l_join(lua_State *L)
{
    struct lthread *th = luaL_checkudata(L, 1, THREAD_MT);
    double timeout = luaL_optnumber(L, 2, -1);
    if (!lua_isnoneornil(L, 2))
        luaL_argcheck(L, timeout >= 0, 2, "timeout must be >= 0 seconds");
    struct mh_task *t = mh_task_check(L, "thread:join");
    if (th->results != LUA_NOREF)
        return push_results(L, th);
    if (th->t == t)
        return luaL_error(L, "thread:join: a thread cannot join itself");
    if (th->joiner)
        return luaL_error(L, "thread:join: another task is already joining this thread");
    th->joiner = t;
    lua_settop(L, 1); /* the handle stays on the stack, so it outlives the wait */
    if (timeout >= 0)
        mh_task_wake_in(t, timeout);
    return mh_task_wait(L, t, resume_join, cancel_join, th);
}

/* thread:kill() → true | false, "ended" */
static int l_kill(lua_State *L)
{
    struct lthread *th = luaL_checkudata(L, 1, THREAD_MT);
    if (!th->t) {
        lua_pushboolean(L, 0);
        lua_pushliteral(L, "ended");
        return 2;
    }
    if (th->t == mh_task_current(L))
        return luaL_error(L, "thread:kill: a thread cannot kill itself (return instead)");
    mh_task_kill(th->t);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_gc(lua_State *L)
{
    struct lthread *th = luaL_checkudata(L, 1, THREAD_MT);
    if (th->results != LUA_NOREF) {
        luaL_unref(L, LUA_REGISTRYINDEX, th->results);
        th->results = LUA_NOREF;
    }
    return 0;
}

static int l_tostring(lua_State *L)
{
    struct lthread *th = luaL_checkudata(L, 1, THREAD_MT);
    lua_pushfstring(L, "moonhttp.Thread (%s)", th->t ? "running" : "ended");
    return 1;
}

void mh_thread_open(lua_State *L)
{
    static const luaL_Reg methods[] = {{"join", l_join}, {"kill", l_kill}, {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", l_gc}, {"__tostring", l_tostring}, {NULL, NULL}};
    mh_lua_register_type(
        L, &(struct mh_lua_type){.name = THREAD_MT, .methods = methods, .meta = meta});
    lua_pushcfunction(L, l_spawn);
    lua_setfield(L, -2, "spawn");
}
