#ifndef MH_DISPATCH_H
#define MH_DISPATCH_H
/*
 * From a parsed request to its handler, above the protocol: route it
 * (router.h), answer redirects and 404/405 (with the app's own handlers when
 * it set them), or start the matched handler, Lua or C alike.
 *
 * The app that owns a router describes it as a site. The Lua layer builds one
 * per generation (lua_load.c) and its app handler (lua_handler.c) calls
 * mh_dispatch from its own start, after
 * pinning the generation; nothing here knows Lua.
 */
#include "handler.h"
#include "router.h"

struct mh_req;

struct mh_site {
    const struct mh_router *router;
    const struct mh_handler_table *handlers; /* the router's handler ids index this */
    const struct mh_handler *not_found;      /* NULL: mh_dispatch_not_found_text */
    const struct mh_handler
        *method_not_allowed; /* NULL: mh_dispatch_not_allowed_text; Allow is set */
    enum mh_clean_mode clean;
    int redirect_code; /* for non-canonical paths: 301 or 307 */
    /*
     * Called after routing, before the handler starts (also for 404/405
     * handlers, not for redirects): the place to install output filters on r
     * (compression) from route or server settings. NULL: none.
     */
    void (*prepare)(void *ud, struct mh_req *r);
    void *prepare_ud;
};

/*
 * Routes r on site and starts its handler (r->routed: route, captures, allow
 * are set). Ends with exactly one handler started, or the request answered
 * and finished here.
 */
void mh_dispatch(struct mh_req *r, const struct mh_site *site);

/*
 * The bodies of the 404 and 405 answered here without an app handler. The
 * Lua layer answers with the same when middleware or http.on_error wraps
 * its default 404/405 (core.default_text), so an app sees one text either way.
 */
extern const char mh_dispatch_not_found_text[];
extern const char mh_dispatch_not_allowed_text[];

#endif
