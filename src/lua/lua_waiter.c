/*
 * moonhttp.waiter: see lua_waiter.h. Written to the waiting-call template
 * of lua_sched.h (check the task, record the wait, yield; the resume pushes
 * the results), like a socket's wait in lua_socket.c.
 */
#include "lua_waiter.h"

#include "lua_sched.h"

#include <lauxlib.h>
#include <string.h>

#define WAITER_MT  "moonhttp.Waiter"
#define MAX_VALUES 3 /* a Redis reply: value; or nil, message, whether the connection broke */

struct waiter {
    struct mh_task *task; /* the task waiting, or NULL */
    int anchor;           /* registry: the userdata while a task waits on it */
    int nvalues;          /* how many wake gave (user values 1..nvalues) */
    bool woken;
};

static int l_new(lua_State *L)
{
    struct waiter *w = lua_newuserdatauv(L, sizeof *w, MAX_VALUES);
    memset(w, 0, sizeof *w);
    w->anchor = LUA_NOREF;
    luaL_setmetatable(L, WAITER_MT);
    return 1;
}

/*
 * Pushes what wake gave (the userdata at index ud) and makes the waiter
 * ready for the next wake: one task can wait on one waiter again and again
 * (the Redis pipe's task between batches) without a new one each time.
 */
static int push_values(lua_State *L, int ud, struct waiter *w)
{
    int n = w->nvalues;
    luaL_checkstack(L, n, "waiter");
    for (int i = 1; i <= n; i++) {
        lua_getiuservalue(L, ud, i);
        lua_pushnil(L);
        lua_setiuservalue(L, ud, i);
    }
    w->nvalues = 0;
    w->woken = false;
    return n;
}

/* The waiting task is resumed: by wake, or by its timer (the timeout). */
static int resume_wait(struct mh_task *t, lua_State *co)
{
    struct waiter *w = t->wait_data;
    lua_rawgeti(co, LUA_REGISTRYINDEX, w->anchor);
    luaL_unref(co, LUA_REGISTRYINDEX, w->anchor);
    w->anchor = LUA_NOREF;
    w->task = NULL;
    if (!w->woken) {
        lua_pop(co, 1);
        lua_pushnil(co);
        lua_pushliteral(co, "timeout");
        return 2;
    }
    int ud = lua_gettop(co);
    int n = push_values(co, ud, w);
    lua_remove(co, ud);
    return n;
}

/* The task ended while it waited (killed, its request gone): a later wake is dropped. */
static void cancel_wait(struct mh_task *t)
{
    struct waiter *w = t->wait_data;
    luaL_unref(t->co, LUA_REGISTRYINDEX, w->anchor);
    w->anchor = LUA_NOREF;
    w->task = NULL;
}

/* w:wait([timeout]) */
static int l_wait(lua_State *L)
{
    struct waiter *w = luaL_checkudata(L, 1, WAITER_MT);
    double timeout = luaL_optnumber(L, 2, 0);
    luaL_argcheck(L, timeout >= 0, 2, "timeout must be >= 0 seconds (0: none)");
    struct mh_task *t = mh_task_check(L, "waiter:wait");
    if (w->task)
        return luaL_error(L, "waiter:wait: another task waits on it");
    if (w->woken)
        return push_values(L, 1, w);
    if (timeout > 0)
        mh_task_wake_in(t, timeout);
    lua_settop(L, 1);
    w->anchor = luaL_ref(L, LUA_REGISTRYINDEX);
    w->task = t;
    return mh_task_wait(L, t, resume_wait, cancel_wait, w);
}

/* w:wake([a [, b [, c]]]) */
static int l_wake(lua_State *L)
{
    struct waiter *w = luaL_checkudata(L, 1, WAITER_MT);
    int n = lua_gettop(L) - 1;
    luaL_argcheck(L, n <= MAX_VALUES, MAX_VALUES + 2, "at most 3 values");
    if (w->woken) {
        lua_pushboolean(L, 0);
        return 1;
    }
    for (int i = 1; i <= n; i++) {
        lua_pushvalue(L, i + 1);
        lua_setiuservalue(L, 1, i);
    }
    w->nvalues = n;
    w->woken = true;
    if (w->task)
        mh_task_wake(w->task);
    lua_pushboolean(L, 1);
    return 1;
}

int mh_lua_waiter_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"wait", l_wait},
        {"wake", l_wake},
        {NULL, NULL},
    };
    if (luaL_newmetatable(L, WAITER_MT)) {
        luaL_newlib(L, methods);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, l_new);
    lua_setfield(L, -2, "new");
    return 1;
}
