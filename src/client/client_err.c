#include "client_err.h"

#include <stddef.h>
#include <string.h>

const char mh_client_err_refused[] = "connection refused";
const char mh_client_err_connect_timeout[] = "connect timeout";
const char mh_client_err_connect_failed[] = "connect failed";
const char mh_client_err_socket[] = "cannot create a socket";
const char mh_client_err_nomem[] = "out of memory";
const char mh_client_err_reset_sending[] = "connection reset while sending the request";
const char mh_client_err_reset_before[] = "connection reset before the response";
const char mh_client_err_reset_middle[] = "connection reset in the middle of the response";
const char mh_client_err_closed_before[] = "connection closed before the response";
const char mh_client_err_closed_body[] = "connection closed in the middle of the body";
const char mh_client_err_closed_head[] = "malformed response: connection closed in the head";
const char mh_client_err_bad_status[] = "malformed response: bad status line";
const char mh_client_err_bad_head[] = "malformed response: bad head";
const char mh_client_err_bad_chunked[] = "malformed response: bad chunked encoding";
const char mh_client_err_bad_body[] = "malformed response: bad body";
const char mh_client_err_head_too_large[] = "malformed response: head too large";
const char mh_client_err_timeout_dns[] = "timeout resolving the host";
const char mh_client_err_timeout_tls[] = "tls handshake timeout";
const char mh_client_err_timeout_response[] = "timeout waiting for the response";
const char mh_client_err_timeout_body[] = "timeout reading the body";
const char mh_client_err_timeout_send[] = "timeout sending the request";

/*
 * Kinds by identity; the "tls: " strings of net/client_tls.h (the handshake,
 * verification, a CA file that does not load) and the "dns: " ones of
 * net/dns.h are matched by their prefix, so a new one there needs no entry
 * here.
 */
static const struct {
    const char *err, *kind;
} kinds[] = {
    {mh_client_err_refused, "refused"},
    {mh_client_err_connect_timeout, "timeout"},
    {mh_client_err_connect_failed, "connect"},
    {mh_client_err_socket, "connect"},
    {mh_client_err_nomem, "nomem"},
    {mh_client_err_reset_sending, "reset"},
    {mh_client_err_reset_before, "reset"},
    {mh_client_err_reset_middle, "reset"},
    {mh_client_err_closed_before, "closed"},
    {mh_client_err_closed_body, "closed"},
    {mh_client_err_closed_head, "closed"},
    {mh_client_err_bad_status, "malformed"},
    {mh_client_err_bad_head, "malformed"},
    {mh_client_err_bad_chunked, "malformed"},
    {mh_client_err_bad_body, "malformed"},
    {mh_client_err_head_too_large, "malformed"},
    {mh_client_err_timeout_dns, "timeout"},
    {mh_client_err_timeout_tls, "timeout"},
    {mh_client_err_timeout_response, "timeout"},
    {mh_client_err_timeout_body, "timeout"},
    {mh_client_err_timeout_send, "timeout"},
};

const char *mh_client_err_kind(const char *err)
{
    if (!err)
        return NULL;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (kinds[i].err == err)
            return kinds[i].kind;
    if (strncmp(err, "tls:", 4) == 0)
        return "tls";
    if (strncmp(err, "dns:", 4) == 0)
        return "dns";
    return "error";
}
