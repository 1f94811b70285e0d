#ifndef MH_LUA_TIMER_H
#define MH_LUA_TIMER_H
/*
 * Timers and worker start: core.timer(delay, fn, ...) and
 * core.every(interval, fn, ...) → a "moonhttp.Timer" with cancel() → true
 * (it was pending) | false; core.on_start(fn) while the script loads.
 *
 * Each callback runs in a task of its own (MH_TASK_TIMER / _ON_START), so
 * every waiting call works in it; an error is logged with its traceback and
 * counted (moonhttp_task_errors_total), and never stops the worker. At most
 * config->max_pending_timers are pending per generation: past it, timer and
 * every return nil, "too many pending timers". A pending timer keeps its
 * function alive without the handle.
 */
#include <lua.h>

struct mh_gen;

/* Registers timer, every and on_start into the table on top of L (moonhttp.core). */
void mh_timer_open(lua_State *L);

/*
 * The generation serves now (worker ready, or reloaded in): runs its
 * on_start functions. Returns how many of them are { once = true } ones:
 * when the last of those has ended in this worker (it ran the job, or saw
 * it done by another worker, or failed, or was killed), g->host's
 * once_started is called.
 */
unsigned mh_timer_gen_started(struct mh_gen *g);

/*
 * The generation is retired (replaced by a reload, the worker stops, a run
 * script ended): its pending timers are cancelled and new ones refused.
 * Callbacks already running go on (a stop gives them shutdown_timeout).
 */
void mh_timer_gen_retired(struct mh_gen *g);

#endif
