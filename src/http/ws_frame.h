#ifndef MH_WS_FRAME_H
#define MH_WS_FRAME_H
/*
 * WebSocket framing (RFC 6455 section 5): an incremental frame parser and a
 * frame-header serializer. Pure: no I/O, no allocation. The parser works like
 * multipart.h's: each call looks at the unconsumed input, returns one event
 * and how many bytes it used; bytes it did not use are offered again with
 * more input. Payload is unmasked in place (the input is the caller's read
 * buffer), so PAYLOAD slices are ready to use. Messages (fragmentation,
 * UTF-8 of text) are the layer above: the parser checks each frame alone.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum mh_ws_opcode {
    MH_WS_CONT = 0x0,
    MH_WS_TEXT = 0x1,
    MH_WS_BINARY = 0x2,
    MH_WS_CLOSE = 0x8,
    MH_WS_PING = 0x9,
    MH_WS_PONG = 0xA,
};

enum mh_ws_event {
    MH_WS_NEED_MORE,
    MH_WS_FRAME,     /* a header: fin, opcode, length are set (payload follows) */
    MH_WS_PAYLOAD,   /* data, len: unmasked payload bytes of the current frame */
    MH_WS_FRAME_END, /* the current frame's payload is complete (also right after an empty one) */
    mh_ws_error,     /* err says why; the connection must be closed with close code 1002/1009 */
};

struct mh_ws_ev {
    enum mh_ws_event type;
    bool fin;
    int opcode;
    uint64_t length;
    char *data;
    size_t len;
};

struct mh_ws_parser {
    bool require_mask;    /* a server: client frames must be masked (5.1) */
    uint64_t max_payload; /* per frame; over it: mh_ws_err_too_large */
    const char *err;
    int _state;
    uint64_t _left; /* payload bytes still to come */
    uint64_t _pos;  /* payload bytes seen, for the mask offset */
    unsigned char _mask[4];
    bool _masked;
};

extern const char mh_ws_err_protocol[];  /* "protocol error": close 1002 */
extern const char mh_ws_err_too_large[]; /* "frame too large": close 1009 */

void mh_ws_parser_init(struct mh_ws_parser *p, bool require_mask, uint64_t max_payload);

size_t mh_ws_parse(struct mh_ws_parser *p, char *in, size_t len, struct mh_ws_ev *ev);

/*
 * Writes a frame header for a payload of `len` bytes into out (at least
 * MH_WS_MAX_HEADER bytes); `mask`: NULL for a server frame, else 4 bytes the
 * caller then applies to the payload. Returns the header length.
 */
#define MH_WS_MAX_HEADER 14
size_t mh_ws_frame_header(unsigned char *out, bool fin, int opcode, uint64_t len,
                          const unsigned char *mask);

#endif
