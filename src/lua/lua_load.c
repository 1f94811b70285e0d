#include "lua_load.h"

#include "dispatch.h"
#include "log.h"
#include "lua_acme.h"
#include "lua_client.h"
#include "lua_crypto.h"
#include "lua_metrics.h"
#include "lua_pgauth.h"
#include "lua_pgbind.h"
#include "lua_pgrows.h"
#include "lua_private_file.h"
#include "lua_redis_resp.h"
#include "lua_waiter.h"
#include "lua_channel.h"
#include "lua_socket.h"
#include "lua_thread.h"
#include "lua_timer.h"
#include "lua_errors.h"
#include "lua_failure.h"
#include "lua_files.h"
#include "lua_handler.h"
#include "lua_json.h"
#include "lua_opts.h"
#include "lua_request.h"
#include "lua_response.h"
#include "lua_sched.h"
#include "lua_settings.h"
#include "lua_shared.h"
#include "lua_web.h"
#include "lua_vm.h"
#include "lua_proxy.h"
#include "lua_proxy_body.h"
#include "lua_relay.h"
#include "lua_ws.h"
#include "req.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mh_lua_embedded {
    const char *name;
    const char *src;
    size_t len;
};
extern const struct mh_lua_embedded mh_lua_embedded[];

/* ---- moonhttp.core: what the Lua side of the API builds on --------------- */

static struct mh_gen *check_loading(lua_State *L, const char *what)
{
    struct mh_gen *g = mh_gen_of(L);
    if (g->started)
        luaL_error(L, "%s: routes and settings are fixed once the server has started", what);
    return g;
}

/* Keeps a route's compress option (the value at idx) for handler `id`. */
static void set_route_compress(lua_State *L, struct mh_gen *g, int id, int idx, const char *where)
{
    struct mh_compress_conf *conf = malloc(sizeof *conf);
    if (!conf)
        luaL_error(L, "%s: out of memory", where);
    char err[256];
    if (mh_config_compress_from_lua(conf, L, idx, "compress", err, sizeof err) < 0) {
        free(conf);
        luaL_error(L, "%s: http.handle: %s", where, err);
    }
    if (id >= g->nroute_compress) {
        int n = id + 16;
        struct mh_compress_conf **a = realloc(g->route_compress, (size_t)n * sizeof *a);
        if (!a) {
            free(conf);
            luaL_error(L, "%s: out of memory", where);
        }
        memset(a + g->nroute_compress, 0, (size_t)(n - g->nroute_compress) * sizeof *a);
        g->route_compress = a;
        g->nroute_compress = n;
    }
    free(g->route_compress[id]);
    g->route_compress[id] = conf;
}

/* core.register(pattern, handler, where [, compress]) */
static int l_register(lua_State *L)
{
    struct mh_gen *g = check_loading(L, "http.handle");
    size_t plen;
    const char *pattern = luaL_checklstring(L, 1, &plen);
    if (!lua_isfunction(L, 2) && !mh_lua_to_handler(L, 2))
        luaL_typeerror(L, 2, "function or C handler");
    const char *where = luaL_optstring(L, 3, "?");
    int id = mh_lua_handler_register(L, g, 2, false, NULL);
    if (id < 0)
        return luaL_error(L, "%s: out of memory", where);
    char err[512];
    if (mh_router_add(g->_builder, pattern, plen, id, where, err, sizeof err) < 0) {
        /* `where` is the user's line already: no position of ours in front of it. */
        lua_pushfstring(L, "%s: %s", where, err);
        return lua_error(L);
    }
    if (!lua_isnoneornil(L, 4))
        set_route_compress(L, g, id, 4, where);
    return 0;
}

/*
 * core.server(t [, level]): settings, merged with the command line after
 * the script ran. Names are checked here, so a typo is reported at the
 * user's line with the name it probably meant; values are checked at the
 * merge, and their errors name this line too. The line is `level` frames
 * up as luaL_where counts: 1 (the default) is core.server's caller; http.server
 * (init.lua, which takes its cluster key out first) passes 2, its own caller.
 */
