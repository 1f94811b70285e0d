#ifndef MH_LUA_FAILURE_H
#define MH_LUA_FAILURE_H
/*
 * What a failed task costs, decided here and nowhere else (the scheduler
 * only reports the failure through its generation's ops): the log line,
 * what the client gets, and the counters.
 *
 * - A handler that failed before its response started answers the plain
 *   500 (lua_errors.c); after, its response is cut, and a WebSocket closes
 *   with 1011 first. After a malformed, oversized or stalled request body
 *   the server's 400/413/408 stands and the line is info, not error.
 * - A timer callback, light thread or on_start function is logged with its
 *   kind and counted (moonhttp_task_errors_total); a `run` script's error
 *   is its own line.
 * - A cut by a guard (handler_cpu_limit, lua_memory_limit) says which, and
 *   is counted.
 *
 * http.on_error's Lua path logs through core.handler_error, so a handler
 * error has one line whoever answers it, and that line names the route.
 */
#include <lua.h>

#include "lua_guard.h"

struct mh_req;
struct mh_task;

/* The scheduler's report of a task that raised or was cut: log, answer, count. */
void mh_task_failed(struct mh_task *t, const char *trace, enum mh_guard_kind guard);

/* Adds handler_error(req, trace) (the error line of http.on_error's path) to the table on top of L. */
void mh_lua_failure_open(lua_State *L);

#endif
