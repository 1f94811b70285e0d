#ifndef MH_LUA_FILES_H
#define MH_LUA_FILES_H
/*
 * The Lua face of the C handlers for static files and compression:
 * reading their option tables into the handlers' settings structs, once,
 * when the script is loaded.
 */
#include <stddef.h>

struct lua_State;
struct mh_compress_conf;

/*
 * Reads a compress setting at stack index idx into c: `true` (on, the
 * defaults), `false` (off), or { types = {...}, min_bytes = n, level = 1..9 }
 * (on; types replace the default list when given). Unknown keys and bad
 * values are errors: returns -1 with a message in err (prefixed `what`),
 * else 0. Raises nothing.
 */
int mh_lua_compress_conf(struct lua_State *L, int idx, struct mh_compress_conf *c, const char *what,
                         char *err, size_t errlen);

#endif