/*
 * The settings that a Lua module reads (MH_SETTING_MODULE, e.g. cluster):
 * require(module).configure(value, level) for each one the table at 2
 * holds, now, so its errors name the script's line (level as l_server's,
 * counted from configure: itself and l_server are two frames more).
 */
static void read_module_settings(lua_State *L, int level)
{
    for (size_t i = 0; i < mh_settings_count; i++) {
        const struct mh_setting *s = &mh_settings[i];
        if (s->type != MH_SETTING_MODULE)
            continue;
        if (lua_getfield(L, 2, s->name) == LUA_TNIL) {
            lua_pop(L, 1);
            continue;
        }
        lua_getglobal(L, "require");
        lua_pushstring(L, s->module);
        lua_call(L, 1, 1);
        lua_getfield(L, -1, "configure");
        lua_pushvalue(L, -3);
        lua_pushinteger(L, level + 2);
        lua_call(L, 2, 0);
        lua_pop(L, 2);
    }
}

static int l_server(lua_State *L)
{
    struct mh_gen *g = check_loading(L, "http.server");
    luaL_checktype(L, 1, LUA_TTABLE);
    int level = (int)luaL_optinteger(L, 2, 1);
    lua_settop(L, 1);
    luaL_where(L, level);
    lua_insert(L, 1); /* 1: where, 2: the table */
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        lua_pop(L, 1);
        size_t len;
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        if (k && mh_config_is_setting(k, len))
            continue;
        const char *near = k ? mh_config_suggest(k, len) : NULL;
        if (!k)
            lua_pushliteral(L, "http.server: setting names must be strings");
        else if (near)
            lua_pushfstring(L, "http.server: unknown setting \"%s\" (did you mean \"%s\"?)", k,
                            near);
        else
            lua_pushfstring(L, "http.server: unknown setting \"%s\" (moonhttp --help lists them)",
                            k);
        lua_pushvalue(L, 1);
        lua_insert(L, -2);
        lua_concat(L, 2);
        return lua_error(L);
    }
    snprintf(g->settings_where, sizeof g->settings_where, "%s", lua_tostring(L, 1));
    if (lua_getfield(L, 2, "shared") != LUA_TNIL) {
        /* Checked now, not after the script ran, so the error names this line. */
        struct mh_shared_decl d[MH_MAX_SHARED];
        size_t n = 0;
        char err[256];
        int rc = mh_config_shared_from_lua(d, &n, L, -1, err, sizeof err);
        mh_config_shared_clear(d, &n);
        if (rc < 0) {
            lua_pushvalue(L, 1);
            lua_pushfstring(L, "http.server: %s", err);
            lua_concat(L, 2);
            return lua_error(L);
        }
    }
    lua_pop(L, 1);
    read_module_settings(L, level);
    if (g->settings_ref != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, g->settings_ref);
    lua_pushvalue(L, 2);
    g->settings_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

