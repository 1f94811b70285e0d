#ifndef MH_LUA_SCHED_H
#define MH_LUA_SCHED_H
/*
 * The one place Lua coroutines are resumed. Each request's handler, and a
 * `moonhttp run` script, runs as a task: a pooled coroutine plus what it
 * waits for. A yielding built-in follows one template: find the running
 * task, record what it waits for and how to push its results on resume,
 * arm the watcher, and return lua_yield(L, 0).
 */
#include <ev.h>
#include <lua.h>
#include <stdbool.h>

struct mh_conn;
struct mh_gen;
struct mh_task;

enum mh_task_wait {
    MH_WAIT_NONE,
    MH_WAIT_SLEEP,
    MH_WAIT_BODY,     /* request body bytes */
    MH_WAIT_WRITABLE, /* output below the low-water mark */
    MH_WAIT_FETCH,    /* outbound HTTP (lua_client.c) */
};

/* Pushes the results of a finished wait onto co; returns how many. */
typedef int (*mh_task_resume_fn)(struct mh_task *t, lua_State *co);

struct mh_task {
    lua_State *co;
    int co_ref;             /* anchors the coroutine in the registry */
    struct mh_lua_req *req; /* this request's objects, invalidated when it ends */
    struct mh_lua_res *res;
    struct mh_gen *gen;
    struct mh_conn *conn; /* NULL for a `run` script */
    enum mh_task_wait wait;
    mh_task_resume_fn on_resume;
    ev_timer timer;    /* sleep, and deferred resumes */
    size_t want_bytes; /* req:read(n) waiting: its n */
    int exit_status;   /* `run` scripts: 0 ok, 1 error */
    void (*on_done)(struct mh_task *t);
    void *client_open; /* lua_client.c: responses opened and not closed yet */
    void *client_wait; /* lua_client.c: the response being waited on */
    struct mh_task *next_free;
};

/* What a handler's req/res userdata point to; conn is NULL once the request ended. */
struct mh_lua_req {
    struct mh_conn *conn;
    struct mh_task *task;
};
struct mh_lua_res {
    struct mh_conn *conn;
    struct mh_task *task;
};

/*
 * Runs handler `ref` (a registry reference to a function) for the current
 * request of c, with (req, res) and any extra argument pushed by `extra`.
 * The handler may finish before this returns; either way the connection is
 * told through mh_conn_finish_response.
 */
void mh_task_start_handler(struct mh_gen *g, struct mh_conn *c, int ref, const char *extra,
                           size_t extra_len);

/*
 * Runs the function on top of g->L's stack as a task (for `moonhttp run`),
 * with nargs arguments below it. on_done is called when it ends.
 */
struct mh_task *mh_task_spawn(struct mh_gen *g, int nargs, void (*on_done)(struct mh_task *));

/* The task running on L, or NULL (main state, or a user's own coroutine). */
struct mh_task *mh_task_current(lua_State *L);
/* Like mh_task_current, but raises a Lua error naming `what` when there is none. */
struct mh_task *mh_task_check(lua_State *L, const char *what);

/* Suspends the running task: records the wait and returns lua_yield(L, 0). */
int mh_task_yield(lua_State *L, struct mh_task *t, enum mh_task_wait wait, mh_task_resume_fn fn);

/* Whether the task's client has so much output queued that writers should wait. */
bool mh_task_output_high(const struct mh_task *t);

/* Connection events for a task that may be waiting on them. */
void mh_task_on_body(struct mh_task *t);
void mh_task_on_writable(struct mh_task *t);
void mh_task_on_conn_closed(struct mh_task *t);

/*
 * Streams and a graceful stop: once the worker stops serving (after
 * shutdown_delay), a handler whose response is streaming (head sent) gets
 * nil, "stopping" from http.sleep and res:write, so its loop ends instead of
 * holding the stop for the whole shutdown_timeout. mh_task_on_stopping wakes
 * one already waiting; mh_task_stream_stopping tells a call about to wait.
 */
void mh_task_on_stopping(struct mh_task *t);
bool mh_task_stream_stopping(const struct mh_task *t);

/* Frees the pooled coroutines of a generation (before lua_close). */
void mh_task_pool_free(struct mh_gen *g);

/* Registers http.sleep, http.now and http.clock into the table on top of L. */
void mh_sched_open(lua_State *L);

#endif
