#include "lua_files.h"

#include "compress_filter.h"
#include "files_handler.h"
#include "lua_handler.h"
#include "lua_opts.h"
#include "lua_type.h"
#include "lua_vm.h"
#include "mime.h"
#include "req.h"

#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIME_MT "moonhttp.Mime"
static const char MIME_KEY = 'm'; /* registry: the state's MIME table userdata */

static int mime_gc(lua_State *L)
{
    struct mh_mime **m = luaL_checkudata(L, 1, MIME_MT);
    mh_mime_free(*m);
    *m = NULL;
    return 0;
}

/*
 * The state's MIME table, loaded on first use and kept in the registry:
 * once per script load, shared by every mount, freed with the state (after
 * the handlers that point at it: they are freed first, being referenced by
 * nothing once the routes go, and no request can run then).
 */
static const struct mh_mime *state_mime(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &MIME_KEY) == LUA_TUSERDATA) {
        struct mh_mime **m = lua_touserdata(L, -1);
        lua_pop(L, 1);
        return *m;
    }
    lua_pop(L, 1);
    struct mh_mime **m = lua_newuserdatauv(L, sizeof *m, 0);
    *m = NULL;
    static const luaL_Reg mime_meta[] = {{"__gc", mime_gc}, {NULL, NULL}};
    mh_lua_register_type(L, &(struct mh_lua_type){.name = MIME_MT, .meta = mime_meta});
    luaL_setmetatable(L, MIME_MT);
    if (!(*m = mh_mime_load("/etc/mime.types")))
        luaL_error(L, "http.files: out of memory");
    lua_rawsetp(L, LUA_REGISTRYINDEX, &MIME_KEY);
    return *m;
}

static void files_opts(lua_State *L, int t, struct mh_files_opts *o)
{
    o->index = NULL;
    o->max_age = -1;
    o->precompressed = false;
    o->dotfiles = false;
    if (lua_isnoneornil(L, t))
        return;
    luaL_checktype(L, t, LUA_TTABLE);
    static const char *const known[] = {"index", "max_age", "precompressed", "dotfiles", NULL};
    mh_lua_check_opts(L, t, "http.files", known, 1);
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int vt = lua_type(L, -1);
        if (!strcmp(k, "index")) {
            if (vt != LUA_TSTRING && !(vt == LUA_TBOOLEAN && !lua_toboolean(L, -1)))
                luaL_error(L, "http.files: index must be a file name or false");
            o->index = vt == LUA_TSTRING ? lua_tostring(L, -1) : NULL; /* kept alive by opts */
            if (o->index && (strchr(o->index, '/') || !*o->index || o->index[0] == '.'))
                luaL_error(L, "http.files: index must be a plain file name, got \"%s\"", o->index);
        } else if (!strcmp(k, "max_age")) {
            int isnum;
            lua_Integer v = lua_tointegerx(L, -1, &isnum);
            if (!isnum || v < 0 || v > 10 * 365 * 86400L)
                luaL_error(L, "http.files: max_age must be whole seconds >= 0");
            o->max_age = (long)v;
        } else { /* precompressed, dotfiles: the names were checked above */
            if (vt != LUA_TBOOLEAN)
                luaL_error(L, "http.files: %s must be a boolean", k);
            *(k[0] == 'p' ? &o->precompressed : &o->dotfiles) = lua_toboolean(L, -1);
        }
        lua_pop(L, 1);
    }
}

static void free_files_handler(struct mh_handler *h)
{
    mh_files_handler_free((struct mh_files_handler *)h);
}

/*
 * core.files(dir [, opts]): a relative dir is taken from the main script's
 * directory, so the site works whatever the working directory is.
 */
static int l_files(lua_State *L)
{
    struct mh_gen *g = mh_gen_of(L);
    if (g->started)
        return luaL_error(L, "http.files: routes are fixed once the server has started");
    const char *dir = luaL_checkstring(L, 1);
    struct mh_files_opts o;
    files_opts(L, 2, &o);
    const struct mh_mime *mime = state_mime(L);
    char path[PATH_MAX];
    const char *slash = g->config->script ? strrchr(g->config->script, '/') : NULL;
    if (dir[0] != '/' && slash)
        snprintf(path, sizeof path, "%.*s/%s", (int)(slash - g->config->script), g->config->script,
                 dir);
    else
        snprintf(path, sizeof path, "%s", dir);
    char err[PATH_MAX + 64];
    struct mh_files_handler *h = mh_files_handler_new(path, &o, mime, err, sizeof err);
    if (!h)
        return luaL_error(L, "http.files: %s", err);
    mh_lua_push_handler(L, &h->base, free_files_handler);
    return 1;
}

void mh_lua_files_open(lua_State *L)
{
    lua_pushcfunction(L, l_files);
    lua_setfield(L, -2, "files");
}

void mh_lua_compress_prepare(void *ud, struct mh_req *r)
{
    struct mh_gen *g = ud;
    const struct mh_compress_conf *conf = &g->config->compress;
    int id = r->routed.handler_id;
    if (id >= 0 && id < g->nroute_compress && g->route_compress[id])
        conf = g->route_compress[id];
    mh_compress_install(&g->compress_pool, conf, r);
}