static int set_special_handler(lua_State *L, int *slot, const char *what)
{
    check_loading(L, what);
    luaL_checktype(L, 1, LUA_TFUNCTION);
    if (*slot != LUA_NOREF)
        luaL_unref(L, LUA_REGISTRYINDEX, *slot);
    lua_pushvalue(L, 1);
    *slot = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

static int l_not_found(lua_State *L)
{
    return set_special_handler(L, &mh_gen_of(L)->not_found_ref, "http.not_found");
}

static int l_method_not_allowed(lua_State *L)
{
    return set_special_handler(L, &mh_gen_of(L)->method_not_allowed_ref, "http.method_not_allowed");
}

static int l_started(lua_State *L)
{
    lua_pushboolean(L, mh_gen_of(L)->started);
    return 1;
}

/* core.dev(): serving with --dev (moonhttp.template then re-reads edited files). */
static int l_dev(lua_State *L)
{
    lua_pushboolean(L, mh_gen_of(L)->config->dev);
    return 1;
}

/*
 * core.log(level, ...): the values' tostring()s joined with nothing between,
 * as OpenResty's ngx.log does, so http.log("warn", "worker ", id, " down")
 * reads as the sentence it was written to be.
 */
static int l_log(lua_State *L)
{
    static const char *const levels[] = {"error", "warn", "info", "debug", NULL};
    int level = luaL_checkoption(L, 1, NULL, levels);
    if (!mh_log_enabled((enum mh_log_level)level))
        return 0;
    /* Counted before luaL_buffinit, which may push a placeholder of its own. */
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 2; i <= n; i++) {
        luaL_tolstring(L, i, NULL);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    mh_log((enum mh_log_level)level, "%s", lua_tostring(L, -1));
    return 0;
}

/* core.log_instance(name | nil): the cluster instance every log line names (mh_log_set_instance).
 */
static int l_log_instance(lua_State *L)
{
    mh_log_set_instance(luaL_optstring(L, 1, NULL));
    return 0;
}

/*
 * core.stopping(): a stop was asked for (health checks should fail so
 * balancers drain us), or this code was replaced by a reload in place.
 */
static int l_stopping(lua_State *L)
{
    lua_pushboolean(L, mh_gen_stop_asked(mh_gen_of(L)));
    return 1;
}

/*
 * core.draining(): a reload replaced this code and its long-lived requests
 * are draining (drain_timeout): a WebSocket or stream may ask its client to
 * reconnect, to the new code.
 */
static int l_draining(lua_State *L)
{
    lua_pushboolean(L, mh_gen_draining(mh_gen_of(L)));
    return 1;
}

/*
 * core.worker_id(): the serving worker's slot, 1..workers, or nil while the
 * script loads. A load runs in the master before the fork (and a reload
 * there again), so a number at load time would be one value copied into
 * every worker; nil makes such a use fail where it is written instead.
 */
static int l_worker_id(lua_State *L)
{
    const struct mh_gen *g = mh_gen_of(L);
    if (!g->host || g->host->worker_id < 1)
        lua_pushnil(L);
    else
        lua_pushinteger(L, g->host->worker_id);
    return 1;
}

/*
 * http.metrics_handler() is made while the script loads, before the server
 * has its metrics: a C handler that forwards to what the host serves.
 */
static void metrics_proxy_start(const struct mh_handler *h, struct mh_req *r)
{
    const struct mh_gen *g =
        (const struct mh_gen *)((const char *)h - offsetof(struct mh_gen, metrics_proxy));
    if (g->host && g->host->metrics) {
        mh_req_start(r, g->host->metrics);
        return;
    }
    mh_req_set_header(r, "Content-Type", 12, MH_DEFAULT_TYPE, sizeof MH_DEFAULT_TYPE - 1, true);
    mh_req_write(r, "# metrics are not available in this process\n", 45);
    mh_req_finish(r);
}

static const struct mh_handler_ops metrics_proxy_ops = {
    .name = "metrics",
    .start = metrics_proxy_start,
};

/* core.metrics_handler(): called by http.metrics_handler() while the script loads. */
static int l_metrics_handler(lua_State *L)
{
    struct mh_gen *g = check_loading(L, "http.metrics_handler");
    g->wants_metrics = true;
    mh_lua_push_handler(L, &g->metrics_proxy, NULL);
    return 1;
}

/* What http.metrics needs of this state's generation (a function, so lua_metrics.c stays
 * outside the lua/ include knot). */
static struct mh_lua_metrics_env metrics_env(lua_State *L)
{
    const struct mh_gen *g = mh_gen_of(L);
    return (struct mh_lua_metrics_env){
        .loading = !g->started,
        .serving = g->host != NULL,
        .table = g->host ? g->host->metrics_table : NULL,
    };
}

static int open_core(lua_State *L)
{
    static const luaL_Reg fns[] = {
        {"register", l_register},
        {"server", l_server},
        {"not_found", l_not_found},
        {"method_not_allowed", l_method_not_allowed},
        {"started", l_started},
        {"dev", l_dev},
        {"log", l_log},
        {"log_instance", l_log_instance},
        {"stopping", l_stopping},
        {"draining", l_draining},
        {"worker_id", l_worker_id},
        {"metrics_handler", l_metrics_handler},
        {NULL, NULL},
    };
    luaL_newlib(L, fns);
    lua_createtable(L, 0, 2);
    lua_pushstring(L, mh_dispatch_not_found_text);
    lua_rawseti(L, -2, 404);
    lua_pushstring(L, mh_dispatch_not_allowed_text);
    lua_rawseti(L, -2, 405);
    lua_setfield(L, -2, "default_text");
    mh_lua_handler_open(L);
    mh_sched_open(L);
    mh_client_open(L);
    mh_lua_files_open(L);
    mh_socket_open(L);
    mh_lua_ws_core_open(L);
    mh_lua_relay_core_open(L);
    mh_lua_proxy_open(L);
    mh_lua_proxy_body_open(L);
    mh_thread_open(L);
    mh_timer_open(L);
    mh_json_open(L);
    mh_lua_errors_open(L);
    mh_lua_failure_open(L);
    mh_lua_response_open_core(L);
    mh_lua_opts_open(L);
    mh_lua_shared_open(L);
    mh_channel_open(L);
    mh_lua_metrics_open(L, metrics_env);
    mh_lua_acme_open(L);
    mh_lua_private_file_open(L);
    return 1;
}

const char *mh_lua_embedded_source(const char *name, size_t *len)
{
    for (const struct mh_lua_embedded *m = mh_lua_embedded; m->name; m++)
        if (strcmp(m->name, name) == 0) {
            *len = m->len;
            return m->src;
        }
    return NULL;
}

static int load_embedded(lua_State *L)
{
    const struct mh_lua_embedded *m = lua_touserdata(L, lua_upvalueindex(1));
    char chunk[128];
    snprintf(chunk, sizeof chunk, "=[moonhttp] %s", m->name);
    if (luaL_loadbuffer(L, m->src, m->len, chunk) != LUA_OK)
        return lua_error(L);
    lua_call(L, 0, 1);
    return 1;
}

/* package.preload entries for moonhttp.core and the embedded lua/moonhttp modules. */
static void install_preloads(lua_State *L)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "preload");
    lua_pushcfunction(L, open_core);
    lua_setfield(L, -2, "moonhttp.core");
    lua_pushcfunction(L, mh_lua_crypto_open);
    lua_setfield(L, -2, "moonhttp.crypto");
    lua_pushcfunction(L, mh_lua_web_open);
    lua_setfield(L, -2, "moonhttp.webcore");
    lua_pushcfunction(L, mh_lua_pgauth_open);
    lua_setfield(L, -2, "moonhttp.pgauth");
    lua_pushcfunction(L, mh_lua_pgbind_open);
    lua_setfield(L, -2, "moonhttp.pgbind");
    lua_pushcfunction(L, mh_lua_pgrows_open);
    lua_setfield(L, -2, "moonhttp.pgrows");
    lua_pushcfunction(L, mh_lua_resp_open);
    lua_setfield(L, -2, "moonhttp.resp");
    lua_pushcfunction(L, mh_lua_waiter_open);
    lua_setfield(L, -2, "moonhttp.waiter");
    for (const struct mh_lua_embedded *m = mh_lua_embedded; m->name; m++) {
        lua_pushlightuserdata(L, (void *)m);
        lua_pushcclosure(L, load_embedded, 1);
        /* lua/moonhttp/init.lua is the module "moonhttp" itself. */
        lua_setfield(L, -2, strcmp(m->name, "moonhttp.init") == 0 ? "moonhttp" : m->name);
    }
    lua_pop(L, 2);
}

