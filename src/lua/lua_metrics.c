#include "lua_metrics.h"

#include "app_metrics.h"
#include "log.h"
#include "lua_opts.h"
#include "metrics.h"
#include "utf8.h"

#include <lauxlib.h>
#include <math.h>
#include <string.h>

#define COUNTER_MT         "moonhttp.Counter"
#define GAUGE_MT           "moonhttp.Gauge"
#define HISTOGRAM_MT       "moonhttp.Histogram"
#define MAX_SERIES_DEFAULT 100

static const char LIST_KEY = 'm'; /* registry: this state's metrics, registered once serving */

static const char err_none[] = "metrics not available";
static const char err_value[] = "bad label value";
static const char err_long[] = "label values too long";

/*
 * One declared metric. `family` and `single` are found in the shared table on
 * the first registration or update once serving; a failure there is kept in
 * `broken` and returned by every update (logged once). The uservalue is a
 * cache: packed label values → series index, so a hot update costs a string
 * and a table lookup rather than a probe of the shared table.
 */
struct metric {
    struct mh_app_family_spec spec;
    struct mh_app_metrics *table;
    int family; /* -1: not yet registered */
    int single; /* without labels: the one series; -1 until known */
    const char *broken;
    bool warned_series;
};

static const double default_buckets[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

static const char *type_name(enum mh_app_metric_type t)
{
    return t == MH_APP_COUNTER ? "http.metrics.counter"
           : t == MH_APP_GAUGE ? "http.metrics.gauge"
                               : "http.metrics.histogram";
}

/* Closures carry the env function as an upvalue: a full userdata holding the pointer. */
static struct mh_lua_metrics_env env_of(lua_State *L, int upvalue)
{
    mh_lua_metrics_env_fn *fn = lua_touserdata(L, lua_upvalueindex(upvalue));
    return (*fn)(L);
}

/* ---- declaration --------------------------------------------------------- */

static void read_labels(lua_State *L, int idx, struct mh_app_family_spec *spec, const char *what)
{
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    lua_Integer n = luaL_len(L, idx);
    if (n > MH_APP_METRICS_LABELS)
        luaL_error(L, "%s: at most %d labels", what, MH_APP_METRICS_LABELS);
    for (lua_Integer i = 1; i <= n; i++) {
        if (lua_geti(L, idx, i) != LUA_TSTRING)
            luaL_error(L, "%s: label %d is not a string", what, (int)i);
        size_t len;
        const char *s = lua_tolstring(L, -1, &len);
        const char *e = mh_app_metrics_check_label(s, len, spec->type);
        if (e)
            luaL_error(L, "%s: label \"%s\": %s", what, s, e);
        for (int j = 0; j < spec->nlabels; j++)
            if (strcmp(spec->labels[j], s) == 0)
                luaL_error(L, "%s: label \"%s\" given twice", what, s);
        memcpy(spec->labels[spec->nlabels++], s, len + 1);
        lua_pop(L, 1);
    }
}

static void read_buckets(lua_State *L, int opts, struct mh_app_family_spec *spec, const char *what)
{
    if (lua_getfield(L, opts, "buckets") == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (spec->type != MH_APP_HISTOGRAM)
        luaL_error(L, "%s: buckets are for histograms", what);
    if (!lua_istable(L, -1))
        luaL_error(L, "%s: buckets must be a list of numbers", what);
    lua_Integer n = luaL_len(L, -1);
    if (n < 1 || n > MH_APP_METRICS_BUCKETS)
        luaL_error(L, "%s: 1 to %d buckets", what, MH_APP_METRICS_BUCKETS);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_geti(L, -1, i);
        int isnum;
        double b = lua_tonumberx(L, -1, &isnum);
        if (!isnum || !isfinite(b) || (i > 1 && b <= spec->buckets[i - 2]))
            luaL_error(L, "%s: buckets must be finite numbers in increasing order", what);
        spec->buckets[i - 1] = b;
        lua_pop(L, 1);
    }
    spec->nbuckets = (int)n;
    lua_pop(L, 1);
}

static void read_opts(lua_State *L, int idx, struct mh_app_family_spec *spec, const char *what)
{
    spec->max_series = MAX_SERIES_DEFAULT;
    if (lua_isnoneornil(L, idx))
        return;
    luaL_checktype(L, idx, LUA_TTABLE);
    static const char *const known[] = {"max_series", "buckets", "per_worker", NULL};
    mh_lua_check_opts(L, idx, what, known, 1);
    if (lua_getfield(L, idx, "max_series") != LUA_TNIL) {
        int isint;
        lua_Integer m = lua_tointegerx(L, -1, &isint);
        if (!isint || m < 1 || m > MH_APP_METRICS_SERIES)
            luaL_error(L, "%s: max_series must be an integer from 1 to %d", what,
                       MH_APP_METRICS_SERIES);
        spec->max_series = (uint32_t)m;
    }
    lua_pop(L, 1);
    int pw = lua_getfield(L, idx, "per_worker");
    if (pw != LUA_TNIL && (pw != LUA_TBOOLEAN || spec->type != MH_APP_GAUGE))
        luaL_error(L, "%s: per_worker is true or false, and only for a gauge", what);
    spec->per_worker = lua_toboolean(L, -1);
    lua_pop(L, 1);
    read_buckets(L, idx, spec, what);
}

/* The first declaration of a state asks for register_all to run once it serves. */
static void remember(lua_State *L, int ud, lua_CFunction register_all)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &LIST_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &LIST_KEY);
        luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
        lua_getfield(L, -1, "moonhttp.core");
        lua_getfield(L, -1, "on_start");
        lua_pushvalue(L, lua_upvalueindex(2)); /* l_declare's env */
        lua_pushcclosure(L, register_all, 1);
        lua_call(L, 1, 0);
        lua_pop(L, 2);
    }
    /* The list: metrics in declaration order (the scrape's order), and name → true. */
    const char *name = ((struct metric *)lua_touserdata(L, ud))->spec.name;
    if (lua_getfield(L, -1, name) != LUA_TNIL)
        luaL_error(L, "http.metrics: \"%s\" is declared twice", name);
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, name);
    lua_pushvalue(L, ud);
    lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    lua_pop(L, 1);
}

