/*
 * http.channel(name): see lua_channel.h. A subscription is a userdata that
 * embeds its C subscription (base/channel.h); receive follows the yield
 * template with the waiting task's own timer for the timeout and the
 * wake-up, as moonhttp.waiter does (`woken` tells them apart). A subscription
 * belongs to the task that made it, so a handler that ends without closing
 * it stops receiving at once instead of filling a queue until the GC.
 */
#include "lua_channel.h"

#include "channel.h"
#include "lua_opts.h"
#include "lua_sched.h"
#include "lua_type.h"
#include "lua_vm.h"

#include <lauxlib.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define CHANNEL_MT    "moonhttp.Channel"
#define SUB_MT        "moonhttp.Subscription"
#define QUEUE_DEFAULT 128
#define QUEUE_MAX     65536

static const char REMOTE_KEY = 'p'; /* registry: the cluster's publish(name, msg), if any */

/*
 * A channel kept to this server even with a cluster ({ cluster = false }:
 * the response cache's lock releases) has its name in the zone behind a
 * zero byte, a name no cluster channel has: the relay leaves such names
 * alone and no message from Redis reaches them.
 */
#define CHANNEL_NAME_MAX (MH_SHM_CHAN_NAME_MAX - 1)

struct lchan {
    uint32_t id; /* 0: not looked up yet (the script may make channels while it loads) */
    bool local_only;
    size_t len; /* of name, the mark included */
    char name[MH_SHM_CHAN_NAME_MAX];
};

struct lsub {
    struct mh_chan_sub s;
    struct mh_task *task; /* receiving now, or NULL */
    bool woken;           /* a message, a miss or a close reached the receiving task */
    bool stopping;        /* a stop, or a reload that retired gen, began */
    const struct mh_gen *gen;
    struct mh_task_link owner;
};

static struct mh_chan_endpoint *endpoint(lua_State *L, const char *what)
{
    const struct mh_gen *g = mh_gen_of(L);
    struct mh_chan_endpoint *ep = g->host ? g->host->channels : NULL;
    if (!ep || !ep->shm)
        luaL_error(L,
                   "%s: channels can be used once the server has started (in handlers, timers "
                   "or on_start, not while the script loads)",
                   what);
    return ep;
}

/* The channel's id in the shared zone; nil, err pushed (returns false) when it cannot have one. */
static bool resolve(lua_State *L, struct lchan *c, struct mh_chan_endpoint *ep)
{
    if (c->id)
        return true;
    const char *err = mh_chan_lookup(ep, c->name, c->len, &c->id);
    if (!err)
        return true;
    lua_pushnil(L);
    lua_pushstring(L, err);
    return false;
}

/* http.channel(name [, { cluster = false }]) */
static int l_channel(lua_State *L)
{
    static const char *const known[] = {"cluster", NULL};
    size_t len;
    const char *name = luaL_checklstring(L, 1, &len);
    luaL_argcheck(L, len > 0 && len <= CHANNEL_NAME_MAX, 1, "a channel name is 1 to 64 bytes");
    luaL_argcheck(L, name[0] != 0, 1, "a channel name does not start with a zero byte");
    bool local_only = false;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        mh_lua_check_opts(L, 2, "http.channel", known, 1);
        local_only = lua_getfield(L, 2, "cluster") == LUA_TBOOLEAN && !lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    struct lchan *c = lua_newuserdatauv(L, sizeof *c, 0);
    c->id = 0;
    c->local_only = local_only;
    c->len = len + local_only;
    c->name[0] = 0;
    memcpy(c->name + local_only, name, len);
    luaL_setmetatable(L, CHANNEL_MT);
    return 1;
}

static int publish_done(lua_State *L, int status, lua_KContext ctx)
{
    (void)status;
    (void)ctx;
    return lua_gettop(L) - 2;
}

/*
 * ch:publish(msg) -> true, or nil, "too large" | "too many channels" | "lock lost"; with a
 * cluster, the cluster's publish(name, msg) answers (lua/moonhttp/cluster.lua).
 */
