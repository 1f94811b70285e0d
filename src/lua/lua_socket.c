/*
 * http.tcp(): see lua_socket.h for the contract. A socket userdata (struct
 * lsock) drives one operation at a time through C callbacks (a dial of
 * net/dialer.h for connect and tls_handshake; fill until a receive can be
 * answered; write until all is sent) and wakes its waiting task only when
 * the answer is ready, so a resume never has to wait again.
 */
#define _GNU_SOURCE /* memmem */
#include "lua_socket.h"

#include "lua_opts.h"
#include "lua_socket_impl.h"
#include "lua_tls.h"
#include "lua_type.h"
#include "lua_vm.h"

#include <lauxlib.h>
#include <mbedtls/sha256.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#define SOCK_MT         "moonhttp.Socket"
#define STATE_MT        "moonhttp.SocketState"
#define DEFAULT_TIMEOUT 60.0
#define DEFAULT_IDLE    60.0
#define DEFAULT_POOL    30

static const char STATE_KEY = 's'; /* registry: this generation's struct sock_state */
static const char NO_HOST[] = "host not found";
static const char BUSY[] = "socket busy";

/* The generation's socket state, a userdata in its registry (lua_socket_state.c holds the rest). */

static int state_gc(lua_State *L)
{
    struct sock_state *st = luaL_checkudata(L, 1, STATE_MT);
    mh_sock_state_free(st);
    return 0;
}

static struct sock_state *state_of(lua_State *L)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &STATE_KEY) == LUA_TUSERDATA) {
        struct sock_state *st = lua_touserdata(L, -1);
        lua_pop(L, 1);
        return st;
    }
    lua_pop(L, 1);
    struct mh_gen *g = mh_gen_of(L);
    struct sock_state *st = lua_newuserdatauv(L, sizeof *st, 0);
    memset(st, 0, sizeof *st);
    luaL_setmetatable(L, STATE_MT);
    st->loop = mh_gen_loop(g);
    st->pool = mh_socket_pool_new(st->loop);
    st->dialer = mh_dialer_new(st->loop);
    if (!st->pool || !st->dialer)
        luaL_error(L, "out of memory"); /* the userdata's __gc frees what was made */
    lua_rawsetp(L, LUA_REGISTRYINDEX, &STATE_KEY);
    return st;
}

static void connect_start(struct lsock *k);

/* k's connection was parked or closed: its slot goes to the first waiter. */
static void release_slot(struct lsock *k)
{
    struct lsock *w = mh_sock_release_slot(k);
    if (w)
        connect_start(w);
}

/* ---- closing and waking ---------------------------------------------------------- */

static void on_sock_done(struct mh_socket *s, const char *err);

/*
 * The pending operation has its answer: wake the waiting task to push it,
 * or, when the answer came before the call could wait, let it answer now.
 */
static void wake(struct lside *d)
{
    d->done = true;
    if (d->waiter)
        mh_task_wake(d->waiter);
}

/* Stops what is in progress on the read side in C (the waiting task, if any, stays). */
static void stop_read(struct lsock *k)
{
    if (k->queued)
        mh_sock_leave_queue(k);
    mh_dial_cancel(&k->dial); /* a handshake cut short cannot go on */
    if (k->s)
        mh_socket_cancel_read(k->s);
}

/* Stops the pending send in C (the waiting task, if any, stays). */
static void stop_write(struct lsock *k)
{
    if (k->s)
        mh_socket_cancel_write(k->s);
}

static void stop_side(struct lside *d)
{
    if (d == &d->k->rd)
        stop_read(d->k);
    else
        stop_write(d->k);
}

/*
 * Closing wakes every task still waiting on the socket with "closed": a
 * receive in one task and a send in another (full duplex), or a task
 * waiting while the socket's owner ended.
 */
