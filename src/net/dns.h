#ifndef MH_NET_DNS_H
#define MH_NET_DNS_H
/*
 * Name resolution that never blocks the loop. Numeric addresses are parsed
 * in place; names are looked up by getaddrinfo on a short-lived detached
 * thread, whose answer comes back to the loop through an ev_async (no
 * signals), and are cached for MH_DNS_TTL seconds.
 */
#include <ev.h>
#include <stdint.h>
#include <sys/socket.h>

#define MH_DNS_MAX_ADDRS 4
#define MH_DNS_TTL       30.0

struct mh_dns;
struct mh_dns_job;

struct mh_dns_addrs {
    struct sockaddr_storage a[MH_DNS_MAX_ADDRS];
    socklen_t len[MH_DNS_MAX_ADDRS];
    int n;
};

/*
 * The resolver's errors, compared by identity and printed as they are; each
 * starts with "dns: ", which is how a caller above that keeps its own error
 * kinds (client/client_err.h) knows them.
 */
extern const char mh_dns_err_no_host[]; /* "dns: no such host" */
extern const char mh_dns_err_nomem[];   /* "dns: out of memory" */
extern const char mh_dns_err_thread[];  /* "dns: cannot start a lookup thread" */

struct mh_dns_query;
/* err is NULL on success, else one of the mh_dns_err_ above; addrs carry the query's port. */
typedef void (*mh_dns_cb)(struct mh_dns_query *q, const char *err,
                          const struct mh_dns_addrs *addrs);

/* A pending lookup, embedded in its owner; cancel it before freeing the owner. */
struct mh_dns_query {
    mh_dns_cb cb;
    struct mh_dns_job *_job;
};

struct mh_dns *mh_dns_new(struct ev_loop *loop);
/* Cancels pending lookups (their threads finish on their own and free what they hold). */
void mh_dns_free(struct mh_dns *d);

/*
 * Resolves host:port. Returns 1 with out filled when the answer is known now
 * (numeric or cached), 0 when q->cb will be called from the loop later, -1 on
 * immediate failure (*err set).
 */
int mh_dns_resolve(struct mh_dns *d, const char *host, uint16_t port, struct mh_dns_query *q,
                   struct mh_dns_addrs *out, const char **err);
void mh_dns_cancel(struct mh_dns_query *q);

#endif
