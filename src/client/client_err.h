#ifndef MH_CLIENT_ERR_H
#define MH_CLIENT_ERR_H
/*
 * The outbound client's errors: one constant each, so callers compare by
 * identity (req->err == mh_client_err_refused) and print them as they are.
 * Every error the client reports is one of these (or one of net/client_tls.h's
 * "tls: ..." strings, from the TLS handshake, or one of net/dns.h's
 * "dns: ..." strings, from resolving the host). Each belongs to a kind, a short
 * fixed word a Lua caller compares (`err == "timeout"`): Lua gets
 * `nil, kind, detail`, the detail being the constant itself.
 */

extern const char mh_client_err_refused[];         /* "connection refused" */
extern const char mh_client_err_connect_timeout[]; /* "connect timeout" */
extern const char mh_client_err_connect_failed[];  /* "connect failed" */
extern const char mh_client_err_socket[];          /* "cannot create a socket" */
extern const char mh_client_err_nomem[];           /* "out of memory" */
extern const char mh_client_err_reset_sending[]; /* "connection reset while sending the request" */
extern const char mh_client_err_reset_before[];  /* "connection reset before the response" */
extern const char
    mh_client_err_reset_middle[]; /* "connection reset in the middle of the response" */
extern const char mh_client_err_closed_before[]; /* "connection closed before the response" */
extern const char mh_client_err_closed_body[];   /* "connection closed in the middle of the body" */
extern const char
    mh_client_err_closed_head[]; /* "malformed response: connection closed in the head" */
extern const char mh_client_err_bad_status[];       /* "malformed response: bad status line" */
extern const char mh_client_err_bad_head[];         /* "malformed response: bad head" */
extern const char mh_client_err_bad_chunked[];      /* "malformed response: bad chunked encoding" */
extern const char mh_client_err_bad_body[];         /* "malformed response: bad body" */
extern const char mh_client_err_head_too_large[];   /* "malformed response: head too large" */
extern const char mh_client_err_timeout_dns[];      /* "timeout resolving the host" */
extern const char mh_client_err_timeout_tls[];      /* "tls handshake timeout" */
extern const char mh_client_err_timeout_response[]; /* "timeout waiting for the response" */
extern const char mh_client_err_timeout_body[];     /* "timeout reading the body" */
extern const char mh_client_err_timeout_send[];     /* "timeout sending the request" */

/*
 * The kinds: "timeout", "refused", "reset", "closed", "malformed", "tls",
 * "dns", "connect" (the connection could not be made: no route, no socket),
 * "nomem". NULL for NULL; "error" for a string that is none of the above.
 * The string is static; compare it with strcmp.
 */
const char *mh_client_err_kind(const char *err);

#endif
