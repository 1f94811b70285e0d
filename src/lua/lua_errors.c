#define _GNU_SOURCE /* memmem */
#include "lua_errors.h"

#include "conn.h"
#include "dispatch.h"
#include "lua_sched.h"
#include "lua_vm.h"

#include <lauxlib.h>
#include <string.h>

static void reset_to_500(struct mh_conn *c)
{
    mh_response_reset(&c->res);
    c->res.status = 500;
    mh_dispatch_dev_headers(c);
}

/* Appends s to b with &, <, >, " and ' as entities. */
static void append_escaped(struct mh_buf *b, const char *s)
{
    for (; *s; s++) {
        const char *ent = NULL;
        switch (*s) {
        case '&':
            ent = "&amp;";
            break;
        case '<':
            ent = "&lt;";
            break;
        case '>':
            ent = "&gt;";
            break;
        case '"':
            ent = "&quot;";
            break;
        case '\'':
            ent = "&#39;";
            break;
        }
        if (ent)
            mh_buf_append_str(b, ent);
        else
            mh_buf_append(b, s, 1);
    }
}

static bool accepts_html(const struct mh_conn *c)
{
    int i = mh_request_find_header(&c->req, mh_conn_head(c), "accept", 6, 0);
    if (i < 0)
        return false;
    struct mh_slice v = c->req.headers[i].value;
    return memmem(mh_conn_head(c) + v.off, v.len, "text/html", 9) != NULL;
}

void mh_lua_answer_error(struct mh_task *t, struct mh_conn *c, const char *trace)
{
    struct mh_buf *body = &c->res.body;
    reset_to_500(c);
    if (!t->gen->config->dev) {
        mh_buf_append_str(body, "500 Internal Server Error\n");
        return;
    }
    if (!accepts_html(c)) {
        mh_buf_append_str(body, trace);
        mh_buf_append(body, "\n", 1);
        return;
    }
    static const char type[] = "text/html; charset=utf-8";
    mh_response_header(&c->res, "Content-Type", 12, type, sizeof type - 1, true);
    mh_buf_append_str(body, "<!doctype html>\n<html><head><meta charset=\"utf-8\">"
                            "<title>500 Internal Server Error</title></head>\n<body>\n"
                            "<h1>500 Internal Server Error</h1>\n<p>A handler raised an error "
                            "(moonhttp --dev; the log has it too):</p>\n<pre>");
    append_escaped(body, trace);
    mh_buf_append_str(body, "</pre>\n</body></html>\n");
}

/*
 * core.reset_for_error(res): the response becomes an empty 500 for the app's
 * error handler to fill. False when it cannot: its head has gone out.
 */
static int l_reset_for_error(lua_State *L)
{
    struct mh_lua_res *r = luaL_checkudata(L, 1, "moonhttp.Response");
    struct mh_conn *c = r->conn;
    if (!c)
        return luaL_error(L, "request finished: this res belongs to a handler that has returned");
    bool ok = !c->closed && !c->res.head_sent;
    if (ok)
        reset_to_500(c);
    lua_pushboolean(L, ok);
    return 1;
}

void mh_lua_errors_open(lua_State *L)
{
    lua_pushcfunction(L, l_reset_for_error);
    lua_setfield(L, -2, "reset_for_error");
}
