#include "lua_handler.h"
#include "lua_proxy_body.h"

#include "dispatch.h"
#include "log.h"
#include "lua_errors.h"
#include "lua_sched.h"
#include "lua_type.h"
#include "lua_vm.h"
#include "metrics.h"
#include "relay.h"
#include "req.h"
#include "ws.h"

#include <lauxlib.h>
#include <stdint.h>
#include <stdlib.h>

#define HANDLER_MT "moonhttp.Handler"

/* ---- the app: generation pinning and dispatch --------------------------- */

static void app_end(struct mh_req *r)
{
    mh_gen_unref(r->owner);
}

static void app_start(const struct mh_handler *h, struct mh_req *r)
{
    const struct mh_lua_app *a = (const struct mh_lua_app *)h;
    struct mh_gen *g = *a->current;
    /* The request keeps the generation it started on, however many reloads come. */
    mh_gen_ref(g);
    r->owner = g;
    r->on_end = app_end;
    if (g->config->dev)
        mh_lua_dev_headers(g, r);
    mh_dispatch(r, &g->site);
}

static const struct mh_handler_ops app_ops = {.name = "app", .start = app_start};

void mh_lua_app_init(struct mh_lua_app *a, struct mh_gen *const *current)
{
    a->base.ops = &app_ops;
    a->current = current;
}

struct mh_gen *mh_lua_request_gen(const struct mh_req *r)
{
    return r->on_end == app_end ? r->owner : NULL;
}

/* ---- Lua functions as route handlers ------------------------------------- */

struct mh_lua_route {
    struct mh_handler base;
    struct mh_gen *gen;
    int ref;
    bool pass_allow;
    struct mh_lua_route *next; /* the generation's list, freed with it */
};

static void route_start(const struct mh_handler *h, struct mh_req *r)
{
    const struct mh_lua_route *lr = (const struct mh_lua_route *)h;
    if (lr->pass_allow)
        mh_task_start_handler(lr->gen, r, lr->ref, r->routed.allow, r->routed.allow_len);
    else
        mh_task_start_handler(lr->gen, r, lr->ref, NULL, 0);
}

static void route_on_body(struct mh_req *r)
{
    if (r->handler_data)
        mh_task_on_body(r->handler_data);
}

static void route_on_writable(struct mh_req *r)
{
    if (r->handler_data)
        mh_task_on_writable(r->handler_data);
}

static void route_on_abort(struct mh_req *r)
{
    if (r->handler_data)
        mh_task_on_abort(r->handler_data);
}

static const struct mh_handler_ops route_ops = {
    .name = "lua",
    .start = route_start,
    .on_body = route_on_body,
    .on_writable = route_on_writable,
    .on_abort = route_on_abort,
};

/* A stop: a Lua handler streaming r hears "stopping" (others: nothing). */
static void request_stopping(struct mh_req *r)
{
    const struct mh_handler *h = r->handler;
    struct mh_task *t = r->handler_data;
    struct mh_ws *ws = mh_ws_of(r);
    if (ws) {
        h = ws->inner; /* the route's handler, behind the WebSocket's */
        /*
         * Close 1001: a handler waiting on this WebSocket (lua_ws.c waits
         * with its session as the wait's data) ends with the closing
         * handshake, "closed" as before.
         */
        bool on_ws = t && t->wait == MH_WAIT_CALL && t->wait_data == ws->ud;
        mh_ws_request_stopping(r);
        if (on_ws)
            return;
    } else if (mh_relay_inner(r)) {
        h = mh_relay_inner(r); /* an upgrade relay (relay.c): its task hears "stopping" */
    } else if (mh_lua_proxy_body_inner(r)) {
        h = mh_lua_proxy_body_inner(r); /* http.proxy's body relay: likewise */
    }
    /* A handler waiting elsewhere (a channel, a Redis read, a sleep) hears "stopping". */
    if (h && h->ops == &route_ops && t)
        mh_task_stop_stream(t);
}

/* r->owner is the generation the app dispatched r on (app_end drops it). */
static void request_of_gen_stopping(struct mh_req *r, void *gen)
{
    if (r->owner == gen)
        request_stopping(r);
}

/* The process stops: generations a reload left draining stop with the current one. */
static void older_gen_stopping(struct mh_req *r, void *gen)
{
    struct mh_gen *owner = r->owner;
    if (owner && owner != gen && !mh_gen_stopping(owner))
        mh_gen_stop(owner, MH_GEN_ASKED | MH_GEN_STOPPING);
}

