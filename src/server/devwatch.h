#ifndef MH_DEVWATCH_H
#define MH_DEVWATCH_H
/*
 * --dev: watches the app script and the Lua modules it required from the
 * app's directory, and reloads the worker's generation shortly after one of
 * them is saved. inotify watches the directories rather than the files, so
 * editors that save by writing a new file and renaming it over the old one
 * are seen as well as plain rewrites; a short debounce turns the burst of
 * events of one save into one reload.
 */
#include <ev.h>

#include "lua_load.h"

struct mh_devwatch;

/*
 * Starts watching deps (the files of the first load; only those in script's
 * directory or below it). on_change(ctx) runs on loop once a burst of saves
 * has settled: the caller reloads. NULL, with a logged reason, on failure.
 */
struct mh_devwatch *mh_devwatch_start(struct ev_loop *loop, const char *script,
                                      const struct mh_deps *deps, void (*on_change)(void *ctx),
                                      void *ctx);

/*
 * Replaces the watched set after a reload: with `replace`, deps becomes the
 * set (a good load); otherwise deps is added to it (a failed load may have
 * required a broken module that a later save fixes).
 */
void mh_devwatch_update(struct mh_devwatch *dw, const struct mh_deps *deps, bool replace);

void mh_devwatch_stop(struct mh_devwatch *dw);

#endif
