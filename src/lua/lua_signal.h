#ifndef MH_LUA_SIGNAL_H
#define MH_LUA_SIGNAL_H
/*
 * core.signal() → a "moonhttp.Signal": one task waits on it, another wakes
 * it. The building block for queues written in Lua (moonhttp.pg's pool
 * hands a released connection to the first waiter with it), so a waiter
 * sleeps until it is its turn instead of polling.
 *
 *   sig:wait([timeout]) → true when notified, nil, "timeout" when timeout
 *                         seconds passed first (0 or nil: no limit); a
 *                         notify that came before the wait counts
 *   sig:notify()        → true if a waiting task was woken (it resumes
 *                         after the notifier's callback), false if the notification
 *                         was stored for the next wait
 *
 * wait follows the yield template (mh_task_wait); a task that ends while
 * waiting (killed, its request over) just stops waiting. Waiting on a
 * signal another task waits on raises.
 */
#include <lua.h>

/* Registers signal into the table on top of L (moonhttp.core). */
void mh_signal_open(lua_State *L);

#endif
