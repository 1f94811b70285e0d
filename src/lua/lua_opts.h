#ifndef MH_LUA_OPTS_H
#define MH_LUA_OPTS_H
/*
 * Options tables of the Lua API are checked against their known names, so
 * a typo (`pg.pool{ databse = "app" }`) is an error at the call, with the
 * name it probably meant, instead of a silent default. The C bindings call
 * mh_lua_check_opts; Lua modules call core.check_opts, the same function.
 * A call made while the script loads fails `moonhttp --check`.
 */
#include <lua.h>

/*
 * Raises `what: unknown option "k" (did you mean "x"?)`, or `(known: a, b)`
 * when no name is close, for the first key of the table at idx that is not
 * in known (NULL-terminated); a key that is not a string is reported too.
 * The message starts with the file:line of the function `level` frames up
 * (1: whoever called the running C function). nil at idx passes.
 */
void mh_lua_check_opts(lua_State *L, int idx, const char *what, const char *const *known,
                       int level);

/*
 * Adds check_opts(t, what, { names... } [, level = 2]) and strict_module(t,
 * name) to the table on top of L (moonhttp.core). A strict module raises
 * for a name it does not have: `pg.connect does not exist (did you mean
 * pg.pool?)`, at the call, and at load time that fails `moonhttp --check`.
 */
void mh_lua_opts_open(lua_State *L);

#endif
