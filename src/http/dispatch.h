#ifndef MH_DISPATCH_H
#define MH_DISPATCH_H
/*
 * From a parsed request head to an answer: route it, answer redirects and
 * 404/405 (with the script's own handlers when it set them), or start the
 * matched Lua handler.
 */
struct mh_conn;

void mh_dispatch(struct mh_conn *c);

/*
 * --dev: while the last reload failed (the previous code keeps serving),
 * every response carries the error's first line in X-Moonhttp-Reload-Error,
 * so the developer sees it in the browser. Called again after a response is
 * reset (a handler error).
 */
void mh_dispatch_dev_headers(struct mh_conn *c);

#endif
