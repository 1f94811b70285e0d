#ifndef MH_PG_WIRE_H
#define MH_PG_WIRE_H
/*
 * The messages of PostgreSQL's protocol 3.0 that make up most of a query:
 * the batch a client sends for a prepared statement (Bind, Execute, Sync)
 * and, cut from a buffer of received bytes, the backend messages of its
 * answer: a message head (type byte, 4-byte big-endian length counting
 * itself, body) and the fields of a DataRow. Pure functions over
 * caller-owned bytes: nothing is allocated, every slice points into the
 * input. moonhttp.pg's fast path (src/lua/lua_pgbind.c, lua_pgrows.c)
 * uses them; anything they do not take is left to the Lua client
 * (lua/moonhttp/pg/proto.lua).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The server's own bound on a message (1 GiB), as proto.lua's MAX_MESSAGE. */
#define MH_PG_MAX_MESSAGE (1u << 30)

/* mh_pg_message's answers besides a message's size. */
#define MH_PG_MORE 0    /* not a whole message yet: read more */
#define MH_PG_BAD  (-1) /* a length below 4 or above MH_PG_MAX_MESSAGE */

/* One message: its type, and its body as a slice of the input. */
struct mh_pg_msg {
    char type;
    const char *body;
    size_t len;
};

/*
 * Cuts the message at the start of buf[0..n): its whole size (5 + body) with
 * *m filled, MH_PG_MORE when fewer bytes than that have arrived, or
 * MH_PG_BAD when its length cannot be (the connection is then unusable).
 */
long mh_pg_message(const char *buf, size_t n, struct mh_pg_msg *m);

/* A DataRow's fields, read in order with mh_pg_field after mh_pg_datarow accepted it. */
struct mh_pg_row {
    const char *_p;
    size_t _left;
    unsigned nfields;
};

/*
 * Checks a DataRow body whole: a 16-bit field count equal to ncols, then
 * that many fields (a 32-bit length, -1 for NULL, and that many bytes) that
 * end exactly at the body's end. Returns false for anything else, and the
 * fields are then not to be read.
 */
bool mh_pg_datarow(const char *body, size_t len, unsigned ncols, struct mh_pg_row *row);

/* The next field of a checked row: *v and *len, or *v NULL for SQL NULL. */
void mh_pg_field(struct mh_pg_row *row, const char **v, size_t *len);

/*
 * The text form of an integer column (int2, int4, int8, oid, xid): an
 * optional '-', then 1 to 19 digits within int64's range. False for
 * anything else (the caller falls back to its general decoder).
 */
bool mh_pg_int(const char *s, size_t n, int64_t *out);

/* The longest text mh_pg_int_text writes: "-9223372036854775808". */
#define MH_PG_INT_TEXT 20

/*
 * The decimal text of v, as "%lld" writes it (a parameter in the text
 * format), into out (MH_PG_INT_TEXT bytes or more, no NUL added); returns
 * its length. snprintf took 1,400 instructions for an id.
 */
size_t mh_pg_int_text(int64_t v, char *out);

/* A statement's bound on parameters: Bind counts them in 16 bits. */
#define MH_PG_MAX_PARAMS 65535

/* One parameter for mh_pg_bind: v NULL for SQL NULL; binary sends format 1 (bytes), else text. */
struct mh_pg_param {
    const char *v;
    size_t len;
    bool binary;
};

/*
 * The batch of one query on the prepared statement stmt (slen bytes, no
 * NUL): Bind (the unnamed portal, the n parameters, every result column in
 * text; no format codes when all n are text, else one per parameter),
 * Execute (the unnamed portal, no row limit) and Sync. The same bytes as
 * proto.lua's bind(...) .. EXECUTE_SYNC. mh_pg_bind_size returns the batch's
 * size, or 0 when it cannot be sent: n above MH_PG_MAX_PARAMS, or a Bind
 * body the server would refuse as longer than MH_PG_MAX_MESSAGE.
 * mh_pg_bind then writes exactly that many bytes to out.
 */
size_t mh_pg_bind_size(size_t slen, const struct mh_pg_param *p, unsigned n);
void mh_pg_bind(char *out, const char *stmt, size_t slen, const struct mh_pg_param *p, unsigned n);

#endif
