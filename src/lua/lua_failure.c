#include "lua_failure.h"

#include "log.h"
#include "lua_errors.h"
#include "lua_request.h"
#include "lua_sched.h"
#include "lua_vm.h"
#include "metrics.h"
#include "req.h"
#include "router.h"
#include "ws.h"

#include <lauxlib.h>

/* How a task failed, after its kind ("handler", "timer", ...) in the log line. */
static const char *const guard_what[] = {
    [MH_GUARD_NONE] = "error",
    [MH_GUARD_CPU] = "exceeded handler_cpu_limit",
    [MH_GUARD_MEMORY] = "exceeded lua_memory_limit",
};

/*
 * After a malformed, oversized or stalled body the answer is the server's
 * 400, 413 or 408 (the protocol's finish) and the handler's failure is most
 * likely its reaction to `nil, err`: not a server fault.
 */
static bool client_fault(const struct mh_req *r, enum mh_guard_kind guard)
{
    return guard == MH_GUARD_NONE &&
           (r->body_state == MH_BODY_BAD || r->body_state == MH_BODY_TOO_LARGE ||
            r->body_state == MH_BODY_STALLED);
}

/* The one log line of a handler's failure: how, the route, the request, the client. */
static void log_handler_failure(struct mh_req *r, enum mh_guard_kind guard, const char *trace)
{
    char where[64];
    size_t tlen;
    const char *target = mh_req_slice(r, r->head.target, &tlen);
    const struct mh_route *route = r->routed.route;
    bool client = client_fault(r, guard);
    mh_log(client ? MH_LOG_INFO : MH_LOG_ERROR, "handler %s%s (route %s; %s %.*s from %s): %s",
           guard_what[guard], client ? " after a bad request body" : "",
           route ? mh_route_pattern(route) : "none", mh_req_method(r), (int)tlen, target,
           r->ops->remote_addr(r, where, sizeof where), trace);
}

/* A handler failed: 500 if the response has not started, else cut it off. */
static void handler_failed(struct mh_task *t, struct mh_req *r, const char *trace,
                           enum mh_guard_kind guard)
{
    log_handler_failure(r, guard, trace);
    if (r->closed)
        return;
    if (r->res.head_sent) {
        struct mh_ws *ws = mh_ws_of(r);
        if (ws) /* a WebSocket says why before it goes */
            mh_ws_close(ws, 1011, "server error", 12);
        else
            mh_req_abort(r);
        return;
    }
    if (client_fault(r, guard))
        return;
    mh_lua_answer_error(t->gen, r, trace);
}

static void count(const struct mh_task *t, enum mh_guard_kind guard)
{
    struct mh_metrics *m = t->gen->host ? t->gen->host->metrics_table : NULL;
    if (!m)
        return;
    if (t->kind != MH_TASK_RUN && t->kind != MH_TASK_HANDLER)
        mh_metrics_count_task_error(m, t->kind == MH_TASK_TIMER      ? MH_METRICS_TIMER
                                       : t->kind == MH_TASK_ON_START ? MH_METRICS_ON_START
                                                                     : MH_METRICS_THREAD);
    if (guard != MH_GUARD_NONE)
        mh_metrics_count_guard(m, guard == MH_GUARD_CPU ? MH_METRICS_CPU_LIMIT
                                                        : MH_METRICS_MEMORY_LIMIT);
}

void mh_task_failed(struct mh_task *t, const char *trace, enum mh_guard_kind guard)
{
    if (t->request)
        handler_failed(t, t->request, trace, guard);
    else if (t->kind == MH_TASK_RUN && guard == MH_GUARD_NONE)
        mh_log(MH_LOG_ERROR, "%s", trace);
    else
        mh_log(MH_LOG_ERROR, "%s %s: %s", mh_task_kind_name(t->kind), guard_what[guard], trace);
    count(t, guard);
}

/*
 * core.handler_error(req, trace): http.on_error caught a handler's error
 * and will answer it; the log line is the core's own, route included.
 */
static int l_handler_error(lua_State *L)
{
    struct mh_lua_req *q = luaL_checkudata(L, 1, MH_REQUEST_MT);
    const char *trace = luaL_checkstring(L, 2);
    if (!q->r)
        return luaL_error(L, "request finished: this req belongs to a handler that has returned");
    log_handler_failure(q->r, MH_GUARD_NONE, trace);
    return 0;
}

void mh_lua_failure_open(lua_State *L)
{
    lua_pushcfunction(L, l_handler_error);
    lua_setfield(L, -2, "handler_error");
}