static int l_publish(lua_State *L)
{
    struct lchan *c = luaL_checkudata(L, 1, CHANNEL_MT);
    size_t len;
    const char *msg = luaL_checklstring(L, 2, &len);
    struct mh_chan_endpoint *ep = endpoint(L, "ch:publish");
    lua_settop(L, 2);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &REMOTE_KEY) == LUA_TFUNCTION && !c->local_only) {
        if (len > MH_SHM_CHAN_MSG_MAX) {
            lua_pushnil(L);
            lua_pushstring(L, mh_shm_chan_err_too_large);
            return 2;
        }
        lua_pushlstring(L, c->name, c->len);
        lua_pushvalue(L, 2);
        lua_callk(L, 2, LUA_MULTRET, 0, publish_done);
        return publish_done(L, LUA_OK, 0);
    }
    if (!resolve(L, c, ep))
        return 2;
    const char *err = mh_chan_publish(ep, c->id, msg, len);
    if (err == mh_shm_chan_err_stale) { /* nobody listened: the name was retired */
        c->id = 0;
        if (!resolve(L, c, ep))
            return 2;
        err = mh_chan_publish(ep, c->id, msg, len);
    }
    if (err) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static void wake(struct lsub *u)
{
    if (u->task && !u->woken) {
        u->woken = true;
        mh_task_wake(u->task);
    }
}

static void on_message(struct mh_chan_sub *s)
{
    wake(s->ud);
}

static void sub_close(struct lsub *u)
{
    mh_chan_unsubscribe(&u->s);
    mh_task_unlink(&u->owner);
    wake(u); /* another task receiving on it hears "closed" */
}

static void on_owner_end(struct mh_task_link *l)
{
    sub_close((struct lsub *)((char *)l - offsetof(struct lsub, owner)));
}

/* ch:subscribe([{ queue = n }]) -> a subscription, or nil, err */
static int l_subscribe(lua_State *L)
{
    static const char *const known[] = {"queue", NULL};
    struct lchan *c = luaL_checkudata(L, 1, CHANNEL_MT);
    lua_Integer queue = QUEUE_DEFAULT;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        mh_lua_check_opts(L, 2, "ch:subscribe", known, 1);
        if (lua_getfield(L, 2, "queue") != LUA_TNIL) {
            int ok;
            queue = lua_tointegerx(L, -1, &ok);
            luaL_argcheck(L, ok && queue >= 1 && queue <= QUEUE_MAX, 2,
                          "queue must be an integer from 1 to 65536");
        }
        lua_pop(L, 1);
    }
    struct mh_chan_endpoint *ep = endpoint(L, "ch:subscribe");
    if (!resolve(L, c, ep))
        return 2;
    struct lsub *u = lua_newuserdatauv(L, sizeof *u, 0);
    memset(u, 0, sizeof *u);
    u->gen = mh_gen_of(L);
    u->s.on_message = on_message;
    u->s.ud = u;
    u->owner.release = on_owner_end;
    luaL_setmetatable(L, SUB_MT);
    const char *err = mh_chan_subscribe(ep, &u->s, c->id, (unsigned)queue);
    if (err == mh_shm_chan_err_stale) { /* its last listener left since the lookup */
        c->id = 0;
        err = mh_chan_lookup(ep, c->name, c->len, &c->id);
        if (!err)
            err = mh_chan_subscribe(ep, &u->s, c->id, (unsigned)queue);
    }
    if (err) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    struct mh_task *t = mh_task_current(L);
    if (t)
        mh_task_adopt(t, &u->owner);
    return 1;
}

