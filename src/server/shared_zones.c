#include "shared_zones.h"

#include "log.h"
#include "lua_settings.h"
#include "lua_vm.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(MH_MAX_SHARED <= MH_SHM_DICTS_MAX, "every declared dict has a slot");
_Static_assert(MH_SHARED_MIN_SIZE >= MH_SHM_DICT_MIN_SIZE, "declared sizes can be mapped");

/* Writes this process's pid to path and sleeps 30 s: the caller holds a zone's lock. */
static void hold(const char *path)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%d\n", (int)getpid());
        fclose(f);
    }
    /* the whole 30 s: a signal (the guards' timer ticks on this thread) ends sleep() early */
    for (unsigned left = 30; left > 0;)
        left = sleep(left);
}

/* See MOONHTTP_TEST_SHM_HOLD in the header: lets a spec kill a writer holding the lock. */
static void hold_hook(const char *key, size_t klen)
{
    const char *path = getenv("MOONHTTP_TEST_SHM_HOLD");
    if (path && klen >= 5 && !memcmp(key, "hold:", 5))
        hold(path);
}

/* MOONHTTP_TEST_CHAN_HOLD: the same for a channel publisher. */
static void chan_hold_hook(const char *msg, size_t len)
{
    const char *path = getenv("MOONHTTP_TEST_CHAN_HOLD");
    if (path && len >= 5 && !memcmp(msg, "hold:", 5))
        hold(path);
}

struct mh_shm_chan *mh_shared_zones_channels(char *err, size_t errlen)
{
    struct mh_shm_chan *c = mh_shm_chan_new(MH_CHANNEL_RING);
    if (!c) {
        snprintf(err, errlen, "cannot map the channels' zone: %s", strerror(errno));
        return NULL;
    }
    if (getenv("MOONHTTP_TEST_CHAN_HOLD"))
        mh_shm_chan_set_publish_hook(c, chan_hold_hook);
    return c;
}

static int add_zone(struct mh_shm_dicts *set, const struct mh_shared_decl *d, char *err,
                    size_t errlen)
{
    struct mh_shm_dict *dict = mh_shm_dict_new((size_t)d->size);
    if (!dict) {
        snprintf(err, errlen, "shared dict %s (%ld bytes): %s", d->name, d->size, strerror(errno));
        return -1;
    }
    if (getenv("MOONHTTP_TEST_SHM_HOLD"))
        mh_shm_dict_set_write_hook(dict, hold_hook);
    snprintf(set->v[set->n].name, sizeof set->v[set->n].name, "%s", d->name);
    set->v[set->n].asked_size = 0;
    set->v[set->n++].dict = dict;
    mh_log(MH_LOG_DEBUG, "shared dict %s: %ld bytes", d->name, d->size);
    return 0;
}

int mh_shared_zones_open(struct mh_shm_dicts *set, const struct mh_config *config, char *err,
                         size_t errlen)
{
    memset(set, 0, sizeof *set);
    for (size_t i = 0; i < config->nshared; i++)
        if (add_zone(set, &config->shared[i], err, errlen) < 0)
            return -1;
    return 0;
}

/* The size the last reload asked of dict's entry in set, 0 before one. */
static long *asked_size(struct mh_shm_dicts *set, const struct mh_shm_dict *dict)
{
    size_t i = 0;
    while (set->v[i].dict != dict) /* dict was found in set */
        i++;
    return &set->v[i].asked_size;
}

void mh_shared_zones_reload(struct mh_shm_dicts *set, struct mh_gen *g)
{
    struct mh_shared_decl d[MH_MAX_SHARED];
    size_t n = 0;
    char err[256];
    lua_State *L = g->L;
    if (g->settings_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, g->settings_ref);
        if (lua_getfield(L, -1, "shared") != LUA_TNIL &&
            mh_config_shared_from_lua(d, &n, L, -1, err, sizeof err) < 0) /* checked at load */
            mh_log(MH_LOG_ERROR, "reload: %s", err);
        lua_pop(L, 2);
    }
    for (size_t i = 0; i < n; i++) {
        struct mh_shm_dict *old = mh_shm_dicts_find(set, d[i].name);
        if (!old) {
            if (set->n == MH_SHM_DICTS_MAX || add_zone(set, &d[i], err, sizeof err) < 0)
                mh_log(MH_LOG_ERROR, "reload: shared dict %s not created: %s", d[i].name,
                       set->n == MH_SHM_DICTS_MAX ? "too many dicts" : err);
            else
                mh_log(MH_LOG_INFO, "reload: new shared dict %s (%ld bytes)", d[i].name, d[i].size);
        } else {
            /* Said once per size asked for, not again on every later reload that asks the same. */
            long *asked = asked_size(set, old);
            if (mh_shm_dict_size(old) != (size_t)d[i].size && *asked != d[i].size)
                mh_log(MH_LOG_WARN,
                       "reload: shared dict %s keeps its size of %zu bytes and its data; the new "
                       "size (%ld bytes) needs a restart",
                       d[i].name, mh_shm_dict_size(old), d[i].size);
            *asked = d[i].size;
        }
    }
    mh_config_shared_clear(d, &n);
    g->shared = set;
}

void mh_shared_zones_close(struct mh_shm_dicts *set)
{
    for (size_t i = 0; i < set->n; i++)
        mh_shm_dict_free(set->v[i].dict);
    set->n = 0;
}
