#include "lua_shared.h"

#include "gcra.h"
#include "lua_opts.h"
#include "lua_type.h"
#include "lua_vm.h"
#include "shm_dict.h"

#include <lauxlib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DICT_MT      "moonhttp.SharedDict"
#define KEYS_MT      "moonhttp.SharedKeys"
#define KEYS_DEFAULT 1024 /* keys() without max, as OpenResty */

struct handle {
    struct mh_shm_dict *dict; /* resolved on first use once serving */
    char name[MH_SHM_NAME_MAX];
};

/*
 * The methods carry the dict metatable as upvalue 1: comparing it is
 * cheaper than luaL_checkudata's registry lookup by name, on every call.
 */
static struct handle *check_handle(lua_State *L)
{
    struct handle *h = lua_touserdata(L, 1);
    if (!h || !lua_getmetatable(L, 1) || !lua_rawequal(L, -1, lua_upvalueindex(1)))
        luaL_typeerror(L, 1, DICT_MT);
    lua_pop(L, 1);
    return h;
}

static struct mh_shm_dict *check_dict(lua_State *L)
{
    struct handle *h = check_handle(L);
    if (h->dict)
        return h->dict;
    const struct mh_shm_dicts *set = mh_gen_of(L)->shared;
    if (!set)
        luaL_error(L,
                   "http.shared.%s: shared dicts can be used once the server has started "
                   "(in handlers, not while the script loads)",
                   h->name);
    if (!(h->dict = mh_shm_dicts_find(set, h->name)))
        luaL_error(L,
                   "http.shared.%s: no such shared dict (declare it: http.server{ shared = { "
                   "%s = \"1m\" } })",
                   h->name, h->name);
    return h->dict;
}

static const char *check_key(lua_State *L, size_t *len)
{
    const char *k = luaL_checklstring(L, 2, len);
    luaL_argcheck(L, *len > 0, 2, "empty key");
    luaL_argcheck(L, *len <= MH_SHM_DICT_MAX_KEY, 2, "key longer than 65535 bytes");
    return k;
}

/* Seconds (optional, >= 0) to milliseconds, rounding a positive TTL up so it stays positive. */
static int64_t check_ttl(lua_State *L, int idx)
{
    if (lua_isnoneornil(L, idx))
        return 0;
    lua_Number s = luaL_checknumber(L, idx);
    luaL_argcheck(L, s >= 0 && s < 1e12, idx,
                  "ttl must be 0 (never) or a positive number of seconds");
    return (int64_t)ceil(s * 1000);
}

/*
 * An entry's owner: "worker" is the calling worker, whose exit (any: kill -9,
 * a crash, a stop, a reload's retirement) has the master remove the entry
 * (mh_shm_dict_forget_owner). nil: no owner.
 */
static int32_t check_owner(lua_State *L, int idx)
{
    if (lua_isnil(L, idx))
        return 0;
    const char *s = lua_tostring(L, idx);
    if (lua_type(L, idx) != LUA_TSTRING || strcmp(s, "worker") != 0)
        luaL_error(L, "dict:set: owner must be \"worker\" (the key goes when this worker exits)");
    return (int32_t)getpid();
}

/* A number, not a string that looks like one: a dict's numbers keep their Lua subtype. */
static void check_number(lua_State *L, int idx)
{
    if (lua_type(L, idx) != LUA_TNUMBER)
        luaL_typeerror(L, idx, "number");
}

static void to_value(lua_State *L, int idx, struct mh_shm_value *v)
{
    memset(v, 0, sizeof *v);
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        v->type = MH_SHM_STRING;
        v->str = lua_tolstring(L, idx, &v->len);
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            v->type = MH_SHM_INT;
            v->i = lua_tointeger(L, idx);
        } else {
            v->type = MH_SHM_FLOAT;
            v->d = lua_tonumber(L, idx);
        }
        break;
    case LUA_TBOOLEAN:
        v->type = MH_SHM_BOOL;
        v->i = lua_toboolean(L, idx);
        break;
    default:
        luaL_typeerror(L, idx, "string, number or boolean");
    }
}