/* A stop was asked for: generations a reload left draining hear it too (their window is cut). */
static void older_gen_asked(struct mh_req *r, void *gen)
{
    struct mh_gen *owner = r->owner;
    if (owner && owner != gen)
        mh_gen_stop(owner, MH_GEN_ASKED);
}

/*
 * ---- draining: a retired generation's long-lived requests ----------------
 *
 * For drain_window seconds they go on (a reload is no reconnect storm);
 * then each one is stopped at its own moment of the next drain_spread
 * seconds, a hash of the request and a per-generation seed: a few closes
 * per tick instead of all in one, and clients reconnecting at the moments
 * they were closed. The timer does not keep the generation: its last
 * request's end frees it (mh_lua_handlers_free stops the timer).
 */
#define DRAIN_TICK 0.01 /* a close lands within 10 ms of its moment */

static double drain_moment(const struct mh_gen *g, const struct mh_req *r)
{
    uint64_t x = (uint64_t)(uintptr_t)r ^ g->_drain_seed; /* splitmix64's finalizer */
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    x ^= x >> 31;
    return g->_drain_from + g->drain_spread * ((double)(x >> 11) / 9007199254740992.0);
}

struct drain_step {
    struct mh_gen *g;
    double upto; /* stop those whose moment is in (g->_drain_done, upto] */
    size_t n;
};

static void drain_request(struct mh_req *r, void *ud)
{
    struct drain_step *s = ud;
    if (r->owner != s->g)
        return;
    s->n++;
    double at = drain_moment(s->g, r);
    if (at > s->g->_drain_done && at <= s->upto)
        request_stopping(r);
}

static void count_request(struct mh_req *r, void *ud)
{
    struct drain_step *s = ud;
    if (r->owner == s->g)
        s->n++;
}

static size_t gen_requests(struct mh_gen *g)
{
    struct drain_step s = {.g = g};
    g->host->each_request(g->host, count_request, &s);
    return s.n;
}

static void on_drain_tick(struct ev_loop *loop, ev_timer *w, int revents)
{
    struct mh_gen *g = w->data;
    (void)revents;
    double now = ev_now(loop);
    mh_gen_ref(g); /* a stopped request may end the last other reference */
    if (g->_drain_from == 0) {
        g->_drain_from = now;
        g->_drain_done = -1;
        mh_log(MH_LOG_INFO,
               "drain: the window ended; closing the %zu requests still open over %g s "
               "(drain_spread)",
               gen_requests(g), g->drain_spread);
    }
    if (now >= g->_drain_from + g->drain_spread) {
        mh_gen_stop(g, MH_GEN_STOPPING); /* what is left, and its subscriptions (stops w) */
    } else {
        struct drain_step s = {.g = g, .upto = now};
        g->host->each_request(g->host, drain_request, &s);
        g->_drain_done = now;
    }
    mh_gen_unref(g);
}

/*
 * g's requests' part of a stop: retired with a drain, its long-lived
 * requests go on and the drain's clock starts; stopping, its WebSockets
 * close with 1001 and its streams hear "stopping" (and the process's stop
 * ends the drains of older generations too).
 */
static void on_gen_stop(struct mh_gen *g, unsigned added)
{
    if (!g->host || !g->host->each_request)
        return;
    struct ev_loop *loop = mh_gen_loop(g);
    if ((added & MH_GEN_DRAINING) && !(g->stop & MH_GEN_STOPPING)) {
        g->_drain_seed = (uint64_t)(ev_time() * 1e6) ^ (uint64_t)(uintptr_t)g;
        g->_drain_from = 0;
        ev_timer_init(&g->_drain_timer, on_drain_tick, g->drain_window, DRAIN_TICK);
        g->_drain_timer.data = g;
        ev_timer_start(loop, &g->_drain_timer);
        size_t n = gen_requests(g);
        if (n)
            mh_log(MH_LOG_INFO, "drain: %zu requests of the %s code stay open for up to %g s", n,
                   (g->stop & MH_GEN_RETIRED) ? "replaced" : "stopping", g->drain_window);
    }
    /*
     * A stop asked of code already draining (a reload's window of minutes):
     * the drain ends within shutdown_timeout, as the stop's own; a spread
     * under way goes on.
     */
    if ((added & MH_GEN_ASKED) && !(added & MH_GEN_DRAINING) && mh_gen_draining(g) &&
        !(g->stop & MH_GEN_STOPPING) && g->_drain_from == 0 &&
        ev_timer_remaining(loop, &g->_drain_timer) + g->drain_spread >
            g->config->shutdown_timeout) {
        g->drain_spread = mh_stop_drain_spread(g->config);
        ev_timer_stop(loop, &g->_drain_timer);
        ev_timer_set(&g->_drain_timer, g->config->shutdown_timeout - g->drain_spread, DRAIN_TICK);
        ev_timer_start(loop, &g->_drain_timer);
    }
    if ((added & MH_GEN_ASKED) && !(g->stop & MH_GEN_RETIRED))
        g->host->each_request(g->host, older_gen_asked, g);
    if (added & MH_GEN_STOPPING) {
        ev_timer_stop(loop, &g->_drain_timer);
        g->host->each_request(g->host, request_of_gen_stopping, g);
        if (!(g->stop & MH_GEN_RETIRED))
            g->host->each_request(g->host, older_gen_stopping, g);
    }
}

