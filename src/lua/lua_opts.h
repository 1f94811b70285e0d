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
#include <stdbool.h>

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
 * Typed option readers, one per kind of value, shared by the C bindings and
 * (through core.opt_seconds, core.opt_size, core.opt_number) the Lua
 * modules, so every options table words its errors alike. Each reads
 * field `name` of the table at idx (0: no table), returns dflt when it is
 * nil, and raises `<file:line:> what: name must be ...` for misuse, the
 * position taken `level` frames up as for mh_lua_check_opts.
 */

/* A number of seconds, >= 0 and below 1e9 (about 31 years): timeouts, intervals. */
double mh_lua_opt_seconds(lua_State *L, int idx, const char *what, const char *name, double dflt,
                          int level);

/* A number >= min. */
double mh_lua_opt_number(lua_State *L, int idx, const char *what, const char *name, double dflt,
                         double min, int level);

/*
 * A size in bytes: a whole number, or a string that the settings' byte
 * parser takes ("65536", "64k", "1.5m", "1g"; mh_config_parse_bytes), so a
 * size reads the same in a setting and in any options table. It must come
 * out whole and from min to 1024g.
 */
double mh_lua_opt_size(lua_State *L, int idx, const char *what, const char *name, double dflt,
                       double min, int level);

/* The value at idx as a size in bytes (as mh_lua_opt_size takes it): true and *out, or false. */
bool mh_lua_to_size(lua_State *L, int idx, double *out);

/*
 * Adds to the table on top of L (moonhttp.core): check_opts(t, what,
 * { names... } [, level = 2]); opt_seconds(t, name, default, what [, level
 * = 2 [, above]]) (above: the seconds must be more than it, not >= 0); opt_number(t, name, default, min, what [, level = 2]);
 * opt_size(t, name, default, what [, min = 1 [, level = 2]]). t may be nil.
 * And strict_module(t, name): a strict module raises for a name it does
 * not have: `pg.connect does not exist (did you mean pg.pool?)`, at the
 * call, and at load time that fails `moonhttp --check`.
 */
void mh_lua_opts_open(lua_State *L);

#endif
