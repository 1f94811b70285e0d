#ifndef MH_H2_POLICY_H
#define MH_H2_POLICY_H
/*
 * What an HTTP/2 connection allows its client, as plain functions of the
 * limits and of what the client sent: the SETTINGS the server advertises,
 * the flood budget, the record of stream IDs, and the one SETTINGS ACK kept
 * from nghttp2. h2_conn.c applies them to its nghttp2 session;
 * tests/unit/http/test_h2_policy.c checks them without sockets.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

#include "conn.h"

/* ---- SETTINGS ----------------------------------------------------------------
 *
 * The server sends two SETTINGS frames: the first with everything but the
 * stream limit, the second with SETTINGS_MAX_CONCURRENT_STREAMS alone. The
 * client acknowledges both, in order; the second acknowledgement is kept
 * from nghttp2 (mh_h2_acks below). Why: nghttp2 1.52 refuses a stream past
 * a limit not yet acknowledged with RST_STREAM REFUSED_STREAM, as RFC 9113
 * §5.1.2 asks, but past an acknowledged one it ends the whole connection
 * (GOAWAY PROTOCOL_ERROR). With the limit never acknowledged in nghttp2's
 * eyes, a stream over it is refused and the connection goes on (nothing
 * else in nghttp2 depends on that acknowledgement). The
 * first frame's acknowledgement does reach nghttp2: the HPACK table size it
 * carries takes effect only then. A client that never sends the second
 * acknowledgement (RFC 9113 §6.5.3 says it must) keeps mh_h2_acks following
 * its frames, a few comparisons per frame.
 */
#define MH_H2_SETTINGS_MAX 4

/* The first SETTINGS frame's entries into iv; returns how many. */
size_t mh_h2_settings(const struct mh_http_limits *lim,
                      nghttp2_settings_entry iv[MH_H2_SETTINGS_MAX]);

/* The second SETTINGS frame's one entry: the stream limit. */
nghttp2_settings_entry mh_h2_settings_streams(const struct mh_http_limits *lim);

/* The connection's receive window: every stream's default window, within 16 MiB. */
int32_t mh_h2_conn_window(const struct mh_http_limits *lim);

/* ---- the flood budget ----------------------------------------------------------
 *
 * A frame that does no work for the server (PING, SETTINGS, PRIORITY, empty
 * DATA, RST_STREAM from the client, a stream refused or reset for a protocol
 * error) costs a token; `budget` tokens refill over MH_H2_FLOOD_REFILL
 * seconds, and a connection may hold at most `budget`.
 */
#define MH_H2_FLOOD_REFILL 10.0

struct mh_h2_flood {
    double tokens; /* frames that do no work the client may still send */
    double at;     /* when tokens was last refilled */
};

/* A full budget at `now`. */
void mh_h2_flood_init(struct mh_h2_flood *f, uint32_t budget, double now);

/* One such frame at `now`: false once the budget is spent (the connection ends). */
bool mh_h2_flood_take(struct mh_h2_flood *f, uint32_t budget, double now);

/* ---- stream IDs ----------------------------------------------------------------
 *
 * A client's new stream IDs only grow (RFC 9113 §5.1.1); an ID it skipped is
 * closed without ever being opened, and HEADERS on it is a connection error
 * PROTOCOL_ERROR. nghttp2 1.52 ignores such a frame (it cannot tell a skipped
 * ID from a stream opened and closed since, whose late frames it must
 * ignore). This record tells them apart: the first ID opened (everything
 * below it was skipped) and the MH_H2_GAPS latest runs of skipped IDs. An
 * older gap is forgotten, and HEADERS in it is ignored, as nghttp2 would:
 * never an error for an ID that was opened.
 */
#define MH_H2_GAPS 4

struct mh_h2_ids {
    int32_t first, last;        /* the lowest and highest IDs a client HEADERS opened; 0 = none */
    int32_t gap_lo[MH_H2_GAPS]; /* skipped: gap_lo[i] .. gap_hi[i] (odd IDs, inclusive) */
    int32_t gap_hi[MH_H2_GAPS];
    uint8_t ngaps, next_gap; /* used slots; the slot the next gap overwrites */
};

/*
 * A client HEADERS frame on the odd stream `id`. True: a new stream (the
 * record moves on) or one that was opened before (trailers, a late frame:
 * nghttp2 judges it). False: a lower ID the client skipped (PROTOCOL_ERROR).
 */
bool mh_h2_ids_headers(struct mh_h2_ids *ids, int32_t id);

/* ---- streams the client ended --------------------------------------------------
 *
 * RFC 9113 §5.1, "closed": a frame after the client's own END_STREAM is a
 * connection error STREAM_CLOSED, while frames after a RST_STREAM (either
 * way) may have been in flight and are a stream error. nghttp2 keeps no
 * closed stream (h2_conn.c, options()), so this record keeps the latest
 * MH_H2_ENDED streams that closed after the client's END_STREAM. A stream
 * closed longer ago is answered as a reset one: a stream error, never a
 * connection error for a frame that may have been in flight.
 */
#define MH_H2_ENDED 16

struct mh_h2_ended {
    int32_t id[MH_H2_ENDED]; /* 0 = empty */
    uint8_t next;            /* the slot the next stream overwrites */
};

/* Stream `id` closed after the client's END_STREAM. */
void mh_h2_ended_add(struct mh_h2_ended *e, int32_t id);
/* Whether `id` is among the latest streams recorded by mh_h2_ended_add. */
bool mh_h2_ended_has(const struct mh_h2_ended *e, int32_t id);

/* ---- the kept acknowledgement, and frame headers --------------------------------
 *
 * Follows the client's byte stream frame by frame (after the 24-byte
 * preface) for the whole connection. Until its second SETTINGS ACK it cuts
 * that one out; after, everything passes, but each frame header still comes
 * as a run of its own, so h2_conn.c sees it before nghttp2 reads it (DATA on
 * a closed stream, which nghttp2 1.52 drops before any callback). A frame
 * header split across reads is held back until it is whole, since bytes
 * given to nghttp2 cannot be taken back.
 */
struct mh_h2_acks {
    uint32_t left; /* bytes of the preface or of the current frame's payload to pass on */
    uint8_t hdr[9];
    uint8_t nhdr; /* bytes of a frame header held in hdr */
    uint8_t seen; /* SETTINGS ACKs seen */
};

/* Starts before the preface. */
void mh_h2_acks_init(struct mh_h2_acks *a);

/* The second ACK was cut: nothing more is cut. */
static inline bool mh_h2_acks_done(const struct mh_h2_acks *a)
{
    return a->seen >= 2;
}

/*
 * The next run of bytes for nghttp2 out of *in / *n, which advance past what
 * was used: true with *seg / *len set (valid until the next call: it may
 * point into a), false when the input is used up. A run that is a whole
 * frame header is exactly the 9 bytes at a->hdr.
 */
bool mh_h2_acks_next(struct mh_h2_acks *a, const uint8_t **in, size_t *n, const uint8_t **seg,
                     size_t *len);

#endif
