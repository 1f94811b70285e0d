#include "acme_challenge.h"

#include "req.h"
#include "shm_dict.h"

#include <llhttp.h>
#include <string.h>

/* ACME tokens are base64url of at least 128 bits (RFC 8555 section 8.1); a CA's are ~43 chars. */
#define TOKEN_MAX 255
/* A key authorization is token "." thumbprint: under 300 bytes. */
#define KEYAUTH_MAX 512

static bool token_ok(const char *t, size_t len)
{
    if (len == 0 || len > TOKEN_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = t[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

static void challenge_start(const struct mh_handler *base, struct mh_req *r)
{
    const struct mh_acme_challenge *h = (const struct mh_acme_challenge *)base;
    static const char prefix[] = MH_ACME_CHALLENGE_PREFIX;
    const size_t plen = sizeof prefix - 1;
    const char *path = mh_req_head(r) + r->head.path.off;
    size_t len = r->head.path.len;
    if (len < plen || memcmp(path, prefix, plen) != 0) {
        mh_req_start(r, h->next);
        return;
    }
    if (r->head.method != HTTP_GET && r->head.method != HTTP_HEAD) {
        r->res.status = 405;
        mh_req_set_header(r, "Allow", 5, "GET, HEAD", 9, true);
        mh_req_write(r, "405 Method Not Allowed\n", 23);
        mh_req_finish(r);
        return;
    }
    const char *token = path + plen;
    size_t tlen = len - plen;
    char key[sizeof "http01:" + TOKEN_MAX], value[KEYAUTH_MAX];
    struct mh_shm_value v = {0};
    if (token_ok(token, tlen)) {
        memcpy(key, "http01:", 7);
        memcpy(key + 7, token, tlen);
        if (mh_shm_dict_get(h->zone, key, 7 + tlen, &v, value, sizeof value) != NULL)
            v.type = MH_SHM_NONE;
    }
    if (v.type != MH_SHM_STRING || v.len > sizeof value) {
        mh_req_respond(r, 404, "404 Not Found\n");
        return;
    }
    mh_req_set_header(r, "Content-Type", 12, "text/plain", 10, true);
    mh_req_write(r, value, v.len);
    mh_req_finish(r);
}

static const struct mh_handler_ops challenge_ops = {.name = "acme", .start = challenge_start};

void mh_acme_challenge_init(struct mh_acme_challenge *h, const struct mh_handler *next,
                            struct mh_shm_dict *zone)
{
    h->base.ops = &challenge_ops;
    h->next = next;
    h->zone = zone;
}