static void sock_close(struct lsock *k)
{
    mh_task_unlink(&k->owner);
    stop_read(k);
    stop_write(k);
    if (k->s) {
        mh_socket_free(k->s);
        k->s = NULL;
    }
    release_slot(k);
    struct lside *sides[] = {&k->rd, &k->wr};
    for (int i = 0; i < 2; i++)
        if (sides[i]->waiter && sides[i]->op != OP_NONE && !sides[i]->done) {
            sides[i]->err = mh_socket_err_closed;
            wake(sides[i]);
        }
}

static void on_owner_end(struct mh_task_link *l)
{
    sock_close((struct lsock *)((char *)l - offsetof(struct lsock, owner)));
}

/* close(), <close> and __gc. */
static int l_close(lua_State *L)
{
    struct lsock *k = luaL_checkudata(L, 1, SOCK_MT);
    sock_close(k);
    lua_pushboolean(L, 1);
    return 1;
}

/* The waiting task ended first (killed): undo the wait without resuming it. */
static void cancel_wait(struct mh_task *t)
{
    struct lside *d = t->wait_data;
    stop_side(d);
    d->op = OP_NONE;
    d->waiter = NULL;
    luaL_unref(t->co, LUA_REGISTRYINDEX, d->anchor);
    d->anchor = LUA_NOREF;
}

/* ---- receive ------------------------------------------------------------------------ */

/* Where the answer of the pending receive ends in the input, or 0 if not there yet. */
static size_t recv_end(const struct lsock *k, size_t *skip)
{
    const struct mh_buf *in = &k->s->in;
    *skip = 0;
    switch (k->mode) {
    case R_BYTES:
        return in->len >= k->want ? k->want : 0;
    case R_LINE: {
        const char *nl = in->len ? memchr(in->data, '\n', in->len) : NULL;
        if (!nl)
            return 0;
        *skip = 1;
        return (size_t)(nl - in->data) + 1;
    }
    case R_UNTIL: {
        const char *d = in->len ? memmem(in->data, in->len, k->delim, k->delim_len) : NULL;
        if (!d)
            return 0;
        *skip = k->delim_len;
        return (size_t)(d - in->data) + k->delim_len;
    }
    case R_ALL:
        return 0;
    case R_ANY:
        return in->len < k->want ? in->len : k->want;
    }
    return 0;
}

static bool recv_ready(const struct lsock *k)
{
    size_t skip;
    return k->rd.err || !k->s || k->s->eof || recv_end(k, &skip) > 0;
}

/* Reads until the pending receive can be answered (true) or must wait (false). */
static bool recv_progress(struct lsock *k)
{
    while (!recv_ready(k)) {
        const char *err = NULL;
        int rc = mh_socket_fill(k->s, k->tmo_read, on_sock_done, &err);
        if (rc == 0)
            return false;
        if (rc < 0)
            k->rd.err = err;
    }
    return true;
}

/* Pushes the answer of a ready receive: data, or nil, err, partial. */
static int push_recv(lua_State *L, struct lsock *k)
{
    const char *err = k->rd.err;
    k->rd.err = NULL;
    k->rd.op = OP_NONE;
    if (!k->s) {
        lua_pushnil(L);
        lua_pushstring(L, mh_socket_err_closed);
        lua_pushliteral(L, "");
        return 3;
    }
    struct mh_buf *in = &k->s->in;
    size_t skip, end = err ? 0 : recv_end(k, &skip);
    if (end) {
        size_t n = end - skip;
        if (k->mode == R_LINE && n > 0 && in->data[n - 1] == '\r')
            n--;
        lua_pushlstring(L, in->data, n);
        mh_buf_consume(in, end);
        return 1;
    }
    if (!err && k->mode == R_ALL) {
        lua_pushlstring(L, in->data ? in->data : "", in->len);
        mh_buf_consume(in, in->len);
        return 1;
    }
    lua_pushnil(L);
    lua_pushstring(L, err ? err : mh_socket_err_closed);
    lua_pushlstring(L, in->data ? in->data : "", in->len);
    mh_buf_consume(in, in->len);
    return 3;
}

/* ---- connecting ----------------------------------------------------------------------- */