/* Lets the script require modules that sit next to it. */
static void add_script_dir_to_path(lua_State *L, const char *script)
{
    const char *slash = strrchr(script, '/');
    int dirlen = slash ? (int)(slash - script) : 1;
    const char *dir = slash ? script : ".";
    lua_getglobal(L, "package");
    char buf[4096];
    lua_getfield(L, -1, "path");
    snprintf(buf, sizeof buf, "%.*s/?.lua;%.*s/?/init.lua;%s", dirlen, dir, dirlen, dir,
             lua_tostring(L, -1));
    lua_pop(L, 1);
    lua_pushstring(L, buf);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
}

static int msgh_traceback(lua_State *L)
{
    luaL_traceback(L, L, mh_lua_error_text(L, 1), 1);
    return 1;
}

/*
 * Runs moonhttp._finalize() if the script loaded the module: composes
 * middleware, registers. Its errors name the user's file:line themselves
 * (where the route or middleware was registered), so they get no traceback
 * through moonhttp's own frames.
 */
static int finalize_routes(lua_State *L, char *err, size_t errlen)
{
    lua_pushnil(L); /* stands where a message handler would */
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "loaded");
    lua_getfield(L, -1, "moonhttp");
    lua_remove(L, -2);
    lua_remove(L, -2);
    if (!lua_istable(L, -1)) {
        lua_pop(L, 2);
        return 0;
    }
    lua_getfield(L, -1, "_finalize");
    lua_remove(L, -2);
    if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
        snprintf(err, errlen, "%s", lua_tostring(L, -1));
        lua_pop(L, 2);
        return -1;
    }
    lua_pop(L, 1);
    return 0;
}

