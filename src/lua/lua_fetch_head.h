#ifndef MH_LUA_FETCH_HEAD_H
#define MH_LUA_FETCH_HEAD_H
/*
 * The request http.fetch sends, made from its Lua options: the request line,
 * Host and User-Agent unless given, the user's header fields (checked: token
 * names, no CR, LF or NUL in values; their own Content-Length and
 * Transfer-Encoding dropped), the framing and a string body. The client
 * (lua_client.c) sends it; http.proxy's plain path builds its own head
 * (lua_proxy.c).
 */
#include <lua.h>
#include <stdbool.h>
#include <stddef.h>

struct mh_url;

/* How a streamed body is framed: none (a string body), chunked, or a declared length (>= 0). */
#define MH_FETCH_STREAM_NONE    (-1)
#define MH_FETCH_STREAM_CHUNKED (-2)

/* An RFC 9110 token (a method, a field name): not empty, tchars only. */
bool mh_lua_fetch_is_token(const char *s, size_t n);

/*
 * Pushes the request (head and body, one string) for url u and the options
 * table at index opts (0 for none); with a streamed body (stream not
 * MH_FETCH_STREAM_NONE), the head only, announcing its framing. Raises for
 * misuse (a bad header name or value, a body that is not a string).
 */
void mh_lua_fetch_request(lua_State *L, int opts, const struct mh_url *u, const char *method,
                          size_t mlen, lua_Integer stream);

#endif
