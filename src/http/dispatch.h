#ifndef MH_DISPATCH_H
#define MH_DISPATCH_H
/*
 * From a parsed request head to an answer: route it, answer redirects and
 * 404/405 (with the script's own handlers when it set them), or start the
 * matched Lua handler.
 */
struct mh_conn;

void mh_dispatch(struct mh_conn *c);

#endif
