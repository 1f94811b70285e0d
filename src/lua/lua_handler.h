#ifndef MH_LUA_HANDLER_H
#define MH_LUA_HANDLER_H
/*
 * Lua's side of the handler interface (http/handler.h):
 *
 * - The app handler: root handler of the main listeners. It pins the newest
 *   generation for the request (released in the request's on_end, after the
 *   access log and metrics saw it) and dispatches on that generation's site.
 * - Route handlers: a route served by a Lua function runs it as a task (one
 *   coroutine per request, lua_sched.c); req and res are the Lua faces of
 *   the struct mh_req.
 * - C handlers as Lua values: a userdata (metatable "moonhttp.Handler")
 *   wrapping a struct mh_handler, which http.handle accepts in place of a
 *   function (http.metrics_handler(), http.files()). With no middleware on
 *   the route, the router stores the C handler itself and no Lua runs per
 *   request. Middleware receives it as `next`: calling it hands the request
 *   over to the C handler when the Lua function returns (the task ends, the
 *   C handler finishes the response).
 */
#include <lua.h>
#include <stdbool.h>

#include "handler.h"

struct mh_gen;
struct mh_req;

/* The root handler of the app's listeners; `current` is where the newest generation is. */
struct mh_lua_app {
    struct mh_handler base;
    struct mh_gen *const *current;
};
void mh_lua_app_init(struct mh_lua_app *a, struct mh_gen *const *current);

/*
 * Pushes a Lua value wrapping the C handler h. free_fn (may be NULL) is
 * called when the value is collected, i.e. at the latest when its
 * generation's Lua state closes, after every request that used it ended.
 */
void mh_lua_push_handler(lua_State *L, struct mh_handler *h, void (*free_fn)(struct mh_handler *h));
/* The C handler the value at idx wraps, or NULL when it is not one. */
struct mh_handler *mh_lua_to_handler(lua_State *L, int idx);

/*
 * Registers the function or C handler at idx for the generation being loaded
 * and returns its handler id (for the router), or -1 on OOM. pass_allow: the
 * 405 handler, which gets the Allow list as a third argument.
 */
int mh_lua_handler_register(lua_State *L, struct mh_gen *g, int idx, bool pass_allow,
                            const struct mh_handler **out);

/* Frees the route handlers of a generation (before lua_close). */
void mh_lua_handlers_free(struct mh_gen *g);

/* The generation the app dispatched r on, or NULL (a request the app did not serve). */
struct mh_gen *mh_lua_request_gen(const struct mh_req *r);

/*
 * Registers core.is_handler into the table on top of L, the Handler
 * metatable, and the requests' part of the generation's stop (mh_gen_stop):
 * once it stops serving, its WebSockets close with 1001 and its streaming
 * handlers hear "stopping" (requests of other generations are left alone).
 */
void mh_lua_handler_open(lua_State *L);

#endif
