#ifndef MH_LUA_LOAD_H
#define MH_LUA_LOAD_H
/*
 * Loading a generation, the top of lua/: a fresh Lua state (lua_vm.h) with
 * the moonhttp module (moonhttp.core from every binding, the embedded
 * lua/moonhttp modules), the app script run, the router and the site built.
 * Only server/ (and the fuzzers) call this; nothing in lua/ includes it.
 */
#include <stdbool.h>
#include <stddef.h>

struct mh_config;
struct mh_gen;

/*
 * Creates a generation: a fresh Lua state with the moonhttp module, runs
 * `script`, then closes registration and builds the router. For
 * MH_MODE_RUN the script is not run here but left on the stack of g->L, for
 * the worker to run as a task (mh_task_spawn), so it may wait. Applies
 * the script's http.server{} settings to config unless `reload`. Returns NULL
 * with a message (file:line for script errors) in err.
 */
struct mh_gen *mh_gen_new(struct mh_config *config, bool reload, char *err, size_t errlen);

/* The files one load of the script read: the script, then each Lua module require found. */
struct mh_deps {
    char **files;
    size_t n;
};
void mh_deps_free(struct mh_deps *d);

/*
 * mh_gen_new that also reports, in *deps (when not NULL), the files the load
 * read, even when it failed: a reload watcher must watch a broken module too
 * so that fixing it triggers the next reload.
 */
struct mh_gen *mh_gen_load(struct mh_config *config, bool reload, struct mh_deps *deps, char *err,
                           size_t errlen);

/*
 * The source of an embedded lua/moonhttp module ("moonhttp.test"), built into
 * the binary, or NULL. For `moonhttp test`, which hands moonhttp.test to busted.
 */
const char *mh_lua_embedded_source(const char *name, size_t *len);
#endif