static void push_value(lua_State *L, const struct mh_shm_value *v)
{
    switch (v->type) {
    case MH_SHM_INT:
        lua_pushinteger(L, v->i);
        break;
    case MH_SHM_FLOAT:
        lua_pushnumber(L, v->d);
        break;
    case MH_SHM_BOOL:
        lua_pushboolean(L, v->i != 0);
        break;
    case MH_SHM_STRING:
        lua_pushlstring(L, v->str, v->len);
        break;
    default:
        lua_pushnil(L);
    }
}

static int fail(lua_State *L, const char *err)
{
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
}

/* dict:get(k) → value or nil */
static int l_get(lua_State *L)
{
    struct mh_shm_dict *d = check_dict(L);
    size_t klen;
    const char *k = check_key(L, &klen);
    char small[512];
    struct mh_shm_value v;
    const char *err = mh_shm_dict_get(d, k, klen, &v, small, sizeof small);
    if (err)
        return fail(L, err);
    if (v.type != MH_SHM_STRING || v.len <= sizeof small) {
        push_value(L, &v);
        return 1;
    }
    /* Longer than the stack buffer: read again into Lua memory (outside the lock). */
    for (;;) {
        size_t want = v.len;
        luaL_Buffer b;
        char *p = luaL_buffinitsize(L, &b, want);
        if ((err = mh_shm_dict_get(d, k, klen, &v, p, want)))
            return fail(L, err);
        if (v.type != MH_SHM_STRING || v.len <= want) {
            if (v.type != MH_SHM_STRING) {
                push_value(L, &v);
                return 1;
            }
            luaL_pushresultsize(&b, v.len);
            return 1;
        }
        lua_pop(L, 1); /* it grew meanwhile: again */
    }
}

static int write_op(lua_State *L, enum mh_shm_mode mode)
{
    struct mh_shm_dict *d = check_dict(L);
    size_t klen;
    const char *k = check_key(L, &klen);
    if (mode == MH_SHM_SET && lua_isnoneornil(L, 3)) { /* set(k, nil) deletes, as OpenResty */
        const char *err = mh_shm_dict_delete(d, k, klen);
        if (err)
            return fail(L, err);
        lua_pushboolean(L, 1);
        return 1;
    }
    struct mh_shm_value v;
    to_value(L, 3, &v);
    int64_t ttl;
    if (lua_istable(L, 4)) { /* dict:set(k, v, { ttl =, owner = }) */
        static const char *const known[] = {"ttl", "owner", NULL};
        mh_lua_check_opts(L, 4, "dict:set", known, 1);
        lua_getfield(L, 4, "ttl");
        ttl = check_ttl(L, -1);
        lua_getfield(L, 4, "owner");
        v.owner = check_owner(L, -1);
        lua_pop(L, 2);
    } else {
        ttl = check_ttl(L, 4);
    }
    bool forced = false;
    const char *err = mh_shm_dict_write(d, mode, k, klen, &v, ttl, &forced);
    if (err)
        return fail(L, err);
    lua_pushboolean(L, 1);
    if (!forced)
        return 1;
    lua_pushnil(L);
    lua_pushboolean(L, 1); /* "forcible": live entries were evicted */
    return 3;
}

static int l_set(lua_State *L)
{
    return write_op(L, MH_SHM_SET);
}
static int l_add(lua_State *L)
{
    return write_op(L, MH_SHM_ADD);
}
static int l_replace(lua_State *L)
{
    return write_op(L, MH_SHM_REPLACE);
}

/* dict:incr(k, n [, init [, init_ttl]]) → new value */
static int l_incr(lua_State *L)
{
    struct mh_shm_dict *d = check_dict(L);
    size_t klen;
    const char *k = check_key(L, &klen);
    struct mh_shm_value by, init, out;
    check_number(L, 3);
    to_value(L, 3, &by);
    bool has_init = !lua_isnoneornil(L, 4);
    if (has_init) {
        check_number(L, 4);
        to_value(L, 4, &init);
    }
    int64_t ttl = check_ttl(L, 5);
    const char *err = mh_shm_dict_incr(d, k, klen, &by, has_init ? &init : NULL, ttl, &out);
    if (err)
        return fail(L, err);
    push_value(L, &out);
    return 1;
}

