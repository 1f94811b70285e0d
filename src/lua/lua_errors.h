#ifndef MH_LUA_ERRORS_H
#define MH_LUA_ERRORS_H
/*
 * Error reporting, below the scheduler (which calls it when a handler task
 * fails): the text of a Lua error value, and what a client gets when a
 * handler raised an error before its response started: a 500, plain, or in
 * --dev with the traceback (an HTML page, escaped, for a browser that
 * accepts text/html; text otherwise).
 *
 * http.on_error is Lua (lua/moonhttp/init.lua): it runs the route inside a
 * pcall, in the handler's own task (so it may wait and sees the same req and
 * res), resets the response with core.reset_for_error and calls the app's
 * error handler. Only when that fails too does the error reach the C core
 * and the plain 500 above.
 */
#include <lua.h>

struct mh_gen;
struct mh_req;

/*
 * Pushes onto L a one-line text for the error value at idx, and returns it:
 * a string as it is; a value with __tostring through it (a PostgreSQL or
 * Redis error says its message); a table without one as its type and first
 * fields, `table: {code = "x", message = "y"}`; anything else as its type
 * and value. Only __tostring runs, protected and bounded in instructions: if
 * it fails or returns no string, the table form is used. Never raises.
 */
const char *mh_lua_error_text(lua_State *L, int idx);

/* Resets r's response to the plain 500 for a handler error; trace goes to --dev pages. */
void mh_lua_answer_error(const struct mh_gen *g, struct mh_req *r, const char *trace);

/* An empty 500 for the app's error handler to fill (core.reset_for_error), with the dev header. */
void mh_lua_reset_to_500(const struct mh_gen *g, struct mh_req *r);

/*
 * --dev: while the last reload failed (the previous code keeps serving),
 * every response carries the error's first line in X-Moonhttp-Reload-Error,
 * so the developer sees it in the browser. Called again after a response is
 * reset (a handler error).
 */
void mh_lua_dev_headers(const struct mh_gen *g, struct mh_req *r);

/* Adds error_text(v) to the table on top of L (moonhttp.core). */
void mh_lua_errors_open(lua_State *L);

#endif