static void set_arg_table(lua_State *L, struct mh_config *config)
{
    lua_createtable(L, config->script_argc, 1);
    for (int i = 0; i < config->script_argc; i++) {
        lua_pushstring(L, config->script_argv[i]);
        lua_rawseti(L, -2, i);
    }
    lua_setglobal(L, "arg");
}

void mh_deps_free(struct mh_deps *d)
{
    for (size_t i = 0; i < d->n; i++)
        free(d->files[i]);
    free(d->files);
    d->files = NULL;
    d->n = 0;
}

static void deps_add(struct mh_deps *d, const char *path)
{
    for (size_t i = 0; i < d->n; i++)
        if (strcmp(d->files[i], path) == 0)
            return;
    char **f = realloc(d->files, (d->n + 1) * sizeof *f);
    if (!f)
        return;
    d->files = f;
    if ((f[d->n] = strdup(path)))
        d->n++;
}

static const char DEPS_KEY = 'd'; /* registry key: list of files require found */

/*
 * package.searchers[2] wrapped: records the file the Lua searcher would load
 * for each require, looked up before the real searcher runs, so a module
 * with a syntax error (the searcher raises) is recorded too. Written in C so
 * that error messages and tracebacks read as they do without it.
 */
static int tracking_searcher(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchpath");
    lua_pushstring(L, name);
    lua_getfield(L, -3, "path");
    lua_call(L, 2, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
        lua_pushvalue(L, lua_upvalueindex(2));
        lua_pushvalue(L, -2);
        lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
        lua_pop(L, 1);
    }
    lua_settop(L, 1);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, 1, LUA_MULTRET);
    return lua_gettop(L);
}

static void track_requires(lua_State *L)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "searchers");
    lua_rawgeti(L, -1, 2); /* the original Lua-file searcher */
    lua_newtable(L);       /* the files found */
    lua_pushvalue(L, -1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &DEPS_KEY);
    lua_pushcclosure(L, tracking_searcher, 2);
    lua_rawseti(L, -2, 2);
    lua_pop(L, 2);
}

