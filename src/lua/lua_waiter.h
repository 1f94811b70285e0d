#ifndef MH_LUA_WAITER_H
#define MH_LUA_WAITER_H
/*
 * "moonhttp.waiter": one task waits until another hands it up to three
 * values. The one wait/wake primitive for what Lua modules build on it:
 * redis.lua's automatic pipelining (a command's task waits for its reply),
 * pg.lua's queue of pool waiters (woken with a connection's turn).
 *   waiter.new() → w
 *   w:wait([timeout]) → the values given to wake | nil, "timeout"
 *   w:wake([a [, b [, c]]]) → true | false when it was woken before
 * A wake before the wait is kept: the wait returns at once. A wait that
 * returns a wake's values leaves the waiter ready for the next wake. A wake
 * after a timeout is kept for the next wait. The woken task resumes once
 * the loop's callbacks of the moment are done (mh_task_wake), never inside
 * the waker's call.
 */
#include <lua.h>

/* lua_CFunction for package.preload["moonhttp.waiter"]: pushes the module table. */
int mh_lua_waiter_open(lua_State *L);

#endif
