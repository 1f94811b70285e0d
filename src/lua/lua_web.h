#ifndef MH_LUA_WEB_H
#define MH_LUA_WEB_H
/*
 * The "moonhttp.webcore" module (package.preload), what lua/moonhttp/web.lua
 * builds cookies, forms, multipart and the rest on:
 *   extend("request" | "response", { name = function, ... }) adds methods to
 *     every req / res (run once, while the script loads; a name that is
 *     already a method is replaced, and the old ones are returned by name,
 *     so web.lua may wrap a C method);
 *   html_escape(v) -> v as HTML text (http.html.escape; see base/html.h);
 *   multipart(boundary [, max_header_bytes]) -> an incremental multipart
 *     parser (see lua_multipart.h).
 */
#include <lua.h>

int mh_lua_web_open(lua_State *L);

#endif