static int l_delete(lua_State *L)
{
    struct mh_shm_dict *d = check_dict(L);
    size_t klen;
    const char *k = check_key(L, &klen);
    const char *err = mh_shm_dict_delete(d, k, klen);
    if (err)
        return fail(L, err);
    lua_pushboolean(L, 1);
    return 1;
}

/* dict:ttl(k) → seconds left (0: never expires) */
static int l_ttl(lua_State *L)
{
    struct mh_shm_dict *d = check_dict(L);
    size_t klen;
    const char *k = check_key(L, &klen);
    int64_t ms;
    const char *err = mh_shm_dict_ttl(d, k, klen, &ms);
    if (err)
        return fail(L, err);
    lua_pushnumber(L, (lua_Number)ms / 1000);
    return 1;
}

static int l_expire(lua_State *L)
{
    struct mh_shm_dict *d = check_dict(L);
    size_t klen;
    const char *k = check_key(L, &klen);
    check_number(L, 3);
    const char *err = mh_shm_dict_expire(d, k, klen, check_ttl(L, 3));
    if (err)
        return fail(L, err);
    lua_pushboolean(L, 1);
    return 1;
}

/*
 * Keys are gathered under the dict's lock into a C buffer (no Lua call may
 * raise while the lock is held), boxed in a userdata so a later Lua error
 * frees it, then pushed.
 */
struct keys_box {
    char *data;
    size_t len, cap;
    int failed;
};

static int keys_box_gc(lua_State *L)
{
    struct keys_box *b = luaL_checkudata(L, 1, KEYS_MT);
    free(b->data);
    b->data = NULL;
    return 0;
}

static void gather_key(void *ud, const char *key, size_t klen)
{
    struct keys_box *b = ud;
    size_t need = b->len + sizeof(uint32_t) + klen;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < need)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->data = p;
        b->cap = cap;
    }
    uint32_t n = (uint32_t)klen;
    memcpy(b->data + b->len, &n, sizeof n);
    memcpy(b->data + b->len + sizeof n, key, klen);
    b->len = need;
}

/* dict:keys([max]) → list of keys, most recently used first; max 0: all (default 1024) */
static int l_keys(lua_State *L)
{
    struct mh_shm_dict *d = check_dict(L);
    lua_Integer max = luaL_optinteger(L, 2, KEYS_DEFAULT);
    luaL_argcheck(L, max >= 0, 2, "max must be 0 (all) or positive");
    struct keys_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    memset(b, 0, sizeof *b);
    luaL_setmetatable(L, KEYS_MT);
    const char *err = mh_shm_dict_keys(d, (size_t)max, gather_key, b);
    if (err)
        return fail(L, err);
    if (b->failed)
        return luaL_error(L, "not enough memory");
    lua_newtable(L);
    lua_Integer i = 0;
    for (size_t off = 0; off < b->len;) {
        uint32_t n;
        memcpy(&n, b->data + off, sizeof n);
        lua_pushlstring(L, b->data + off + sizeof n, n);
        lua_rawseti(L, -2, ++i);
        off += sizeof n + n;
    }
    return 1;
}

static int l_flush_all(lua_State *L)
{
    const char *err = mh_shm_dict_flush_all(check_dict(L));
    if (err)
        return fail(L, err);
    return 0;
}

static int l_free_space(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)mh_shm_dict_free_space(check_dict(L)));
    return 1;
}

struct gcra_args {
    int64_t emission, tolerance, cost; /* microseconds, microseconds, units */
    bool allowed;
    int64_t ahead; /* the TAT after, less now (us): how long until the key's quota is whole */
};

/*
 * mh_shm_dict_update's fn: the GCRA of gcra.h over the TAT stored at the
 * key, in microseconds of the dict's clock (whose resolution is a
 * millisecond), so an emission interval below a millisecond (a limit of
 * 5,000 a second) keeps its rate.
 */
