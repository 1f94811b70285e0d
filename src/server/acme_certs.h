#ifndef MH_ACME_CERTS_H
#define MH_ACME_CERTS_H
/*
 * The certificates the ACME client installed in this worker
 * (core.acme.install), per listener: what new handshakes on an ACME
 * listener get, before the listener's configured ones. They outlive a
 * reload in place (SIGHUP with one worker), which rebuilds every TLS
 * configuration from the settings: without them an ACME listener would
 * fall back to having no certificate until its client installed again.
 */
#include <stddef.h>

#include "config.h"
#include "listener.h"

struct mh_acme_certs {
    char *cert[MH_MAX_LISTEN]; /* PEM files; NULL: nothing installed on that listener */
    char *key[MH_MAX_LISTEN];
};

/*
 * Installs cert/key on listener `index` (0-based in ls[0..n-1], configured by c),
 * which must be a TLS listener with acme: its TLS server swaps configurations
 * (tls.h's mh_tls_reload: open connections keep theirs, no handshake fails).
 * The certificate's names (SAN, CN) choose it by SNI; it is also the default.
 * 0, or -1 with err (nothing changed).
 */
int mh_acme_certs_install(struct mh_acme_certs *a, struct mh_listener *ls, size_t n,
                          const struct mh_config *c, size_t index, const char *cert,
                          const char *key, char *err, size_t errlen);

/*
 * The certificates listener i is to be (re)loaded with: the configured ones
 * (mh_config_listen_tls), after the installed one if any, composed in buf
 * (which borrows the strings: do not clear it). NULL: plain TCP.
 */
const struct mh_tls_certs *mh_acme_certs_for(const struct mh_acme_certs *a,
                                             const struct mh_config *c, size_t i,
                                             struct mh_tls_certs *buf);

void mh_acme_certs_free(struct mh_acme_certs *a);

#endif
