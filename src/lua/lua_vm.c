#include "lua_vm.h"

#include "log.h"
#include "lua_guard.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static const char GEN_KEY = 'g'; /* registry key: light userdata of our generation */

struct mh_gen *mh_gen_of(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &GEN_KEY);
    struct mh_gen *g = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return g;
}

void mh_lua_traceback(lua_State *L, lua_State *co, const char *msg)
{
    luaL_traceback(L, co, msg ? msg : "(error object is not a string)", 0);
}

/*
 * Lua's allocator. Each request makes a few small, short-lived Lua objects
 * (its req and res handles); recycling small blocks through per-size free
 * lists keeps the steady state free of malloc/free. Lua always tells the old
 * size of a block it frees or resizes, so the class is known without headers.
 * Sanitizer builds use plain realloc so ASan still sees every use after free.
 */
#define HEAP_GRAIN     16
#define HEAP_CACHE_MAX 4096 /* blocks kept per class */

/*
 * Every byte taken from malloc is counted against lua_memory_limit
 * (lua_guard.h): growth may be refused, shrinking never is (Lua relies on
 * that). Small blocks are counted when malloc'd and when freed, not while
 * they move through the free lists, so the common case costs nothing; the
 * cached blocks (at most HEAP_CACHE_MAX per class) count as used. (In
 * lua_alloc, when ptr is NULL, osize is the kind of object, not a size.)
 *
 * counted_realloc: realloc of a block counted as `old` bytes (0 for a new one).
 */
static void *counted_realloc(void *ptr, size_t old, size_t nsize)
{
    if (nsize > old && !mh_guard_mem_grow(nsize - old))
        return NULL;
    void *block = realloc(ptr, nsize);
    if (!block) {
        if (nsize > old)
            mh_guard_mem_shrink(nsize - old);
        return NULL;
    }
    if (nsize < old)
        mh_guard_mem_shrink(old - nsize);
    return block;
}

/* A cached block of size class c, or NULL. */
static inline void *heap_pop(struct mh_lua_heap *h, size_t c)
{
    void *block = h->free[c];
    if (block) {
        h->free[c] = *(void **)block;
        h->count[c]--;
    }
    return block;
}

/* Caches a block of class c; false when the class has HEAP_CACHE_MAX already. */
static inline bool heap_push(struct mh_lua_heap *h, size_t c, void *ptr)
{
    if (h->count[c] >= HEAP_CACHE_MAX)
        return false;
    *(void **)ptr = h->free[c];
    h->free[c] = ptr;
    h->count[c]++;
    return true;
}

/* Everything but a small block taken from or given back to its free list (lua_alloc). */
static __attribute__((noinline)) void *lua_alloc_slow(struct mh_lua_heap *h, void *ptr,
                                                      size_t osize, size_t nsize)
{
#ifndef MH_SANITIZE
    size_t oclass = ptr && osize ? (osize - 1) / HEAP_GRAIN : MH_LUA_HEAP_CLASSES;
    size_t nclass = nsize ? (nsize - 1) / HEAP_GRAIN : MH_LUA_HEAP_CLASSES;
    if (ptr && oclass == nclass && nclass < MH_LUA_HEAP_CLASSES)
        return ptr; /* same block size */
    void *block = NULL;
    if (nsize && nclass < MH_LUA_HEAP_CLASSES) {
        if (!(block = heap_pop(h, nclass)) &&
            !(block = counted_realloc(NULL, 0, (nclass + 1) * HEAP_GRAIN)))
            return NULL;
        if (ptr)
            memcpy(block, ptr, osize < nsize ? osize : nsize);
    } else if (nsize) {
        if (ptr && oclass >= MH_LUA_HEAP_CLASSES)
            return counted_realloc(ptr, osize, nsize); /* large to large */
        if (!(block = counted_realloc(NULL, 0, nsize)))
            return NULL;
        if (ptr)
            memcpy(block, ptr, osize < nsize ? osize : nsize);
    }
    if (ptr && !(oclass < MH_LUA_HEAP_CLASSES && heap_push(h, oclass, ptr))) {
        free(ptr);
        mh_guard_mem_shrink(oclass < MH_LUA_HEAP_CLASSES ? (oclass + 1) * HEAP_GRAIN : osize);
    }
    return block;
#else
    (void)h;
    size_t old = ptr ? osize : 0;
    if (nsize == 0) {
        free(ptr);
        mh_guard_mem_shrink(old);
        return NULL;
    }
    return counted_realloc(ptr, old, nsize);
#endif
}

/*
 * The calls of every request, a new small object and one freed, are served
 * here from the free lists: no call, no saved registers (the slow path's
 * frame costs more than these paths themselves).
 */
static void *lua_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct mh_lua_heap *h = ud;
#ifndef MH_SANITIZE
    const size_t small = MH_LUA_HEAP_CLASSES * HEAP_GRAIN;
    if (!ptr) {
        void *block;
        if (nsize - 1 < small && (block = heap_pop(h, (nsize - 1) / HEAP_GRAIN)))
            return block;
    } else if (nsize == 0 && osize - 1 < small && heap_push(h, (osize - 1) / HEAP_GRAIN, ptr)) {
        return NULL;
    }
