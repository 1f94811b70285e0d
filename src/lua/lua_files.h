#ifndef MH_LUA_FILES_H
#define MH_LUA_FILES_H
/*
 * The Lua face of the static-file and compression C handlers:
 * core.files(dir, opts) (http.files) makes a files handler while the script
 * loads, and the site's prepare hook installs the gzip filter on requests
 * from the server's compress setting.
 */
#include <lua.h>

struct mh_req;

/* Adds core.files to the table on top of L. */
void mh_lua_files_open(lua_State *L);

/*
 * The dispatcher's prepare hook (dispatch.h); ud is the generation. Installs
 * gzip on r by the route's own compress option when it has one, else by the
 * server's compress setting.
 */
void mh_lua_compress_prepare(void *ud, struct mh_req *r);

#endif