static void collect_deps(lua_State *L, struct mh_deps *d)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &DEPS_KEY);
    if (lua_istable(L, -1)) {
        lua_Integer n = luaL_len(L, -1);
        for (lua_Integer i = 1; i <= n; i++) {
            if (lua_rawgeti(L, -1, i) == LUA_TSTRING)
                deps_add(d, lua_tostring(L, -1));
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

/* A reload keeps the settings: say which of the script's changed, so none is ignored silently. */
static void warn_restart_settings(struct mh_gen *g)
{
    char names[512];
    lua_rawgeti(g->L, LUA_REGISTRYINDEX, g->settings_ref);
    int n = mh_config_changed(g->config, g->L, -1, names, sizeof names);
    lua_pop(g->L, 1);
    /* settings_where is "file:line: " as luaL_where gives it */
    int wlen = (int)strlen(g->settings_where);
    while (wlen > 0 && (g->settings_where[wlen - 1] == ' ' || g->settings_where[wlen - 1] == ':'))
        wlen--;
    if (n > 0)
        mh_log(MH_LOG_WARN,
               "reload: http.server{} setting%s %s changed (%.*s); settings take effect on a "
               "restart, not a reload: the server keeps the old value%s",
               n > 1 ? "s" : "", names, wlen, g->settings_where, n > 1 ? "s" : "");
}

/* The site dispatch routes on; settings become enums and numbers here, once. */
static int build_site(struct mh_gen *g, char *err, size_t errlen)
{
    lua_State *L = g->L;
    struct mh_site *s = &g->site;
    s->router = g->router;
    s->handlers = &g->handlers;
    s->clean = strcmp(g->config->clean_path, "rewrite") == 0 ? MH_CLEAN_REWRITE : MH_CLEAN_REDIRECT;
    s->redirect_code = (int)g->config->redirect_code;
    if (g->config->compress.on || g->nroute_compress > 0) {
        s->prepare = mh_lua_compress_prepare;
        s->prepare_ud = g;
    }
    if (g->not_found_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, g->not_found_ref);
        int rc = mh_lua_handler_register(L, g, -1, false, &s->not_found);
        lua_pop(L, 1);
        if (rc < 0)
            goto oom;
    }
    if (g->method_not_allowed_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, g->method_not_allowed_ref);
        int rc = mh_lua_handler_register(L, g, -1, true, &s->method_not_allowed);
        lua_pop(L, 1);
        if (rc < 0)
            goto oom;
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory building the routes");
    return -1;
}

/* The scheduler's and the route handlers' parts of a generation, freed with it. */
static const struct mh_gen_ops gen_ops = {
    .before_close = mh_task_pool_free, /* the coroutines themselves are collected by lua_close */
    .after_close = mh_lua_handlers_free,
    .task_failed = mh_task_failed,
};

struct mh_gen *mh_gen_new(struct mh_config *config, bool reload, char *err, size_t errlen)
{
    return mh_gen_load(config, reload, NULL, err, errlen);
}

/* True when name is a shared dict of the config (the command line and, on a first load, the
 * script's settings) or of the script's own http.server{ shared = ... } (a reload adds those). */
static bool shared_declared(lua_State *L, const struct mh_gen *g, const struct mh_config *config,
                            const char *name)
{
    for (size_t i = 0; i < config->nshared; i++)
        if (!strcmp(config->shared[i].name, name))
            return true;
    if (g->settings_ref == LUA_NOREF)
        return false;
    int top = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, g->settings_ref);
    bool found =
        lua_getfield(L, -1, "shared") == LUA_TTABLE && lua_getfield(L, -1, name) != LUA_TNIL;
    lua_settop(L, top);
    return found;
}

/*
 * The shared dicts the script named while it loaded (http.upstream{ shared = "x" } puts
 * { name = "x", where = "script.lua:12: http.upstream: " } in core.shared_wanted) are all
 * declared. A dict cannot be touched before the
 * server starts, so without this a missing one showed only as a 500 at the first request that
 * used it; now the load fails, naming the line that named the dict.
 */