static int register_all(lua_State *L);

/* core.metric_<type>(name, help [, labels [, opts]]): upvalue 1 is the type, 2 the env. */
static int l_declare(lua_State *L)
{
    enum mh_app_metric_type type = (enum mh_app_metric_type)lua_tointeger(L, lua_upvalueindex(1));
    const char *what = type_name(type);
    if (!env_of(L, 2).loading)
        return luaL_error(L, "%s: only while the script loads (declare metrics at the top level)",
                          what);
    lua_settop(L, 4); /* name, help, labels, opts: the userdata goes above them */
    size_t nlen, hlen;
    const char *name = luaL_checklstring(L, 1, &nlen);
    const char *help = luaL_checklstring(L, 2, &hlen);
    /* Upvalue 3: the server's own Lua modules (acme.lua), whose metrics are
     * moonhttp_* as the C core's are; an app's may not take that prefix. */
    bool own = lua_toboolean(L, lua_upvalueindex(3));
    const char *e = own && (nlen < 9 || memcmp(name, "moonhttp_", 9) != 0)
                        ? "the server's own metrics start with moonhttp_"
                        : mh_app_metrics_check_name(name + (own ? 9 : 0), nlen - (own ? 9 : 0));
    if (e)
        return luaL_error(L, "%s: name \"%s\": %s", what, name, e);
    if (hlen >= MH_APP_METRICS_HELP_MAX || memchr(help, 0, hlen))
        return luaL_error(L, "%s: help must be under %d bytes, without NUL", what,
                          MH_APP_METRICS_HELP_MAX);
    struct metric *m = lua_newuserdatauv(L, sizeof *m, 1);
    memset(m, 0, sizeof *m);
    m->family = m->single = -1;
    int ud = lua_gettop(L);
    m->spec.type = type;
    memcpy(m->spec.name, name, nlen + 1);
    memcpy(m->spec.help, help, hlen + 1);
    read_labels(L, 3, &m->spec, what);
    read_opts(L, 4, &m->spec, what);
    if (type == MH_APP_HISTOGRAM && m->spec.nbuckets == 0) {
        m->spec.nbuckets = (int)(sizeof default_buckets / sizeof default_buckets[0]);
        memcpy(m->spec.buckets, default_buckets, sizeof default_buckets);
    }
    lua_newtable(L);
    lua_setiuservalue(L, ud, 1);
    luaL_setmetatable(L, type == MH_APP_COUNTER ? COUNTER_MT
                         : type == MH_APP_GAUGE ? GAUGE_MT
                                                : HISTOGRAM_MT);
    remember(L, ud, register_all);
    lua_settop(L, ud);
    return 1;
}

/* ---- registration and updates -------------------------------------------- */

