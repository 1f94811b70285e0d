#ifndef MH_LUA_SETTINGS_H
#define MH_LUA_SETTINGS_H
/*
 * Settings from Lua tables: http.server{...} applied to struct mh_config by
 * the schema of settings/settings.h, and the tables a route shares with it
 * (compress) or the shared zones re-read (shared). Runtime errors are
 * returned as messages in err; nothing here raises.
 */
#include <lua.h>
#include <stddef.h>

#include "settings.h"

/*
 * Applies the settings table at stack index `idx` of L (from http.server{}),
 * except those already set on the command line. Unknown keys and bad values
 * are errors. Returns 0, or -1 with a message in err.
 */
int mh_config_apply_lua(struct mh_config *c, lua_State *L, int idx, char *err, size_t errlen);

/*
 * For a reload, which keeps the running settings: the names of the settings
 * in the table at `idx` whose value differs from c's (comma-separated into
 * out; those set on the command line are skipped, they win anyway), leaving
 * out those that asked for the same value at the previous call, which were
 * named then. Remembers the table's values in c->_asked for the next call.
 * Returns how many it names.
 */
int mh_config_changed(struct mh_config *c, lua_State *L, int idx, char *out, size_t outlen);

/*
 * Parses a `compress` value at idx (true, false, or { types =, min_bytes =,
 * level = }) into c, starting from mh_compress_conf_init. Used by the
 * setting and by a route's compress option. Returns 0, or -1 with err
 * (prefixed by `what`).
 */
int mh_config_compress_from_lua(struct mh_compress_conf *c, lua_State *L, int idx, const char *what,
                                char *err, size_t errlen);

/*
 * Parses a `shared` value (a table { name = size } at idx, sizes as numbers
 * of bytes or strings like "16m") into out[], sorted by name. Used by
 * http.server{} (to raise at the script's line), by the settings and by
 * reload (to compare). Returns 0, or -1 with err; *n is what was parsed.
 */
int mh_config_shared_from_lua(struct mh_shared_decl *out, size_t *n, lua_State *L, int idx,
                              char *err, size_t errlen);

#endif
