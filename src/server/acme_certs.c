#include "acme_certs.h"

#include "tls.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct mh_tls_certs *mh_acme_certs_for(const struct mh_acme_certs *a,
                                             const struct mh_config *c, size_t i,
                                             struct mh_tls_certs *buf)
{
    const struct mh_tls_certs *conf = mh_config_listen_tls(c, i);
    if (!conf || !conf->acme || !a->cert[i])
        return conf;
    *buf = *conf;
    buf->cert[0] = a->cert[i];
    buf->key[0] = a->key[i];
    buf->n = 1;
    /* The configured ones after it, for the names it does not cover; the first of them was
     * the default, now the installed one is. */
    for (size_t k = 0; k < conf->n && buf->n < MH_MAX_CERTS; k++, buf->n++) {
        buf->cert[buf->n] = conf->cert[k];
        buf->key[buf->n] = conf->key[k];
    }
    return buf;
}

int mh_acme_certs_install(struct mh_acme_certs *a, struct mh_listener *ls, size_t n,
                          const struct mh_config *c, size_t index, const char *cert,
                          const char *key, char *err, size_t errlen)
{
    const struct mh_tls_certs *conf = index < n ? mh_config_listen_tls(c, index) : NULL;
    if (index >= n) {
        snprintf(err, errlen, "no listener %zu (there are %zu)", index + 1, n);
        return -1;
    }
    if (!conf || !conf->acme || !ls[index].tls) {
        snprintf(err, errlen, "listener %zu (%s) is not a TLS listener with acme", index + 1,
                 ls[index].addr);
        return -1;
    }
    char *c2 = strdup(cert), *k2 = strdup(key);
    if (!c2 || !k2) {
        free(c2);
        free(k2);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    char *old_cert = a->cert[index], *old_key = a->key[index];
    a->cert[index] = c2;
    a->key[index] = k2;
    struct mh_tls_certs buf;
    if (mh_tls_reload(ls[index].tls, mh_acme_certs_for(a, c, index, &buf), err, errlen) < 0) {
        a->cert[index] = old_cert;
        a->key[index] = old_key;
        free(c2);
        free(k2);
        return -1;
    }
    free(old_cert);
    free(old_key);
    return 0;
}

void mh_acme_certs_free(struct mh_acme_certs *a)
{
    for (size_t i = 0; i < MH_MAX_LISTEN; i++) {
        free(a->cert[i]);
        free(a->key[i]);
        a->cert[i] = a->key[i] = NULL;
    }
}
