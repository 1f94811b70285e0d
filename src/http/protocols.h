#ifndef MH_PROTOCOLS_H
#define MH_PROTOCOLS_H
/*
 * The protocols a server's connections may speak, for mh_http_ctx_init:
 * HTTP/1 (h1/) and HTTP/2 (h2/). The neutral connection (conn.c) knows
 * neither; this is the one place that names both.
 */
#include "conn.h"

extern const struct mh_conn_protos mh_http_protos;

#endif
