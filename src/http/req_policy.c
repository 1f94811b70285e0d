#include "req_policy.h"

#include "log.h"

#include <stdio.h>
#include <string.h>

void mh_policy_start(struct mh_req *r, struct mh_req_clock *k, struct mh_conn *c)
{
    r->started = ev_now(c->h->loop);
    k->write = mh_conn_after(c, c->h->limits->write_timeout);
    c->refs++; /* the handler's, dropped in mh_policy_end */
}

bool mh_policy_first_ask(struct mh_req *r, bool declared)
{
    if (r->body_asked)
        return false;
    r->body_asked = true;
    if (r->body_state == MH_BODY_MORE && declared && r->head.content_length > r->max_body) {
        r->body_state = MH_BODY_TOO_LARGE;
        return true;
    }
    return false;
}

enum mh_req_late mh_policy_late(const struct mh_req *r, const struct mh_req_clock *k,
                                bool body_clock_runs, ev_tstamp now)
{
    if (k->write && now >= k->write)
        return MH_LATE_RESPONSE;
    if (r->body_state != MH_BODY_MORE)
        return MH_LATE_NONE;
    /*
     * read_timeout bounds the whole request: past it the body is late
     * whether or not it was also stalled, and the handler may still answer.
     */
    if (k->read && now >= k->read)
        return MH_LATE_BODY;
    if (body_clock_runs && k->body && now >= k->body)
        return MH_LATE_BODY_STALLED;
    return MH_LATE_NONE;
}

void mh_policy_body_late(struct mh_req *r, struct mh_req_clock *k)
{
    r->body_state = MH_BODY_TIMEOUT;
    k->read = k->body = 0;
}

bool mh_policy_body_stalled(struct mh_req *r, struct mh_req_clock *k, const struct mh_conn *c,
                            int32_t stream, bool waiting)
{
    bool answer = waiting && !r->res.head_sent;
    const char *cut = stream ? "RST_STREAM" : "response under way: closing";
    char where[24] = "";
    if (stream)
        snprintf(where, sizeof where, "stream %d: ", (int)stream);
    /* info, as nginx logs it: the client's doing, and one line per stalled request */
    mh_log(MH_LOG_INFO, "fd %d: %sbody timeout: no request body bytes for %g s (%llu received); %s",
           c->fd, where, c->h->limits->body_timeout, (unsigned long long)r->body_received,
           answer ? "408" : cut);
    r->body_state = MH_BODY_STALLED;
    k->read = k->body = 0;
    return answer;
}

bool mh_policy_answer_failed_body(struct mh_req *r)
{
    static const char large[] = "request body too large\n";
    static const char malformed[] = "400 Bad Request: malformed request body\n";
    static const char stalled[] = "408 Request Timeout: the request body stopped coming\n";
    struct mh_response *res = &r->res;
    int status;
    const char *text;
    size_t len;
    switch (r->body_state) {
    case MH_BODY_TOO_LARGE:
        status = 413, text = large, len = sizeof large - 1;
        break;
    case MH_BODY_BAD:
        status = 400, text = malformed, len = sizeof malformed - 1;
        break;
    case MH_BODY_STALLED:
        status = 408, text = stalled, len = sizeof stalled - 1;
        break;
    default:
        return false;
    }
    if (res->head_sent)
        return false;
    mh_response_reset(res);
    res->status = status;
    mh_outq_append(&res->body, text, len);
    return true;
}

const char *mh_policy_status_body(int status, char *buf, size_t len)
{
    snprintf(buf, len, "%d %s\n", status, mh_status_text(status));
    return buf;
}

const char *mh_policy_shed_response(size_t *len)
{
    static const char body[] = "server out of file descriptors; try again\n";
    static char bytes[256];
    static size_t n;
    if (!n)
        n = (size_t)snprintf(bytes, sizeof bytes,
                             "HTTP/1.1 503 Service Unavailable\r\n"
                             "Server: " MH_SERVER_NAME "\r\n"
                             "Content-Type: " MH_DEFAULT_TYPE "\r\n"
                             "Content-Length: %zu\r\n"
                             "Retry-After: 1\r\n"
                             "Connection: close\r\n\r\n%s",
                             sizeof body - 1, body);
    *len = n;
    return bytes;
}

void mh_policy_drop_response(struct mh_req *r)
{
    mh_req_run_filters(r, true); /* lets the filters free their state */
    mh_outq_clear(&r->res.body); /* releases referenced strings and files now */
}

void mh_policy_end(struct mh_req *r, struct mh_conn *c)
{
    struct mh_http_ctx *h = c->h;
    if (h->observe && !r->closed)
        h->observe(h->ud, r);
    if (r->on_end)
        r->on_end(r);
    r->on_end = NULL;
    r->handler = NULL;
    c->refs--; /* the handler's, taken in mh_policy_start */
}