/*
 * k's TLS options as 16 hex digits of their SHA-256, part of the idle
 * pool's key, so that a connection made with one client certificate (or CA
 * file, verify flag, server name, min_version) never goes to a connect that
 * asked for another: that would speak with the first certificate's
 * identity. (The dialer keys its saved sessions by the options themselves.)
 */
static void tls_fingerprint(const struct lsock *k, char out[17])
{
    char all[sizeof k->ca + sizeof k->cert + sizeof k->cert_key + sizeof k->server_name + 8];
    int n = snprintf(all, sizeof all, "%d%d%s%c%s%c%s%c%s", k->verify, k->tls13_only, k->ca, 0,
                     k->cert, 0, k->cert_key, 0, k->server_name);
    unsigned char h[32];
    mbedtls_sha256((const unsigned char *)all, n > 0 && (size_t)n < sizeof all ? (size_t)n : 0, h,
                   0);
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", h[i]);
}

/* The dialer's error as sockets have always named it. */
static const char *dial_err(const struct mh_dial *d, const char *err)
{
    if (err == mh_dial_err_timeout)
        return mh_socket_err_timeout;
    if (err == mh_dial_err_socket || err == mh_dial_err_connect)
        return mh_socket_errno_err(d->sys_errno);
    if (err == mh_dial_err_nomem || err == mh_dns_err_nomem)
        return mh_socket_err_nomem;
    if (d->phase == MH_DIAL_RESOLVING)
        return NO_HOST;
    return err; /* TLS's, as they are */
}

/* The connect's or the handshake's answer: the connection becomes the socket's byte stream. */
static void on_dialed(struct mh_dial *d, const char *err)
{
    struct lsock *k = (struct lsock *)((char *)d - offsetof(struct lsock, dial));
    if (err) {
        k->rd.err = dial_err(d, err);
    } else {
        k->tls_resumed = d->resumed;
        mh_dial_take(d, &k->s->tr);
    }
    wake(&k->rd);
}

/* k's dial key: its host and port, and its TLS options when it speaks TLS. */
static void dial_key(struct lsock *k, struct mh_dial_key *key, struct mh_dial_tls *tls)
{
    *tls = (struct mh_dial_tls){.ca = k->ca[0] ? k->ca : NULL,
                                .cert = k->cert[0] ? k->cert : NULL,
                                .key = k->cert_key[0] ? k->cert_key : NULL,
                                .server_name = k->server_name,
                                .verify = k->verify,
                                .tls13_only = k->tls13_only,
                                .resume = true};
    *key = (struct mh_dial_key){.host = k->host, .port = k->port, .tls = tls};
    k->dial.connect_timeout = k->dial.tls_timeout = k->tmo_connect;
    k->dial.deadline = 0; /* the Lua call's wait bounds the whole connect */
}

/* Every socket-level completion comes here and goes on with the pending operation. */
static void on_sock_done(struct mh_socket *s, const char *err)
{
    struct lsock *k = s->ud;
    switch (k->rd.op) {
    case OP_CONNECT:   /* the dial reports to on_dialed */
    case OP_HANDSHAKE: /* the same */
    case OP_SEND: /* sends report to on_send_done */
        return;
    case OP_RECV:
        if (err)
            k->rd.err = err;
        if (recv_progress(k))
            wake(&k->rd);
        return;
    case OP_NONE:
        return;
    }
}

/* The write side's completion. */
static void on_send_done(struct mh_socket *s, const char *err)
{
    struct lsock *k = s->ud;
    k->wr.err = err;
    wake(&k->wr);
}

/* ---- the waiting template -------------------------------------------------------------- */

