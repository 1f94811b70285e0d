#ifndef MH_LUA_CHANNEL_H
#define MH_LUA_CHANNEL_H
/*
 * http.channel(name) → a "moonhttp.Channel": messages published in any task
 * of any worker of this server reach every subscriber in every worker (the
 * shared zone and per-worker endpoint of base/shm_channel.h and
 * base/channel.h). Names are 1 to 64 bytes; a name holds a place in the
 * zone while someone listens to it (and, for publishers only, until the
 * room is needed). With a cluster, publish goes through Redis instead
 * (lua/moonhttp/cluster.lua; see core.channel_remote below), but for a
 * channel made with { cluster = false }, which stays this server's.
 *
 *   ch:publish(msg)          → true; nil, "too large" (over 64 KiB) or
 *                              "too many channels". Never waits.
 *   ch:subscribe([{queue=n}]) → a "moonhttp.Subscription" that gets what is
 *                              published from now on, in publish order, up
 *                              to n (default 128) messages queued; more
 *                              drop the oldest. It ends with the task that
 *                              made it, or with close() / <close> / GC.
 *   sub:receive([timeout])   → msg; nil, "missed", n first when n messages
 *                              were dropped (the next receive goes on with
 *                              the newer ones); nil, "timeout" after timeout
 *                              seconds (0 or nil: none); nil, "gap" when
 *                              messages may have been lost before the next
 *                              (a gap notice); nil, "closed";
 *                              nil, "stopping" once a stop began, or a
 *                              reload retired the code that subscribed.
 *
 * receive follows the yield template (mh_task_wait); two tasks receiving on
 * one subscription is misuse and raises. Using a channel while the script
 * loads raises: there is no server yet.
 */
#include <lua.h>

/*
 * Registers channel into the table on top of L (http), and the channels'
 * part of the generation's stop (mh_gen_stop): once it stops serving, its
 * subscriptions answer nil, "stopping", and a task waiting in receive hears
 * it at once, so a subscriber loop does not hold the stop.
 */
void mh_channel_open(lua_State *L);

#endif