/*
 * Finds m's family in the shared table; NULL when it can be updated, else the
 * error. The env function is the calling closure's upvalue 1.
 */
static const char *resolve(lua_State *L, struct metric *m)
{
    if (m->family >= 0 || m->broken)
        return m->broken;
    struct mh_lua_metrics_env env = env_of(L, 1);
    if (!env.serving)
        luaL_error(L,
                   "%s: metrics can be updated once the server has started (not while the "
                   "script loads)",
                   m->spec.name);
    if (!env.table)
        return err_none; /* not logged: a process without metrics */
    struct mh_app_metrics *a = mh_metrics_app(env.table);
    const char *err = NULL;
    int fam = mh_app_metrics_family(a, &m->spec, &err);
    if (fam < 0) {
        m->broken = err;
        mh_log(MH_LOG_WARN, "http.metrics: %s: %s%s; its updates are dropped", m->spec.name, err,
               err == mh_app_metrics_err_changed
                   ? " (another type, labels or buckets: a restart applies the change)"
                   : "");
        return err;
    }
    m->table = a;
    m->family = fam;
    if (m->spec.nlabels == 0) {
        m->single = mh_app_metrics_series(a, fam, "", 0, &err);
        if (m->single < 0) {
            m->broken = err;
            mh_log(MH_LOG_WARN, "http.metrics: %s: %s; its updates are dropped", m->spec.name, err);
            return err;
        }
    }
    return NULL;
}

/* on_start: registers every metric the script declared, so each shows before its first update. */
static int register_all(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &LIST_KEY) != LUA_TTABLE)
        return 0;
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        resolve(L, lua_touserdata(L, -1));
        lua_pop(L, 1);
    }
    return 0;
}

/* Pushes the label values of the table at idx, packed (each NUL-terminated, in label order). */
static const char *pack_values(lua_State *L, struct metric *m, int idx)
{
    int n = m->spec.nlabels;
    if (lua_type(L, idx) != LUA_TTABLE)
        luaL_error(L, "%s: label values expected (a table: { %s = ... } or a list)", m->spec.name,
                   m->spec.labels[0]);
    bool positional = lua_geti(L, idx, 1) != LUA_TNIL;
    lua_pop(L, 1);
    int keys = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        keys++;
        lua_pop(L, 1);
    }
    if (keys != n)
        luaL_error(L, "%s: %d label values for %d labels", m->spec.name, keys, n);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    const char *err = NULL;
    for (int i = 0; i < n; i++) {
        int t = positional ? lua_geti(L, idx, i + 1) : lua_getfield(L, idx, m->spec.labels[i]);
        if (t != LUA_TSTRING && t != LUA_TNUMBER)
            luaL_error(L, "%s: no value for label \"%s\"", m->spec.name, m->spec.labels[i]);
        size_t len;
        const char *v = lua_tolstring(L, -1, &len);
        unsigned st = 0;
        if (memchr(v, 0, len) || !mh_utf8_feed(&st, (const unsigned char *)v, len) ||
            !mh_utf8_complete(st))
            err = err_value;
        luaL_addvalue(&b); /* pops the value */
        luaL_addchar(&b, '\0');
    }
    luaL_pushresult(&b);
    if (!err && lua_rawlen(L, -1) > MH_APP_METRICS_VALUES_MAX)
        err = err_long;
    return err;
}

/*
 * The series an update goes to: the labels table is at idx (absent without
 * labels). Returns its index, or -1 with nil, err pushed.
 */
static int series_of(lua_State *L, struct metric *m, int idx)
{
    const char *err = resolve(L, m);
    if (!err && m->spec.nlabels == 0) {
        if (!lua_isnoneornil(L, idx))
            luaL_error(L, "%s: has no labels", m->spec.name);
        return m->single;
    }
    if (!err) {
        err = pack_values(L, m, idx);
        int key = lua_gettop(L);
        if (!err) {
            lua_getiuservalue(L, 1, 1);
            lua_pushvalue(L, key);
            if (lua_rawget(L, -2) == LUA_TNUMBER)
                return (int)lua_tointeger(L, -1);
            size_t len;
            const char *packed = lua_tolstring(L, key, &len);
            int s = mh_app_metrics_series(m->table, m->family, packed, len, &err);
            if (s >= 0) {
                lua_pushvalue(L, key);
                lua_pushinteger(L, s);
                lua_rawset(L, -4);
                return s;
            }
            if (err == mh_app_metrics_err_series && !m->warned_series) {
                m->warned_series = true;
                mh_log(MH_LOG_WARN,
                       "http.metrics: %s: more than max_series = %u label sets; updates with new "
                       "label values are dropped",
                       m->spec.name, (unsigned)m->spec.max_series);
            }
        }
    }
    lua_pushnil(L);
    lua_pushstring(L, err);
    return -1;
}