/* What a receive returns without waiting, or 0 when it must wait. */
static int push_ready(lua_State *L, struct lsub *u)
{
    if (u->stopping || mh_gen_stopping(u->gen)) {
        lua_pushnil(L);
        lua_pushliteral(L, "stopping");
        return 2;
    }
    if (u->s.missed) {
        lua_pushnil(L);
        lua_pushliteral(L, "missed");
        lua_pushinteger(L, (lua_Integer)u->s.missed);
        u->s.missed = 0;
        return 3;
    }
    struct mh_chan_msg *m = mh_chan_pop(&u->s);
    if (m && m->gap) {
        mh_chan_msg_unref(m);
        lua_pushnil(L);
        lua_pushliteral(L, "gap");
        return 2;
    }
    if (m) {
        lua_pushlstring(L, m->data, m->len);
        mh_chan_msg_unref(m);
        return 1;
    }
    if (!u->s._ch) {
        lua_pushnil(L);
        lua_pushliteral(L, "closed");
        return 2;
    }
    return 0;
}

static int resume_receive(struct mh_task *t, lua_State *co)
{
    struct lsub *u = t->wait_data;
    u->task = NULL;
    int n = u->woken ? push_ready(co, u) : 0;
    u->woken = false;
    if (n)
        return n;
    lua_pushnil(co);
    lua_pushliteral(co, "timeout");
    return 2;
}

static void cancel_receive(struct mh_task *t)
{
    struct lsub *u = t->wait_data;
    u->task = NULL;
    u->woken = false;
}

/* sub:receive([timeout]) -> msg | nil, "missed", n | nil, "timeout" | "closed" | "stopping" */
static int l_receive(lua_State *L)
{
    struct lsub *u = luaL_checkudata(L, 1, SUB_MT);
    double timeout = luaL_optnumber(L, 2, 0);
    luaL_argcheck(L, timeout >= 0, 2, "timeout must be >= 0 seconds (0: none)");
    if (u->task)
        return luaL_error(L, "sub:receive: another task is receiving on this subscription");
    int n = push_ready(L, u);
    if (n)
        return n;
    struct mh_task *t = mh_task_check(L, "sub:receive");
    u->task = t;
    u->woken = false;
    if (timeout > 0)
        mh_task_wake_in(t, timeout);
    return mh_task_wait(L, t, resume_receive, cancel_receive, u);
}

/* close(), <close> and __gc */
static int l_close(lua_State *L)
{
    sub_close(luaL_checkudata(L, 1, SUB_MT));
    return 0;
}

static int l_chan_tostring(lua_State *L)
{
    struct lchan *c = luaL_checkudata(L, 1, CHANNEL_MT);
    lua_pushliteral(L, "channel ");
    lua_pushlstring(L, c->name + c->local_only, c->len - c->local_only); /* not NUL-terminated */
    lua_concat(L, 2);
    return 1;
}

static int l_name(lua_State *L)
{
    struct lchan *c = luaL_checkudata(L, 1, CHANNEL_MT);
    lua_pushlstring(L, c->name + c->local_only, c->len - c->local_only);
    return 1;
}

static void stop_sub(struct mh_chan_sub *s, void *ud)
{
    struct lsub *u = s->ud;
    if (u->gen == ud) {
        u->stopping = true;
        wake(u);
    }
}

/* g stops serving: its subscriptions' receives answer nil, "stopping". */
static void on_gen_stop(struct mh_gen *g, unsigned added)
{
    if ((added & MH_GEN_STOPPING) && g->host && g->host->channels)
        mh_chan_each_sub(g->host->channels, stop_sub, g);
}

/*
 * The relay of a cluster (lua/moonhttp/cluster.lua): ch:publish goes to
 * Redis through core.channel_remote's function; the one worker of the
 * instance that holds the Redis subscription hands what arrives to the
 * shared zone with core.channel_relay, which fans it out as a local publish.
 */

/* core.channel_remote(fn): ch:publish(msg) becomes fn(name, msg) in this Lua state. */
static int l_channel_remote(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lua_settop(L, 1);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &REMOTE_KEY);
    return 0;
}

/*
 * core.channel_relay(name, msg | nil) -> true | false: msg (nil: a gap
 * notice) to this server's subscribers of name; false when none listens.
 */
