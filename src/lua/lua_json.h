#ifndef MH_LUA_JSON_H
#define MH_LUA_JSON_H
/*
 * http.json.encode: JSON text that round-trips with what an API client
 * expects, where lua-cjson's encoder does not:
 *
 *   - a table marked with http.json.array(t) (or http.json.empty_array)
 *     encodes as an array, so an empty list is [] and not {};
 *   - '/' is not escaped ("a/b", not "a\/b");
 *   - floats keep enough digits to read back to the same number.
 *
 * Otherwise it follows cjson: a table whose keys are exactly 1..n is an
 * array, any other table an object (number keys become strings), an
 * unmarked empty table is {}, http.json.null (cjson.null) is null. Misuse
 * raises: a function, a cycle or NaN cannot be encoded.
 */
#include <lua.h>

/* encode(value) -> string; raises on a value JSON cannot hold. */
int mh_json_encode_l(lua_State *L);

/*
 * Adds encode, array and empty_array to the table on top of L. array(t)
 * marks t, array(n) makes a marked table with room for n (0..2^24) list
 * entries; anything else raises.
 */
void mh_json_open(lua_State *L);

#endif