static double check_value(lua_State *L, int idx, struct metric *m, bool non_negative)
{
    double v = luaL_checknumber(L, idx);
    if (isnan(v) || (non_negative && v < 0))
        luaL_error(L, "%s: %s", m->spec.name,
                   non_negative ? "a counter only goes up (a number >= 0)" : "NaN is not a value");
    return v;
}

/* inc/dec/set/observe share this: (self [, n] [, labels]) with n defaulting to 1 for inc/dec. */
static int update(lua_State *L, const char *mt, int op)
{
    struct metric *m = luaL_checkudata(L, 1, mt);
    int labels = 3;
    double v = 1;
    if (lua_type(L, 2) == LUA_TTABLE && op != 's' && op != 'o')
        labels = 2; /* inc(labels): by 1 */
    else if (op == 's' || op == 'o' || !lua_isnoneornil(L, 2))
        v = check_value(L, 2, m, m->spec.type == MH_APP_COUNTER);
    int s = series_of(L, m, labels);
    if (s < 0)
        return 2;
    if (op == 'i')
        mh_app_metrics_add(m->table, s, v);
    else if (op == 'd')
        mh_app_metrics_add(m->table, s, -v);
    else if (op == 's')
        mh_app_metrics_set(m->table, s, v);
    else
        mh_app_metrics_observe(m->table, s, v);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_counter_inc(lua_State *L)
{
    return update(L, COUNTER_MT, 'i');
}

static int l_gauge_inc(lua_State *L)
{
    return update(L, GAUGE_MT, 'i');
}

static int l_gauge_dec(lua_State *L)
{
    return update(L, GAUGE_MT, 'd');
}

static int l_gauge_set(lua_State *L)
{
    return update(L, GAUGE_MT, 's');
}

static int l_observe(lua_State *L)
{
    return update(L, HISTOGRAM_MT, 'o');
}

static int l_tostring(lua_State *L)
{
    struct metric *m = lua_touserdata(L, 1);
    lua_pushfstring(L, "%s (%s)", type_name(m->spec.type), m->spec.name);
    return 1;
}

/* A metatable whose methods share the env (the value on top of the stack) as upvalue 1. */
static void new_mt(lua_State *L, const char *name, const luaL_Reg *methods)
{
    int env = lua_gettop(L);
    luaL_newmetatable(L, name);
    lua_newtable(L);
    lua_pushvalue(L, env);
    luaL_setfuncs(L, methods, 1);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, l_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pop(L, 1);
}

void mh_lua_metrics_open(lua_State *L, mh_lua_metrics_env_fn env)
{
    static const luaL_Reg counter[] = {{"inc", l_counter_inc}, {NULL, NULL}};
    static const luaL_Reg gauge[] = {
        {"inc", l_gauge_inc}, {"dec", l_gauge_dec}, {"set", l_gauge_set}, {NULL, NULL}};
    static const luaL_Reg histogram[] = {{"observe", l_observe}, {NULL, NULL}};
    static const struct {
        const char *field;
        enum mh_app_metric_type type;
    } kinds[] = {{"metric_counter", MH_APP_COUNTER},
                 {"metric_gauge", MH_APP_GAUGE},
                 {"metric_histogram", MH_APP_HISTOGRAM}};
    int core = lua_gettop(L);
    mh_lua_metrics_env_fn *box = lua_newuserdatauv(L, sizeof env, 0);
    *box = env;
    int boxi = lua_gettop(L);
    new_mt(L, COUNTER_MT, counter);
    new_mt(L, GAUGE_MT, gauge);
    new_mt(L, HISTOGRAM_MT, histogram);
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        for (int own = 0; own <= 1; own++) {
            lua_pushinteger(L, kinds[i].type);
            lua_pushvalue(L, boxi);
            lua_pushboolean(L, own);
            lua_pushcclosure(L, l_declare, 3);
            /* core.own_metric_<type>: the same, for the server's own moonhttp_* names */
            lua_pushfstring(L, "%s%s", own ? "own_" : "", kinds[i].field);
            lua_insert(L, -2);
            lua_setfield(L, core, lua_tostring(L, -2));
            lua_pop(L, 1);
        }
    }
    lua_settop(L, core);
}
