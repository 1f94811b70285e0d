/*
 * RESP2 replies: see resp.h.
 */
#include "redis_resp.h"

#include <stdbool.h>
#include <string.h>

/* An optional '-' then 1+ digits, all of s[0..n), within int64 (INT64_MIN included). */
static bool parse_int(const char *s, size_t n, int64_t *out)
{
    bool neg = n > 0 && s[0] == '-';
    size_t i = neg ? 1 : 0;
    if (i == n)
        return false;
    uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned char)s[i] - (unsigned)'0';
        if (d > 9 || v > (limit - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

long mh_resp_item(const char *buf, size_t len, struct mh_resp_item *it)
{
    const char *nl = len ? memchr(buf, '\n', len) : NULL;
    if (!nl) {
        it->need = len + 1;
        return MH_RESP_MORE;
    }
    size_t head = (size_t)(nl - buf) + 1;
    size_t text = head - 1; /* the line without '\n' and an '\r' before it */
    if (text > 0 && buf[text - 1] == '\r')
        text--;
    if (text == 0)
        return MH_RESP_BAD;
    it->type = buf[0];
    it->data = buf + 1;
    it->len = text - 1;
    switch (buf[0]) {
    case '+':
    case '-':
        return (long)head;
    case ':':
        return parse_int(buf + 1, text - 1, &it->n) ? (long)head : MH_RESP_BAD;
    case '*':
        if (!parse_int(buf + 1, text - 1, &it->n) || it->n < -1 || it->n > MH_RESP_MAX_BULK)
            return MH_RESP_BAD;
        return (long)head;
    case '$':
        if (!parse_int(buf + 1, text - 1, &it->n) || it->n < -1 || it->n > MH_RESP_MAX_BULK)
            return MH_RESP_BAD;
        if (it->n == -1) {
            it->data = NULL;
            it->len = 0;
            return (long)head;
        }
        it->len = (size_t)it->n;
        if (len - head < it->len + 2) {
            it->need = head + it->len + 2;
            return MH_RESP_MORE;
        }
        it->data = buf + head;
        if (buf[head + it->len] != '\r' || buf[head + it->len + 1] != '\n')
            return MH_RESP_BAD;
        return (long)(head + it->len + 2);
    default:
        return MH_RESP_BAD;
    }
}

/*
 * Walks items with a count of the elements still due in each open array,
 * not recursion, so that a deep reply costs no C stack; an array (not a
 * null one) met inside MH_RESP_MAX_DEPTH others is refused, as the Lua
 * reader did.
 */
long mh_resp_reply(const char *buf, size_t len, size_t *need)
{
    int64_t left[MH_RESP_MAX_DEPTH + 1];
    int depth = 0;
    size_t pos = 0;
    for (;;) {
        struct mh_resp_item it;
        long n = mh_resp_item(buf + pos, len - pos, &it);
        if (n == MH_RESP_BAD)
            return MH_RESP_BAD;
        if (n == MH_RESP_MORE) {
            *need = pos + it.need;
            return MH_RESP_MORE;
        }
        pos += (size_t)n;
        if (it.type == '*' && it.n >= 0) {
            if (depth > MH_RESP_MAX_DEPTH)
                return MH_RESP_BAD;
            if (it.n > 0) {
                left[depth++] = it.n;
                continue;
            }
        }
        /* one value is whole: close the arrays it completes */
        while (depth > 0 && --left[depth - 1] == 0)
            depth--;
        if (depth == 0)
            return (long)pos;
    }
}