static int l_channel_relay(lua_State *L)
{
    size_t nlen, len = 0;
    const char *name = luaL_checklstring(L, 1, &nlen);
    const char *msg = lua_isnil(L, 2) ? NULL : luaL_checklstring(L, 2, &len);
    struct mh_chan_endpoint *ep = endpoint(L, "channel_relay");
    uint32_t id = mh_shm_chan_find(ep->shm, name, nlen);
    lua_pushboolean(L, id && !mh_shm_chan_publish(ep->shm, id, msg, len, NULL));
    return 1;
}

/* The names mh_shm_chan_listened gives, copied out: no Lua allocation under the zone's lock. */
struct names {
    char *buf;
    size_t len, cap;
    bool failed;
};

static void add_name(void *ud, const char *name, size_t len)
{
    struct names *n = ud;
    if (n->len + len + 1 > n->cap) {
        size_t cap = (n->cap ? n->cap * 2 : 4096) + len + 1;
        char *b = realloc(n->buf, cap);
        if (!b) {
            n->failed = true;
            return;
        }
        n->buf = b;
        n->cap = cap;
    }
    n->buf[n->len++] = (char)len;
    memcpy(n->buf + n->len, name, len);
    n->len += len;
}

/*
 * core.channel_listened(version) -> nil when the set of names listened to
 * on this server is still the one of version, else its version, { names }.
 */
static int l_channel_listened(lua_State *L)
{
    lua_Integer seen = luaL_optinteger(L, 1, -1);
    struct mh_chan_endpoint *ep = endpoint(L, "channel_listened");
    uint64_t v = mh_shm_chan_listen_version(ep->shm);
    if ((lua_Integer)v == seen)
        return 0;
    struct names n = {0};
    const char *err = mh_shm_chan_listened(ep->shm, add_name, &n);
    if (err || n.failed) {
        free(n.buf);
        return luaL_error(L, "channel_listened: %s", err ? err : "no memory");
    }
    lua_pushinteger(L, (lua_Integer)v);
    lua_newtable(L);
    lua_Integer i = 0;
    for (size_t p = 0; p < n.len; p += 1 + (unsigned char)n.buf[p]) {
        lua_pushlstring(L, n.buf + p + 1, (unsigned char)n.buf[p]);
        lua_rawseti(L, -2, ++i);
    }
    free(n.buf);
    return 2;
}

/* core.channel_relay_started() -> how many relays into this server's zone started before. */
static int l_channel_relay_started(lua_State *L)
{
    struct mh_chan_endpoint *ep = endpoint(L, "channel_relay_started");
    lua_pushinteger(L, (lua_Integer)mh_shm_chan_relay_started(ep->shm));
    return 1;
}

void mh_channel_open(lua_State *L)
{
    mh_gen_on_stop(mh_gen_of(L), on_gen_stop);
    static const luaL_Reg chan_methods[] = {
        {"publish", l_publish},
        {"subscribe", l_subscribe},
        {"name", l_name},
        {NULL, NULL},
    };
    static const luaL_Reg sub_methods[] = {
        {"receive", l_receive},
        {"close", l_close},
        {NULL, NULL},
    };
    static const luaL_Reg chan_meta[] = {{"__tostring", l_chan_tostring}, {NULL, NULL}};
    static const luaL_Reg sub_meta[] = {{"__gc", l_close}, {"__close", l_close}, {NULL, NULL}};
    mh_lua_register_type(
        L, &(struct mh_lua_type){.name = CHANNEL_MT, .methods = chan_methods, .meta = chan_meta});
    mh_lua_register_type(
        L, &(struct mh_lua_type){.name = SUB_MT, .methods = sub_methods, .meta = sub_meta});
    static const luaL_Reg fns[] = {
        {"channel", l_channel},
        {"channel_remote", l_channel_remote},
        {"channel_relay", l_channel_relay},
        {"channel_listened", l_channel_listened},
        {"channel_relay_started", l_channel_relay_started},
        {NULL, NULL},
    };
    luaL_setfuncs(L, fns, 0);
}