static int push_result(lua_State *L, struct lside *d)
{
    struct lsock *k = d->k;
    enum op op = d->op;
    if (op == OP_RECV)
        return push_recv(L, k);
    const char *err = d->err;
    d->err = NULL;
    d->op = OP_NONE;
    if (err) {
        if (op == OP_CONNECT || op == OP_HANDSHAKE)
            sock_close(k); /* a half-made connection is of no use */
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    if (op == OP_SEND) {
        lua_pushinteger(L, (lua_Integer)k->send_len);
        return 1;
    }
    lua_pushboolean(L, 1);
    return 1;
}

static int resume_op(struct mh_task *t, lua_State *co)
{
    struct lside *d = t->wait_data;
    d->waiter = NULL;
    luaL_unref(co, LUA_REGISTRYINDEX, d->anchor);
    d->anchor = LUA_NOREF;
    if (!d->done) {
        /*
         * The task's timer came first: the call's total bound (connect) or
         * the socket's deadline passed while the operation was still going.
         */
        stop_side(d);
        d->err = mh_socket_err_timeout;
    }
    return push_result(co, d);
}

/*
 * Suspends the running task until k's pending operation is answered
 * (userdata at 1), or until `limit` seconds (0: none) or the socket's
 * deadline pass, whichever is first: then the operation is stopped and
 * answers "timeout". The per-wait timeouts of net/socket.c still apply
 * inside; these bound the whole call.
 */
static int wait_op(lua_State *L, struct lside *d, struct mh_task *t, double limit)
{
    struct lsock *k = d->k;
    if (k->deadline > 0) {
        double left = k->deadline - ev_now(k->st->loop);
        if (left <= 0) {
            stop_side(d);
            d->err = mh_socket_err_timeout;
            return push_result(L, d);
        }
        if (limit <= 0 || left < limit)
            limit = left;
    }
    if (limit > 0)
        mh_task_wake_in(t, limit);
    lua_pushvalue(L, 1);
    d->anchor = luaL_ref(L, LUA_REGISTRYINDEX);
    d->waiter = t;
    return mh_task_wait(L, t, resume_op, cancel_wait, d);
}

enum use { USE_READ, USE_WRITE, USE_BOTH };

/*
 * Checks self and that the side(s) the call needs are free; raises for
 * misuse. Full duplex: a receive and a send may wait at once (in two
 * tasks); two receives, two sends, or anything beside a connect or a
 * handshake may not.
 */
static struct lsock *check_idle(lua_State *L, const char *what, struct mh_task **t, enum use use)
{
    struct lsock *k = luaL_checkudata(L, 1, SOCK_MT);
    *t = mh_task_check(L, what);
    if (k->rd.op == OP_CONNECT || k->rd.op == OP_HANDSHAKE)
        luaL_error(L, "%s: %s (a connect or handshake is waiting on it)", what, BUSY);
    if (use != USE_WRITE && k->rd.op != OP_NONE)
        luaL_error(L, "%s: %s (another task is receiving on it)", what, BUSY);
    if (use != USE_READ && k->wr.op != OP_NONE)
        luaL_error(L, "%s: %s (another task is sending on it)", what, BUSY);
    return k;
}

/* ---- methods ------------------------------------------------------------------------------ */

static bool opt_bool(lua_State *L, int idx, const char *k, bool def)
{
    bool v = def;
    if (lua_getfield(L, idx, k) != LUA_TNIL)
        v = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

static void opt_string(lua_State *L, int idx, const char *k, char *out, size_t cap,
                       const char *what)
{
    if (lua_getfield(L, idx, k) != LUA_TNIL) {
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        if (!s || n >= cap)
            luaL_error(L, "%s: opts.%s must be a string shorter than %d bytes", what, k, (int)cap);
        memcpy(out, s, n + 1);
    }
    lua_pop(L, 1);
}

/* Reads TLS options ({ server_name, verify, ca, cert, key, min_version } or true) at idx into k. */
static void read_tls_opts(lua_State *L, struct lsock *k, int idx, const char *host,
                          const char *what)
{
    k->verify = true;
    k->tls13_only = false;
    k->ca[0] = k->cert[0] = k->cert_key[0] = 0;
    snprintf(k->server_name, sizeof k->server_name, "%s", host ? host : "");
    if (lua_istable(L, idx)) {
        static const char *const known[] = {"server_name", "verify",      "ca", "cert",
                                            "key",         "min_version", NULL};
        mh_lua_check_opts(L, idx, what, known, 1);
        k->verify = opt_bool(L, idx, "verify", true);
        k->tls13_only = mh_lua_tls13_only(L, idx, what);
        opt_string(L, idx, "ca", k->ca, sizeof k->ca, what);
        opt_string(L, idx, "cert", k->cert, sizeof k->cert, what);
        opt_string(L, idx, "key", k->cert_key, sizeof k->cert_key, what);
        if (!k->cert[0] != !k->cert_key[0])
            luaL_error(L, "%s: tls.cert and tls.key go together", what);
        opt_string(L, idx, "server_name", k->server_name, sizeof k->server_name, what);
    } else if (!lua_isnoneornil(L, idx) && !lua_isboolean(L, idx)) {
        luaL_error(L, "%s: tls options must be true or a table", what);
    }
}

/* Goes on with a connect: an idle pooled connection for the key, or a new one. */
static void connect_start(struct lsock *k)
{
    struct mh_socket *s = mh_socket_pool_take(k->st->pool, k->key);
    if (s) {
        s->ud = k;
        k->s = s;
        wake(&k->rd);
        return;
    }
    if (!(k->s = mh_socket_new(k->st->loop))) {
        k->rd.err = mh_socket_err_nomem;
        wake(&k->rd);
        return;
    }
    k->s->ud = k;
    struct mh_dial_key key;
    struct mh_dial_tls tls;
    dial_key(k, &key, &tls);
    if (!k->tls_next)
        key.tls = NULL;
    mh_dial_start(&k->dial, k->st->dialer, &key, on_dialed);
}

/* sock:connect(host, port [, opts]) / sock:connect("unix:/path" [, opts]) → true | nil, err */
static int l_connect(lua_State *L)
{
    struct mh_task *t;
    struct lsock *k = check_idle(L, "sock:connect", &t, USE_BOTH);
    size_t hlen;
    const char *host = luaL_checklstring(L, 2, &hlen);
    bool unix_path = hlen > 5 && memcmp(host, "unix:", 5) == 0;
    lua_Integer port = 0;
    int opts = unix_path ? 3 : 4;
    if (!unix_path) {
        port = luaL_checkinteger(L, 3);
        luaL_argcheck(L, port > 0 && port < 65536, 3, "port must be 1..65535");
        luaL_argcheck(L, hlen > 0 && hlen < 256, 2, "bad host");
    } else {
        luaL_argcheck(L, hlen - 5 < sizeof(((struct sockaddr_un *)0)->sun_path), 2,
                      "unix socket path too long");
    }
    static const char *const known[] = {"tls", "pool", "pool_size", NULL};
    if (!lua_isnoneornil(L, opts)) {
        luaL_checktype(L, opts, LUA_TTABLE);
        mh_lua_check_opts(L, opts, "sock:connect", known, 1);
    } else {
        opts = 0;
    }
    sock_close(k); /* connect on a connected socket starts over */
    k->tls_next = k->tls_resumed = false;
    if (opts) {
        int ty = lua_getfield(L, opts, "tls");
        if (ty != LUA_TNIL && (ty != LUA_TBOOLEAN || lua_toboolean(L, -1))) {
            k->tls_next = true;
            read_tls_opts(L, k, lua_gettop(L), unix_path ? NULL : host, "sock:connect");
        }
        lua_pop(L, 1);
    }
    char pool[KEY_MAX - 24] = "", tls[24] = "";
    if (opts)
        opt_string(L, opts, "pool", pool, sizeof pool, "sock:connect");
    if (k->tls_next) {
        char fp[17];
        tls_fingerprint(k, fp);
        snprintf(tls, sizeof tls, " tls/%s", fp);
    }
    if (pool[0])
        snprintf(k->key, sizeof k->key, "%s%s", pool, tls);
    else if (unix_path)
        snprintf(k->key, sizeof k->key, "%s%s", host, tls);
    else
        snprintf(k->key, sizeof k->key, "%s:%d%s", host, (int)port, tls);

    memcpy(k->host, host, hlen + 1);
    k->port = (uint16_t)port;
    k->owner.release = on_owner_end;
    mh_task_adopt(t, &k->owner);
    k->rd.op = OP_CONNECT;
    k->rd.err = NULL;
    k->rd.done = false;
    lua_Integer limit = 0;
    if (opts && lua_getfield(L, opts, "pool_size") != LUA_TNIL) {
        limit = lua_tointeger(L, -1);
        luaL_argcheck(L, limit > 0, opts, "opts.pool_size must be a positive integer");
    }
    if (opts)
        lua_pop(L, 1);
    /*
     * The connect timeout bounds the whole call: waiting for a slot, name
     * resolution, every address tried and the TLS handshake together.
     */
    if (limit && !mh_sock_take_slot(k, (size_t)limit))
        return wait_op(L, &k->rd, t, k->tmo_connect); /* waiting for a slot */
    connect_start(k);
    if (k->rd.done)
        return push_result(L, &k->rd); /* answered without waiting */
    return wait_op(L, &k->rd, t, k->tmo_connect);
}

/* sock:tls_handshake([opts]) → true | nil, err */
static int l_tls_handshake(lua_State *L)
{
    struct mh_task *t;
    struct lsock *k = check_idle(L, "sock:tls_handshake", &t, USE_BOTH);
    if (!k->s || k->s->tr.fd < 0) {
        lua_pushnil(L);
        lua_pushstring(L, mh_socket_err_closed);
        return 2;
    }
    if (k->s->tr._impl)
        return luaL_error(L, "sock:tls_handshake: the connection already uses TLS");
    /* The host connect was given, whatever the pool is named. */
    read_tls_opts(L, k, 2, strncmp(k->host, "unix:", 5) == 0 ? NULL : k->host,
                  "sock:tls_handshake");
    k->rd.op = OP_HANDSHAKE;
    k->rd.err = NULL;
    k->rd.done = false;
    mh_socket_cancel(k->s); /* the dial watches the socket until the handshake is over */
    struct mh_dial_key key;
    struct mh_dial_tls tls;
    dial_key(k, &key, &tls);
    mh_dial_handshake(&k->dial, k->st->dialer, &key, k->s->tr.fd, on_dialed);
    if (!k->rd.done)
        return wait_op(L, &k->rd, t, 0); /* the handshake's own timer: tmo_connect for all of it */
    return push_result(L, &k->rd);
}

/* sock:send(data) → bytes | nil, err. Waits while the peer applies back-pressure. */
static int l_send(lua_State *L)
{
    struct mh_task *t;
    struct lsock *k = check_idle(L, "sock:send", &t, USE_WRITE);
    if (lua_istable(L, 2)) {
        lua_getglobal(L, "table");
        lua_getfield(L, -1, "concat");
        lua_pushvalue(L, 2);
        lua_call(L, 1, 1);
        lua_replace(L, 2);
        lua_pop(L, 1);
    }
    size_t len;
    const char *data = luaL_checklstring(L, 2, &len);
    lua_settop(L, 2);
    if (!k->s) {
        lua_pushnil(L);
        lua_pushstring(L, mh_socket_err_closed);
        return 2;
    }
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, 1, 1);
    const char *err = NULL;
    k->wr.op = OP_SEND;
    k->wr.err = NULL;
    k->wr.done = false;
    k->send_len = len;
    int rc = mh_socket_write(k->s, data, len, k->tmo_send, on_send_done, &err);
    if (rc == 0)
        return wait_op(L, &k->wr, t, 0); /* tmo_send, armed once, bounds the whole send */
    k->wr.err = rc < 0 ? err : NULL;
    return push_result(L, &k->wr);
}

/* Starts a receive in `mode` and answers it now or waits. */
static int do_receive(lua_State *L, struct lsock *k, struct mh_task *t, enum recv_mode mode)
{
    k->mode = mode;
    k->rd.op = OP_RECV;
    k->rd.err = NULL;
    k->rd.done = false;
    if (!k->s || recv_progress(k))
        return push_recv(L, k);
    return wait_op(L, &k->rd, t, 0); /* tmo_read is per wait for data, re-armed as bytes come */
}

/* sock:receive(n | "l" | "a") → data | nil, err, partial (default "l") */
static int l_receive(lua_State *L)
{
    struct mh_task *t;
    struct lsock *k = check_idle(L, "sock:receive", &t, USE_READ);
    enum recv_mode mode = R_LINE;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        lua_Integer n = luaL_checkinteger(L, 2);
        luaL_argcheck(L, n >= 0, 2, "must be a non-negative count");
        k->want = (size_t)n;
        mode = R_BYTES;
    } else if (!lua_isnoneornil(L, 2)) {
        const char *p = luaL_checkstring(L, 2);
        if (*p == '*')
            p++; /* LuaSocket's "*l" / "*a" */
        if (strcmp(p, "l") == 0)
            mode = R_LINE;
        else if (strcmp(p, "a") == 0)
            mode = R_ALL;
        else
            return luaL_argerror(L, 2, "expected a byte count, \"l\" or \"a\"");
    }
    lua_settop(L, 1);
    return do_receive(L, k, t, mode);
}

