#ifndef MH_ACME_CHALLENGE_H
#define MH_ACME_CHALLENGE_H
/*
 * ACME's HTTP-01 challenge (RFC 8555 section 8.3), answered in C in front of
 * an app on the plain listeners of a server with an ACME listener: a request
 * for /.well-known/acme-challenge/<token> gets the key authorization the Lua
 * ACME client stored as "http01:<token>" in the shared zone (any worker
 * answers, whichever ordered), or a 404; it never reaches the app's routes,
 * so no route of the app can shadow or see a challenge. Every other request
 * goes to `next` untouched.
 */
#include "handler.h"

#define MH_ACME_CHALLENGE_PREFIX "/.well-known/acme-challenge/"

struct mh_shm_dict;

struct mh_acme_challenge {
    struct mh_handler base;
    const struct mh_handler *next; /* the app */
    struct mh_shm_dict *zone;      /* MH_ACME_ZONE */
};

void mh_acme_challenge_init(struct mh_acme_challenge *h, const struct mh_handler *next,
                            struct mh_shm_dict *zone);

#endif
