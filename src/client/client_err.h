#ifndef MH_CLIENT_ERR_H
#define MH_CLIENT_ERR_H
/*
 * The outbound client's errors: one constant each, so callers compare by
 * identity (req->err == mh_client_err_refused) and print them as they are.
 * Every error the client reports is one of these (or a "tls: ..." string of
 * client_tls.c about the configuration). Each belongs to a kind, a short
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
extern const char mh_client_err_dns_no_host[];      /* "dns: no such host" */
extern const char mh_client_err_dns_nomem[];        /* "dns: out of memory" */
extern const char mh_client_err_dns_thread[];       /* "dns: cannot start a lookup thread" */
extern const char mh_client_err_tls_nomem[];        /* "tls: out of memory" */
extern const char mh_client_err_tls_seed[];         /* "tls: cannot seed the random generator" */
extern const char mh_client_err_tls_config[];       /* "tls: cannot set up a configuration" */
extern const char mh_client_err_tls_session[];      /* "tls: cannot set up a session" */
extern const char mh_client_err_tls_handshake[];    /* "tls: handshake failed" */
extern const char mh_client_err_tls_alert[];        /* "tls: the server sent a fatal alert" */
extern const char mh_client_err_tls_closed[];  /* "tls: connection closed during the handshake" */
extern const char mh_client_err_tls_verify[];  /* "tls: certificate verification failed" */
extern const char mh_client_err_tls_revoked[]; /* "tls: certificate revoked" */
extern const char
    mh_client_err_tls_unknown_ca[];             /* "tls: certificate signed by unknown authority" */
extern const char mh_client_err_tls_hostname[]; /* "tls: certificate hostname mismatch" */
extern const char mh_client_err_tls_not_yet_valid[]; /* "tls: certificate not yet valid" */
extern const char mh_client_err_tls_expired[];       /* "tls: certificate expired" */

/*
 * The kinds: "timeout", "refused", "reset", "closed", "malformed", "tls",
 * "dns", "connect" (the connection could not be made: no route, no socket),
 * "nomem". NULL for NULL; "error" for a string that is none of the above.
 * The string is static; compare it with strcmp.
 */
const char *mh_client_err_kind(const char *err);

#endif