static bool gcra_update(void *ud, const struct mh_shm_value *cur, int64_t now_ms,
                        struct mh_shm_value *out, int64_t *ttl_ms)
{
    struct gcra_args *a = ud;
    int64_t now = now_ms * 1000;
    int64_t tat = cur->type == MH_SHM_INT ? cur->i : now;
    int64_t after;
    a->allowed = mh_gcra_take(tat, now, a->emission, a->tolerance, a->cost, &after);
    a->ahead = after - now;
    if (!a->allowed || a->ahead <= 0)
        return false;
    out->type = MH_SHM_INT;
    out->i = after;
    /* gone once the quota is whole again: an idle key costs no memory */
    *ttl_ms = (a->ahead + 999) / 1000;
    return true;
}

/*
 * core.shared_gcra(dict, key, emission_us, tolerance_us, cost) → allowed, ahead_us | nil, err:
 * moonhttp.ratelimit's local backend, one locked step per check.
 */
static int l_gcra(lua_State *L)
{
    struct mh_shm_dict *d = check_dict(L);
    size_t klen;
    const char *k = check_key(L, &klen);
    struct gcra_args a = {.emission = luaL_checkinteger(L, 3),
                          .tolerance = luaL_checkinteger(L, 4),
                          .cost = luaL_checkinteger(L, 5)};
    luaL_argcheck(L, a.emission >= 1, 3, "emission must be >= 1 us");
    luaL_argcheck(L, a.tolerance >= 0, 4, "tolerance must be >= 0 us");
    luaL_argcheck(L, a.cost >= 0, 5, "cost must be >= 0");
    const char *err = mh_shm_dict_update(d, k, klen, gcra_update, &a);
    if (err)
        return fail(L, err);
    lua_pushboolean(L, a.allowed);
    lua_pushinteger(L, a.ahead);
    return 2;
}

static int l_tostring(lua_State *L)
{
    struct handle *h = check_handle(L);
    lua_pushfstring(L, "http.shared.%s", h->name);
    return 1;
}

/* http.shared.name: a handle, made once per name and kept in the table. */
static int l_shared_index(lua_State *L)
{
    size_t len;
    const char *name = luaL_checklstring(L, 2, &len);
    const struct mh_shm_dicts *set = mh_gen_of(L)->shared;
    if (len >= MH_SHM_NAME_MAX || (set && !mh_shm_dicts_find(set, name)))
        return luaL_error(L,
                          "http.shared.%s: no such shared dict (declare it: http.server{ "
                          "shared = { %s = \"1m\" } })",
                          name, name);
    struct handle *h = lua_newuserdatauv(L, sizeof *h, 0);
    h->dict = NULL;
    memcpy(h->name, name, len + 1);
    luaL_setmetatable(L, DICT_MT);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, -2);
    lua_rawset(L, 1);
    return 1;
}

void mh_lua_shared_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"get", l_get},
        {"set", l_set},
        {"add", l_add},
        {"replace", l_replace},
        {"incr", l_incr},
        {"delete", l_delete},
        {"ttl", l_ttl},
        {"expire", l_expire},
        {"keys", l_keys},
        {"flush_all", l_flush_all},
        {"free_space", l_free_space},
        {NULL, NULL},
    };
    if (luaL_newmetatable(L, DICT_MT)) {
        luaL_newlibtable(L, methods);
        lua_pushvalue(L, -2);
        luaL_setfuncs(L, methods, 1);
        lua_setfield(L, -2, "__index");
        lua_pushvalue(L, -1);
        lua_pushcclosure(L, l_tostring, 1);
        lua_setfield(L, -2, "__tostring");
    }
    lua_pushcclosure(L, l_gcra, 1);
    lua_setfield(L, -2, "shared_gcra");
    static const luaL_Reg keys_meta[] = {{"__gc", keys_box_gc}, {NULL, NULL}};
    mh_lua_register_type(L, &(struct mh_lua_type){.name = KEYS_MT, .meta = keys_meta});
    lua_newtable(L); /* core.shared */
    lua_newtable(L);
    lua_pushcfunction(L, l_shared_index);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    lua_setfield(L, -2, "shared");
}
