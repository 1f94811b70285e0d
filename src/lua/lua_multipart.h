#ifndef MH_LUA_MULTIPART_H
#define MH_LUA_MULTIPART_H
/*
 * The Lua face of the multipart parser (multipart.h), used by web.lua's
 * req:multipart(). Pushes the constructor
 *   multipart(boundary, max_header_bytes, max_parts) -> parser, or nil, err
 * A parser buffers what the C parser left unconsumed (bounded: at most
 * max_header_bytes plus one fed chunk) and has two methods:
 *   p:feed(chunk)  more body bytes; p:feed(nil) marks the end of the body
 *   p:next()       one event: "part" | "header", name, value | "body" |
 *                  "data", bytes | "end" | "done" | "error", err, or nil when
 *                  it needs more input
 * Its memory is freed by __gc / __close.
 */
#include <lua.h>

void mh_lua_multipart_open(lua_State *L);

#endif