#endif
    return lua_alloc_slow(h, ptr, osize, nsize);
}

static void lua_heap_free(struct mh_lua_heap *h)
{
    for (int i = 0; i < MH_LUA_HEAP_CLASSES; i++) {
        while (h->free[i]) {
            void *next = *(void **)h->free[i];
            free(h->free[i]);
            mh_guard_mem_shrink((size_t)(i + 1) * HEAP_GRAIN);
            h->free[i] = next;
        }
        h->count[i] = 0;
    }
}

static int on_lua_panic(lua_State *L)
{
    mh_log(MH_LOG_ERROR, "unprotected Lua error: %s", lua_tostring(L, -1));
    abort();
}

struct mh_gen *mh_gen_alloc(struct mh_config *config, const struct mh_gen_ops *ops)
{
    struct mh_gen *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->config = config;
    g->ops = ops;
    g->refs = 1;
    mh_guard_set_memory_limit((size_t)config->lua_memory_limit);
    g->not_found_ref = g->method_not_allowed_ref = g->settings_ref = LUA_NOREF;
    mh_compress_pool_init(&g->compress_pool, 16);
    g->L = lua_newstate(lua_alloc, &g->heap);
    if (g->L) {
        lua_atpanic(g->L, on_lua_panic);
        lua_gc(g->L, LUA_GCGEN, 0, 0); /* most request garbage dies young */
    }
    g->_builder = mh_router_builder_new();
    if (!g->L || !g->_builder) {
        if (g->L)
            lua_close(g->L);
        lua_heap_free(&g->heap);
        mh_router_builder_free(g->_builder);
        free(g);
        return NULL;
    }
    lua_pushlightuserdata(g->L, g);
    lua_rawsetp(g->L, LUA_REGISTRYINDEX, &GEN_KEY);
    *(struct mh_task **)lua_getextraspace(g->L) = NULL; /* the running task (lua_sched.c): none */
    return g;
}

void mh_gen_free(struct mh_gen *g)
{
    if (g->ops && g->ops->before_close)
        g->ops->before_close(g);
    if (g->L)
        lua_close(g->L); /* C handler values are collected: their free functions run */
    if (g->ops && g->ops->after_close)
        g->ops->after_close(g);
    mh_compress_pool_destroy(&g->compress_pool);
    for (int i = 0; i < g->nroute_compress; i++)
        free(g->route_compress[i]);
    free(g->route_compress);
    lua_heap_free(&g->heap);
    mh_router_builder_free(g->_builder);
    mh_router_free(g->router);
    free(g);
}

void mh_gen_set_host(struct mh_gen *g, const struct mh_gen_host *host)
{
    g->host = host;
    g->loop = host ? host->loop : NULL;
}

void mh_gen_on_stop(struct mh_gen *g, mh_gen_stop_fn fn)
{
    for (int i = 0; i < g->_nstop_hooks; i++)
        if (g->_stop_hooks[i] == fn)
            return;
    if (g->_nstop_hooks == MH_GEN_MAX_STOP_HOOKS) {
        /* A build-time mistake (a new binding past the array): loud, never silent. */
        mh_log(MH_LOG_ERROR, "bug: more than %d stop hooks; raise MH_GEN_MAX_STOP_HOOKS",
               MH_GEN_MAX_STOP_HOOKS);
        abort();
    }
    g->_stop_hooks[g->_nstop_hooks++] = fn;
}

void mh_gen_stop(struct mh_gen *g, unsigned flags)
{
    unsigned added = flags & ~g->stop;
    if (!added)
        return;
    g->stop |= added;
    /* A hook may end tasks that hold the last other reference. */
    mh_gen_ref(g);
    for (int i = 0; i < g->_nstop_hooks; i++)
        g->_stop_hooks[i](g, added);
    mh_gen_unref(g);
}

void mh_gen_drain(struct mh_gen *g, unsigned flags, double window, double spread)
{
    if (!mh_gen_draining(g)) {
        g->drain_window = window;
        g->drain_spread = spread;
    }
    mh_gen_stop(g, flags | MH_GEN_DRAINING);
}

void mh_gen_reseed(struct mh_gen *g)
{
    lua_Integer seed[2] = {0, 0};
    if (getrandom(seed, sizeof seed, 0) != (ssize_t)sizeof seed)
        seed[0] = (lua_Integer)getpid() ^ (lua_Integer)time(NULL);
    lua_State *L = g->L;
    lua_getglobal(L, "math");
    if (lua_getfield(L, -1, "randomseed") == LUA_TFUNCTION) {
        lua_pushinteger(L, seed[0]);
        lua_pushinteger(L, seed[1]);
        if (lua_pcall(L, 2, 0, 0) != LUA_OK)
            lua_pop(L, 1);
    } else {
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}
