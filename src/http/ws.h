#ifndef MH_WS_H
#define MH_WS_H
/*
 * A WebSocket (RFC 6455) over a request that switched protocols
 * (mh_req_upgrade). Two parts:
 *
 * - the opening handshake: mh_ws_check validates the client's request
 *   (4.2.1) and computes Sec-WebSocket-Accept;
 * - the session (struct mh_ws): it owns the protocol once the 101 (or, on
 *   an HTTP/2 stream, the 200 of RFC 8441) is out.
 *   Frames in through ws_frame.c; messages reassembled from fragments, text
 *   checked as UTF-8, sizes bounded; pings answered and the close handshake
 *   done at once, whatever the user is doing; an idle timer that pings a
 *   silent peer and closes one that stays silent. Frames out go through the
 *   request's staged body, so back-pressure is mh_req_output_high as for any
 *   streamed response.
 *
 * Input back-pressure: one complete message waits for the user at a time;
 * until it is taken, the session reads at most 16 KiB ahead (unparsed), then
 * stops asking for bytes, so the connection stops reading and TCP pushes
 * back on the client.
 *
 * The session puts itself in front of the request's handler (r->handler)
 * for the stream's events; r->handler_data stays the original handler's,
 * which still hears on_abort. The user (the Lua binding) hears of the
 * session through struct mh_ws_events, always from the event loop, never
 * from inside one of its own calls. Nothing here yields.
 *
 * Ownership: mh_ws_start allocates the session; mh_ws_end frees it and gives
 * the request back to its handler, which then finishes it (the connection
 * closes after the last frame is written).
 */
#include <ev.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "handler.h"
#include "ws_frame.h"

struct mh_req;

/* ---- the opening handshake ------------------------------------------------ */

struct mh_ws_handshake {
    char accept[29]; /* Sec-WebSocket-Accept, NUL-terminated */
};

/*
 * Whether r is a valid opening handshake: GET over HTTP/1.1, no body,
 * Upgrade: websocket, Connection: upgrade, Sec-WebSocket-Version: 13 and a
 * Sec-WebSocket-Key of 16 bytes in base64; over HTTP/2 an extended CONNECT
 * (RFC 8441, head.connect_websocket) with Sec-WebSocket-Version: 13. NULL
 * (hs filled; its accept is empty for RFC 8441, which has none), or a short
 * reason, with the status to answer in *status: 400, or 426 for a version
 * we do not speak (the answer then carries Sec-WebSocket-Version: 13).
 */
const char *mh_ws_check(const struct mh_req *r, struct mh_ws_handshake *hs, int *status);

/* Whether the client offered subprotocol `name` in Sec-WebSocket-Protocol (exact match). */
bool mh_ws_offered(const struct mh_req *r, const char *name, size_t len);

/* ---- the session -------------------------------------------------------------- */

struct mh_ws_config {
    uint64_t max_message; /* one message after reassembly; over it: close 1009 */
    uint64_t max_frame;   /* one frame's payload; over it: close 1009 */
    double ping_interval; /* ping a peer silent this long (0: never) */
    double idle_timeout;  /* close (1001) a peer silent this long (0: never) */
    double close_timeout; /* after our close frame, wait this long for the peer's */
};

enum mh_ws_state {
    MH_WS_OPEN,
    MH_WS_CLOSING, /* our close frame went out; waiting for the peer's */
    MH_WS_CLOSED,  /* both sides closed, or the connection is gone */
};

struct mh_ws_events {
    /* A message is ready for mh_ws_receive, or the session closed. */
    void (*on_message)(void *ud);
    /* Output fell below the low-water mark (or the session closed): writers may go on. */
    void (*on_writable)(void *ud);
};

struct mh_ws {
    struct mh_handler handler; /* in front of the request's own: see above */
    struct mh_req *r;          /* NULL once the stream is gone */
    const struct mh_handler *inner;
    struct ev_loop *loop;
    struct mh_ws_config cfg;
    const struct mh_ws_events *events;
    void *ud;

    enum mh_ws_state state;
    uint16_t close_code;      /* the peer's (or 1006 when it vanished, 1005 without a code) */
    const char *close_reason; /* in ctl (the peer's) or a static string (ours) */
    size_t close_reason_len;

    /* input */
    struct mh_ws_parser parser;
    int frame_opcode; /* of the frame being parsed */
    bool frame_fin;
    struct mh_buf msg;  /* the message being assembled (or ready) */
    int msg_opcode;     /* MH_WS_TEXT / MH_WS_BINARY while a message is open, else 0 */
    bool msg_ready;     /* msg holds a complete message the user has not taken */
    int ready_opcode;   /* ...its opcode */
    bool msg_taken;     /* ...taken: its bytes are cleared before the next one */
    unsigned utf8;      /* mh_utf8_feed state for a text message */
    unsigned char *ctl; /* a control frame's payload (125 bytes, allocated on first use) */
    size_t ctl_len;

    /* the idle timer */
    ev_timer timer;
    ev_tstamp last_seen;      /* loop time of the last frame from the peer */
    ev_tstamp close_deadline; /* once closing: the connection ends by then (0 = open) */
    bool ping_sent;           /* since last_seen */
    bool in_parse;            /* inside a parse (a callback must not re-enter it) */
};

/*
 * Switches r to WebSocket: answers 101 with the handshake's headers (and
 * Sec-WebSocket-Protocol when `protocol` is not NULL), then runs the
 * session. NULL when the protocol cannot switch (the request is then as it
 * was) or out of memory.
 */
struct mh_ws *mh_ws_start(struct mh_req *r, struct ev_loop *loop, const struct mh_ws_config *cfg,
                          const struct mh_ws_handshake *hs, const char *protocol, size_t plen,
                          const struct mh_ws_events *events, void *ud);

/*
 * The next message: 1 with data, len and binary set (the bytes stay valid
 * until mh_ws_taken), 0 when none is ready yet (on_message will
 * tell), -1 when the session is closed (close_code, close_reason).
 */
int mh_ws_receive(struct mh_ws *ws, const char **data, size_t *len, bool *binary);
/* The user copied the message mh_ws_receive gave: the session reads on. */
void mh_ws_taken(struct mh_ws *ws);

/*
 * Sends one frame: MH_WS_TEXT / MH_WS_BINARY (a whole message), MH_WS_PING
 * or MH_WS_PONG (at most 125 bytes). NULL, or "closed" once our close frame
 * went out or the stream is gone, or mh_req_err_nomem. The caller waits for
 * on_writable while mh_ws_output_high.
 */
const char *mh_ws_send(struct mh_ws *ws, int opcode, const void *p, size_t len);
bool mh_ws_output_high(const struct mh_ws *ws);

/* Starts the close handshake with code (1000.. 4999) and a reason (at most 123 bytes). */
void mh_ws_close(struct mh_ws *ws, uint16_t code, const char *reason, size_t len);

/* The server is stopping: close with 1001 ("going away"). Does nothing if r is not a WebSocket. */
void mh_ws_request_stopping(struct mh_req *r);

/* The session in front of r, or NULL. */
struct mh_ws *mh_ws_of(const struct mh_req *r);

/*
 * The user is done: a session still open is closed with `code` (1000 after
 * a normal end, 1011 after an error), the request goes back to its own
 * handler, and ws is freed.
 */
void mh_ws_end(struct mh_ws *ws, uint16_t code);

#endif