/*
 * sock:receiveany(max) → what has arrived, 1 to max bytes (waiting only
 * while nothing has) | nil, err, partial. For protocols that frame their
 * own messages (a PostgreSQL answer is several): one call takes them all
 * instead of one receive per length and per body.
 */
static int l_receiveany(lua_State *L)
{
    struct mh_task *t;
    struct lsock *k = check_idle(L, "sock:receiveany", &t, USE_READ);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_argcheck(L, n > 0, 2, "must be a positive count");
    k->want = (size_t)n;
    lua_settop(L, 1);
    return do_receive(L, k, t, R_ANY);
}

/* The iterator receive_until returns: upvalues (sock, delim). */
static int l_until_iter(lua_State *L)
{
    lua_settop(L, 0);
    lua_pushvalue(L, lua_upvalueindex(1));
    struct mh_task *t;
    struct lsock *k = check_idle(L, "sock:receive_until", &t, USE_READ);
    k->delim = lua_tolstring(L, lua_upvalueindex(2), &k->delim_len);
    return do_receive(L, k, t, R_UNTIL);
}

/* sock:receive_until(delim) → iterator: each call → the bytes before the next delim | nil, err,
 * partial */
static int l_receive_until(lua_State *L)
{
    luaL_checkudata(L, 1, SOCK_MT);
    size_t n;
    luaL_checklstring(L, 2, &n);
    luaL_argcheck(L, n > 0, 2, "delimiter must not be empty");
    lua_settop(L, 2);
    lua_pushcclosure(L, l_until_iter, 2);
    return 1;
}

