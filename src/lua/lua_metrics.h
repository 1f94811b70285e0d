#ifndef MH_LUA_METRICS_H
#define MH_LUA_METRICS_H
/*
 * http.metrics.counter/gauge/histogram(name, help [, labels [, opts]]): the
 * Lua face of the app's own metrics (handlers/app_metrics.h), served by the
 * same endpoint as the built-in ones and summed over every worker.
 *
 * Metrics are declared while the script loads, like routes: a bad name,
 * label or option raises there (so `moonhttp --check` catches it), and a
 * name declared twice in one script raises. Each worker registers the
 * script's metrics in the shared table once it serves (an on_start
 * function), so a metric without labels is exposed at 0 before its first
 * update. Updates (c:inc, g:set/inc/dec, h:observe) never wait. Misuse
 * (wrong types, a negative counter increment, NaN, a missing or unknown
 * label) raises; a runtime failure is `nil, err` with a short fixed string:
 * "too many series" past the metric's max_series, "metrics table full",
 * "declared differently before" when a reload changed a metric's type,
 * labels or buckets (a restart applies it; logged once), "bad label value"
 * (not UTF-8, or a NUL), "label values too long".
 */
#include <lua.h>
#include <stdbool.h>

struct mh_metrics;

/*
 * What a metric needs of the generation its Lua state belongs to, asked at
 * each declaration and at its first update. A function the opener passes in,
 * so this binding does not reach up into lua_vm.c.
 */
struct mh_lua_metrics_env {
    bool loading;             /* the script is loading: declarations only */
    bool serving;             /* the generation serves (updates may go to `table`) */
    struct mh_metrics *table; /* the server's metrics; NULL in a process without them */
};
typedef struct mh_lua_metrics_env (*mh_lua_metrics_env_fn)(lua_State *L);

/* Sets core.metric_counter, core.metric_gauge and core.metric_histogram on the table on top. */
void mh_lua_metrics_open(lua_State *L, mh_lua_metrics_env_fn env);

#endif
