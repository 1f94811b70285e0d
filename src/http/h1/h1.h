#ifndef MH_H1_H
#define MH_H1_H
/*
 * HTTP/1.x on a neutral connection (conn_impl.h): the protocol table conn.c
 * calls once a connection's first bytes are not HTTP/2's. A connection
 * parses requests with llhttp and hands each to its root handler as a
 * struct mh_req (h1_conn.c implements the request ops); it serializes the
 * response (head from the pairs, chunked framing) into the connection's
 * wire queue.
 *
 * State machine (struct mh_h1, h1_impl.h):
 *
 *   IDLE --first byte--> HEAD --head parsed--> HANDLER --response done-->
 *     DRAIN (discard unread request body) --> IDLE / HEAD (next pipelined)
 *   any state --close--> the connection lingers (conn.c: output flushed,
 *     write side shut, reading until EOF)
 *
 * Requests already in the read buffer are handled back to back and their
 * responses leave in one write.
 */
#include "conn_impl.h"

extern const struct mh_conn_proto mh_h1_proto;

#endif