static double check_timeout(lua_State *L, int idx, double old)
{
    if (lua_isnoneornil(L, idx))
        return old;
    double v = luaL_checknumber(L, idx);
    luaL_argcheck(L, v >= 0, idx, "timeout must be >= 0 seconds (0: none)");
    return v;
}

/* sock:settimeouts(connect, send, read) in seconds; nil keeps a value. */
static int l_settimeouts(lua_State *L)
{
    struct lsock *k = luaL_checkudata(L, 1, SOCK_MT);
    k->tmo_connect = check_timeout(L, 2, k->tmo_connect);
    k->tmo_send = check_timeout(L, 3, k->tmo_send);
    k->tmo_read = check_timeout(L, 4, k->tmo_read);
    return 0;
}

/*
 * sock:setdeadline(seconds) → every wait of this socket's calls from now on
 * ends with "timeout" once `seconds` have passed (nil or 0: no deadline).
 * A total bound across calls, over the per-wait settimeouts, for protocols
 * whose one request is many reads (a query's answer, a reply's parts).
 */
static int l_setdeadline(lua_State *L)
{
    struct lsock *k = luaL_checkudata(L, 1, SOCK_MT);
    double v = check_timeout(L, 2, 0);
    k->deadline = v > 0 ? ev_now(k->st->loop) + v : 0;
    return 0;
}

