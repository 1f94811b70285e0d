/*
 * core.signal(): see lua_signal.h. The waiting task's own timer carries the
 * timeout (as http.sleep does) and the wake-up goes through the run queue
 * (mh_task_wake), so a signal needs no watcher of its own; `woken` tells the two
 * apart on resume. The waiting coroutine holds the signal on its stack, so
 * the userdata outlives the wait.
 */
#include "lua_signal.h"

#include "lua_sched.h"
#include "lua_type.h"

#include <lauxlib.h>
#include <stdbool.h>

#define SIGNAL_MT "moonhttp.Signal"

struct lsignal {
    struct mh_task *task; /* waiting now, or NULL */
    bool woken;           /* notify reached the waiting task */
    bool pending;         /* notify came with nobody waiting */
};

static int on_resume(struct mh_task *t, lua_State *co)
{
    struct lsignal *s = t->wait_data;
    s->task = NULL;
    if (s->woken) {
        s->woken = false;
        lua_pushboolean(co, 1);
        return 1;
    }
    lua_pushnil(co);
    lua_pushliteral(co, "timeout");
    return 2;
}

static void on_cancel(struct mh_task *t)
{
    struct lsignal *s = t->wait_data;
    s->task = NULL;
    s->woken = false;
}

static int l_wait(lua_State *L)
{
    struct lsignal *s = luaL_checkudata(L, 1, SIGNAL_MT);
    double timeout = luaL_optnumber(L, 2, 0);
    luaL_argcheck(L, timeout >= 0, 2, "timeout must be >= 0 seconds (0: none)");
    if (s->task)
        return luaL_error(L, "sig:wait: another task is waiting on this signal");
    if (s->pending) {
        s->pending = false;
        lua_pushboolean(L, 1);
        return 1;
    }
    struct mh_task *t = mh_task_check(L, "sig:wait");
    s->task = t;
    s->woken = false;
    if (timeout > 0)
        mh_task_wake_in(t, timeout);
    return mh_task_wait(L, t, on_resume, on_cancel, s);
}

static int l_notify(lua_State *L)
{
    struct lsignal *s = luaL_checkudata(L, 1, SIGNAL_MT);
    if (s->task && !s->woken) {
        s->woken = true;
        mh_task_wake(s->task);
        lua_pushboolean(L, 1);
    } else {
        s->pending = !s->task;
        lua_pushboolean(L, 0);
    }
    return 1;
}

static int l_signal(lua_State *L)
{
    struct lsignal *s = lua_newuserdatauv(L, sizeof *s, 0);
    s->task = NULL;
    s->woken = s->pending = false;
    luaL_setmetatable(L, SIGNAL_MT);
    return 1;
}

void mh_signal_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"wait", l_wait},
        {"notify", l_notify},
        {NULL, NULL},
    };
    mh_lua_register_type(L, &(struct mh_lua_type){.name = SIGNAL_MT, .methods = methods});
    lua_pushcfunction(L, l_signal);
    lua_setfield(L, -2, "signal");
}
