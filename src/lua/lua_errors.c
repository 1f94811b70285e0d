#define _GNU_SOURCE /* memmem */
#include "lua_errors.h"

#include "lua_handler.h"
#include "lua_sched.h"
#include "lua_vm.h"
#include "req.h"

#include <lauxlib.h>
#include <string.h>

static void reset_to_500(struct mh_gen *g, struct mh_req *r)
{
    mh_response_reset(&r->res);
    r->res.status = 500;
    mh_lua_dev_headers(g, r);
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

static bool accepts_html(const struct mh_req *r)
{
    size_t len;
    const char *v = mh_req_header(r, "accept", 6, &len);
    return v && memmem(v, len, "text/html", 9) != NULL;
}

static void write_str(struct mh_req *r, const char *s)
{
    mh_req_write(r, s, strlen(s));
}

void mh_lua_answer_error(struct mh_task *t, struct mh_req *r, const char *trace)
{
    reset_to_500(t->gen, r);
    if (!t->gen->config->dev) {
        write_str(r, "500 Internal Server Error\n");
        return;
    }
    if (!accepts_html(r)) {
        write_str(r, trace);
        write_str(r, "\n");
        return;
    }
    static const char type[] = "text/html; charset=utf-8";
    mh_response_header(&r->res, "Content-Type", 12, type, sizeof type - 1, true);
    struct mh_buf page = {0};
    mh_buf_append_str(&page, "<!doctype html>\n<html><head><meta charset=\"utf-8\">"
                             "<title>500 Internal Server Error</title></head>\n<body>\n"
                             "<h1>500 Internal Server Error</h1>\n<p>A handler raised an error "
                             "(moonhttp --dev; the log has it too):</p>\n<pre>");
    append_escaped(&page, trace);
    mh_buf_append_str(&page, "</pre>\n</body></html>\n");
    mh_req_write(r, page.data ? page.data : "", page.len);
    mh_buf_free(&page);
}

/*
 * core.reset_for_error(res): the response becomes an empty 500 for the app's
 * error handler to fill. False when it cannot: its head has gone out.
 */
static int l_reset_for_error(lua_State *L)
{
    struct mh_lua_res *r = luaL_checkudata(L, 1, "moonhttp.Response");
    struct mh_req *c = r->r;
    if (!c)
        return luaL_error(L, "request finished: this res belongs to a handler that has returned");
    bool ok = !c->closed && !c->res.head_sent;
    if (ok)
        reset_to_500(mh_gen_of(L), c);
    lua_pushboolean(L, ok);
    return 1;
}

void mh_lua_errors_open(lua_State *L)
{
    lua_pushcfunction(L, l_reset_for_error);
    lua_setfield(L, -2, "reset_for_error");
}