/* sock:keepalive([idle_timeout [, pool_size]]) → true | nil, err. The socket is closed after. */
static int l_keepalive(lua_State *L)
{
    struct lsock *k = luaL_checkudata(L, 1, SOCK_MT);
    double idle = check_timeout(L, 2, DEFAULT_IDLE);
    lua_Integer size = luaL_optinteger(L, 3, DEFAULT_POOL);
    luaL_argcheck(L, size >= 0, 3, "pool size must be >= 0");
    if (k->rd.op != OP_NONE || k->wr.op != OP_NONE)
        return luaL_error(L, "sock:keepalive: %s (another operation is waiting on it)", BUSY);
    if (!k->s) {
        lua_pushnil(L);
        lua_pushstring(L, mh_socket_err_closed);
        return 2;
    }
    mh_task_unlink(&k->owner);
    struct mh_socket *s = k->s;
    k->s = NULL;
    const char *err = mh_socket_pool_put(k->st->pool, s, k->key, idle, (size_t)size);
    release_slot(k);
    if (err) {
        lua_pushnil(L);
        lua_pushstring(L, err);
        return 2;
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* sock:reused() → how many times this connection came from the pool (0: fresh). */
static int l_reused(lua_State *L)
{
    struct lsock *k = luaL_checkudata(L, 1, SOCK_MT);
    lua_pushinteger(L, k->s ? (lua_Integer)k->s->reused : 0);
    return 1;
}

/*
 * sock:tls_resumed() → whether this socket's TLS handshake resumed the
 * session saved from an earlier one to the same key (false without TLS, and
 * for a connection from the pool: it made no handshake of its own).
 */
static int l_tls_resumed(lua_State *L)
{
    struct lsock *k = luaL_checkudata(L, 1, SOCK_MT);
    lua_pushboolean(L, k->s && k->tls_resumed);
    return 1;
}

static int l_tostring(lua_State *L)
{
    struct lsock *k = luaL_checkudata(L, 1, SOCK_MT);
    lua_pushfstring(L, "moonhttp.Socket (%s)", k->s ? k->key : "closed");
    return 1;
}

/* core.tcp() → a new, unconnected socket. */
static int l_tcp(lua_State *L)
{
    struct sock_state *st = state_of(L);
    struct lsock *k = lua_newuserdatauv(L, sizeof *k, 1);
    memset(k, 0, sizeof *k);
    k->st = st;
    k->rd.k = k->wr.k = k;
    k->rd.anchor = k->wr.anchor = LUA_NOREF;
    k->tmo_connect = k->tmo_send = k->tmo_read = DEFAULT_TIMEOUT;
    luaL_setmetatable(L, SOCK_MT);
    return 1;
}

void mh_socket_open(lua_State *L)
{
    static const luaL_Reg methods[] = {
        {"connect", l_connect},
        {"tls_handshake", l_tls_handshake},
        {"send", l_send},
        {"receive", l_receive},
        {"receiveany", l_receiveany},
        {"receive_until", l_receive_until},
        {"settimeouts", l_settimeouts},
        {"setdeadline", l_setdeadline},
        {"keepalive", l_keepalive},
        {"reused", l_reused},
        {"tls_resumed", l_tls_resumed},
        {"close", l_close},
        {NULL, NULL},
    };
    static const luaL_Reg meta[] = {
        {"__gc", l_close},
        {"__close", l_close},
        {"__tostring", l_tostring},
        {NULL, NULL},
    };
    static const luaL_Reg state_meta[] = {{"__gc", state_gc}, {NULL, NULL}};
    mh_lua_register_type(L,
                         &(struct mh_lua_type){.name = SOCK_MT, .methods = methods, .meta = meta});
    mh_lua_register_type(L, &(struct mh_lua_type){.name = STATE_MT, .meta = state_meta});
    lua_pushcfunction(L, l_tcp);
    lua_setfield(L, -2, "tcp");
}