/* ---- C handlers as Lua values -------------------------------------------- */

struct handler_ud {
    struct mh_handler *h;
    void (*free_fn)(struct mh_handler *h);
};

static const char HANDLER_MT_KEY = 0;

static int handler_gc(lua_State *L)
{
    struct handler_ud *u = lua_touserdata(L, 1);
    if (u->h && u->free_fn)
        u->free_fn(u->h);
    u->h = NULL;
    return 0;
}

/* handler(req, res) from middleware: the C handler takes the request over when the task ends. */
static int handler_call(lua_State *L)
{
    struct handler_ud *u = lua_touserdata(L, 1);
    struct mh_task *t = mh_task_current(L);
    if (!t || !t->request)
        return luaL_error(L, "a C handler can only be called from a request handler");
    if (t->handoff)
        return luaL_error(L, "a C handler was already called for this request");
    t->handoff = u->h;
    return 0;
}

static int handler_tostring(lua_State *L)
{
    struct handler_ud *u = lua_touserdata(L, 1);
    lua_pushfstring(L, HANDLER_MT " (%s)", u->h ? u->h->ops->name : "freed");
    return 1;
}

void mh_lua_push_handler(lua_State *L, struct mh_handler *h, void (*free_fn)(struct mh_handler *))
{
    struct handler_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->h = h;
    u->free_fn = free_fn;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &HANDLER_MT_KEY);
    lua_setmetatable(L, -2);
}

struct mh_handler *mh_lua_to_handler(lua_State *L, int idx)
{
    struct handler_ud *u = lua_touserdata(L, idx);
    if (!u || !lua_getmetatable(L, idx))
        return NULL;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &HANDLER_MT_KEY);
    bool same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? u->h : NULL;
}

int mh_lua_handler_register(lua_State *L, struct mh_gen *g, int idx, bool pass_allow,
                            const struct mh_handler **out)
{
    struct mh_handler *c = mh_lua_to_handler(L, idx);
    const struct mh_handler *h;
    if (c) {
        /* The value stays referenced (so not collected) for the generation's life. */
        lua_pushvalue(L, idx);
        luaL_ref(L, LUA_REGISTRYINDEX);
        h = c;
    } else {
        struct mh_lua_route *lr = calloc(1, sizeof *lr);
        if (!lr)
            return -1;
        lr->base.ops = &route_ops;
        lr->gen = g;
        lr->pass_allow = pass_allow;
        lua_pushvalue(L, idx);
        lr->ref = luaL_ref(L, LUA_REGISTRYINDEX);
        lr->next = g->_lua_routes;
        g->_lua_routes = lr;
        h = &lr->base;
    }
    if (out)
        *out = h;
    return mh_handler_table_add(&g->handlers, h);
}

void mh_lua_handlers_free(struct mh_gen *g)
{
    ev_timer_stop(mh_gen_loop(g), &g->_drain_timer);
    while (g->_lua_routes) {
        struct mh_lua_route *lr = g->_lua_routes;
        g->_lua_routes = lr->next;
        free(lr);
    }
    mh_handler_table_free(&g->handlers);
}

/* core.is_handler(v): whether v is a C handler (http.handle accepts it as a handler). */
static int l_is_handler(lua_State *L)
{
    lua_pushboolean(L, mh_lua_to_handler(L, 1) != NULL);
    return 1;
}

void mh_lua_handler_open(lua_State *L)
{
    static const luaL_Reg meta[] = {
        {"__gc", handler_gc},
        {"__call", handler_call},
        {"__tostring", handler_tostring},
        {NULL, NULL},
    };
    mh_lua_register_type(L, &(struct mh_lua_type){.name = HANDLER_MT, .meta = meta});
    mh_gen_on_stop(mh_gen_of(L), on_gen_stop);
    luaL_getmetatable(L, HANDLER_MT);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &HANDLER_MT_KEY);
    lua_pushcfunction(L, l_is_handler);
    lua_setfield(L, -2, "is_handler");
}
