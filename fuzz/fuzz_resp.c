/*
 * libFuzzer target for wire/redis_resp.c, what moonhttp.redis reads its replies
 * with (src/lua/lua_redis_resp.c). Besides not crashing: a whole reply lies
 * inside the input and is whole in any longer input too; every prefix of
 * it asks for more with a need past the prefix and within the reply; and
 * walking it item by item, as the binding does, ends exactly at its size.
 */
#include "redis_resp.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Walks the value at *p as lua_redis_resp.c's push_value does; aborts on anything mh_resp_reply
 * should have refused. */
static void walk(const char **p, const char *end)
{
    struct mh_resp_item it;
    long n = mh_resp_item(*p, (size_t)(end - *p), &it);
    if (n <= 0 || n > end - *p)
        abort();
    *p += n;
    if (it.type == '$' && it.n >= 0 && (it.data < *p - n || it.data + it.len > *p))
        abort();
    if (it.type == '*')
        for (int64_t i = 0; i < it.n; i++)
            walk(p, end);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a copy of exactly the input, so ASan sees any read past the end */
    char *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    size_t need = 0;
    long whole = mh_resp_reply(buf, size, &need);
    if (whole == MH_RESP_MORE && need <= size)
        abort();
    if (whole > 0) {
        if ((size_t)whole > size)
            abort();
        const char *p = buf;
        walk(&p, buf + whole);
        if (p != buf + whole)
            abort();
        for (size_t cut = 0; cut < (size_t)whole; cut += 1 + cut / 8) {
            long got = mh_resp_reply(buf, cut, &need);
            if (got != MH_RESP_MORE || need <= cut || need > (size_t)whole)
                abort();
        }
    }
    free(buf);
    return 0;
}
