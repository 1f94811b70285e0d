#ifndef MH_LUA_THREAD_H
#define MH_LUA_THREAD_H
/*
 * Light threads: core.spawn(fn, ...) → a "moonhttp.Thread" with
 * join([timeout]) → true, results... | false, err ("timeout", "killed", or
 * the error the function raised) and kill() → true | false, "ended".
 *
 * A thread is a task of its own (MH_TASK_THREAD), started from the next loop
 * iteration, owned by the task that spawned it: when that task ends (a
 * handler returns), threads still running are killed, and their sockets
 * closed with them. Its results are kept for join until the handle is
 * collected.
 */
#include <lua.h>

/* Registers spawn into the table on top of L (moonhttp.core). */
void mh_thread_open(lua_State *L);

#endif
