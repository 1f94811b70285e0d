#ifndef MH_REDIS_RESP_H
#define MH_REDIS_RESP_H
/*
 * Redis replies (RESP2) cut from a buffer of received bytes: simple strings
 * (+), errors (-), integers (:), bulk strings ($) and arrays (*). Pure
 * functions over caller-owned bytes: nothing is copied or allocated, every
 * slice points into the input. moonhttp.redis reads its replies with them
 * (src/lua/lua_redis_resp.c); they accept exactly what the client's Lua reader
 * accepted before them: a line ends at '\n' with an optional '\r' before
 * it, a number is an optional '-' and digits within int64's range, a bulk
 * is followed by "\r\n", lengths are -1 (null) or 0..MH_RESP_MAX_BULK, and
 * arrays nest at most MH_RESP_MAX_DEPTH deep.
 */
#include <stddef.h>
#include <stdint.h>

#define MH_RESP_MAX_BULK  (512L * 1024 * 1024) /* Redis's own proto-max-bulk-len */
#define MH_RESP_MAX_DEPTH 32                   /* an array inside 32 others is the last allowed */

/* The answers besides a size. */
#define MH_RESP_MORE 0    /* not whole yet: read more */
#define MH_RESP_BAD  (-1) /* not RESP: the connection is unusable */

/* One item: the head of an array, or a whole scalar. */
struct mh_resp_item {
    char type;        /* '+', '-', ':', '$' or '*' */
    const char *data; /* '+', '-': the line's text; '$': the bulk's bytes */
    size_t len;
    int64_t n;   /* ':': the integer; '$', '*': the length or count, -1 for null */
    size_t need; /* after MH_RESP_MORE: the item's size is at least this */
};

/*
 * Reads the item at the start of buf[0..len): its size (for a bulk, its
 * head, bytes and "\r\n"; for an array, its head only: the elements follow)
 * with *it filled; MH_RESP_MORE with it->need set; or MH_RESP_BAD.
 */
long mh_resp_item(const char *buf, size_t len, struct mh_resp_item *it);

/*
 * The size of the whole reply at the start of buf[0..len) (an array with
 * every element inside it); MH_RESP_MORE with *need a lower bound on that
 * size (exact once the head of a bulk at its end has arrived); or
 * MH_RESP_BAD.
 */
long mh_resp_reply(const char *buf, size_t len, size_t *need);

#endif