static int check_shared_wanted(lua_State *L, const struct mh_gen *g, const struct mh_config *config,
                               char *err, size_t errlen)
{
    int top = lua_gettop(L);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_getfield(L, -1, "moonhttp.core") != LUA_TTABLE ||
        lua_getfield(L, -1, "shared_wanted") != LUA_TTABLE) {
        lua_settop(L, top);
        return 0;
    }
    int rc = 0;
    lua_Integer n = luaL_len(L, -1);
    for (lua_Integer i = 1; i <= n && rc == 0; i++) {
        lua_rawgeti(L, -1, i);
        lua_getfield(L, -1, "name");
        lua_getfield(L, -2, "where");
        const char *name = lua_tostring(L, -2), *where = lua_tostring(L, -1);
        if (name && !shared_declared(L, g, config, name)) {
            snprintf(err, errlen,
                     "%sshared dict \"%s\" is not declared (declare it: "
                     "http.server{ shared = { %s = \"1m\" } })",
                     where ? where : "", name, name);
            rc = -1;
        }
        lua_pop(L, 3);
    }
    lua_settop(L, top);
    return rc;
}

struct mh_gen *mh_gen_load(struct mh_config *config, bool reload, struct mh_deps *deps, char *err,
                           size_t errlen)
{
    if (deps)
        deps_add(deps, config->script);
    struct mh_gen *g = mh_gen_alloc(config, &gen_ops);
    if (!g) {
        snprintf(err, errlen, "out of memory creating a Lua state");
        return NULL;
    }
    g->metrics_proxy.ops = &metrics_proxy_ops;
    lua_State *L = g->L;
    luaL_openlibs(L);
    install_preloads(L);
    add_script_dir_to_path(L, config->script);
    set_arg_table(L, config);
    mh_lua_request_open(L);
    mh_lua_ws_open(L);
    mh_lua_response_open(L);
    /* Integer references too: each request takes both, and an integer key is an array slot. */
    lua_rawgetp(L, LUA_REGISTRYINDEX, &mh_request_mt_key);
    g->req_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_rawgetp(L, LUA_REGISTRYINDEX, &mh_response_mt_key);
    g->res_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    if (deps)
        track_requires(L);

    lua_pushcfunction(L, msgh_traceback);
    if (luaL_loadfile(L, config->script) != LUA_OK) {
        snprintf(err, errlen, "%s", lua_tostring(L, -1));
        goto fail;
    }
    if (config->mode == MH_MODE_RUN) {
        /* The script runs later as a task, so it may wait. Leave it on the stack. */
        lua_remove(L, -2);
        g->started = true;
        if (!(g->router = mh_router_build(g->_builder, err, errlen)))
            goto fail;
        return g;
    }
    if (lua_pcall(L, 0, 0, -2) != LUA_OK) {
        snprintf(err, errlen, "%s", lua_tostring(L, -1));
        goto fail;
    }
    lua_pop(L, 1);
    if (finalize_routes(L, err, errlen) < 0)
        goto fail;
    g->started = true;
    if (g->settings_ref != LUA_NOREF && !reload) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, g->settings_ref);
        char why[512];
        int rc = mh_config_apply_lua(config, L, -1, why, sizeof why);
        lua_pop(L, 1);
        if (rc < 0) {
            snprintf(err, errlen, "%s%s", g->settings_where, why);
            goto fail;
        }
    }
    if (g->settings_ref != LUA_NOREF && reload)
        warn_restart_settings(g);
    if (check_shared_wanted(L, g, config, err, errlen) < 0)
        goto fail;
    if (!(g->router = mh_router_build(g->_builder, err, errlen)))
        goto fail;
    mh_router_builder_free(g->_builder);
    g->_builder = NULL;
    if (build_site(g, err, errlen) < 0)
        goto fail;
    if (deps)
        collect_deps(L, deps);
    return g;
fail:
    if (deps)
        collect_deps(L, deps);
    mh_gen_free(g);
    return NULL;
}
