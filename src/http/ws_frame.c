#include "ws_frame.h"

#include <string.h>

const char mh_ws_err_protocol[] = "protocol error";
const char mh_ws_err_too_large[] = "frame too large";

enum { ST_HEADER, ST_PAYLOAD, ST_ERROR };

void mh_ws_parser_init(struct mh_ws_parser *p, bool require_mask, uint64_t max_payload)
{
    memset(p, 0, sizeof *p);
    p->require_mask = require_mask;
    p->max_payload = max_payload;
    p->_state = ST_HEADER;
}

static size_t fail(struct mh_ws_parser *p, struct mh_ws_ev *ev, const char *err)
{
    p->_state = ST_ERROR;
    p->err = err;
    ev->type = mh_ws_error;
    return 0;
}

static bool known_opcode(int op)
{
    return op <= MH_WS_BINARY || (op >= MH_WS_CLOSE && op <= MH_WS_PONG);
}

/* A whole header, or NEED_MORE without consuming; every check of 5.2 that a frame alone allows. */
static size_t parse_header(struct mh_ws_parser *p, const unsigned char *in, size_t len,
                           struct mh_ws_ev *ev)
{
    if (len < 2)
        return 0;
    bool fin = in[0] & 0x80, masked = in[1] & 0x80;
    int opcode = in[0] & 0x0f;
    if (in[0] & 0x70)
        return fail(p, ev, mh_ws_err_protocol); /* RSV bits: no extension was negotiated */
    if (!known_opcode(opcode))
        return fail(p, ev, mh_ws_err_protocol);
    if (p->require_mask && !masked)
        return fail(p, ev, mh_ws_err_protocol);
    uint64_t n = in[1] & 0x7f;
    size_t need = 2;
    if (opcode >= MH_WS_CLOSE && (!fin || n > 125))
        return fail(p, ev, mh_ws_err_protocol); /* control frames: short, never fragmented */
    if (n == 126) {
        need += 2;
        if (len < need)
            return 0;
        n = (uint64_t)in[2] << 8 | in[3];
        if (n < 126)
            return fail(p, ev, mh_ws_err_protocol); /* not the minimal encoding */
    } else if (n == 127) {
        need += 8;
        if (len < need)
            return 0;
        n = 0;
        for (int i = 0; i < 8; i++)
            n = n << 8 | in[2 + i];
        if (n >> 63 || n <= 0xffff)
            return fail(p, ev, mh_ws_err_protocol);
    }
    if (masked) {
        if (len < need + 4)
            return 0;
        memcpy(p->_mask, in + need, 4);
        need += 4;
    }
    if (n > p->max_payload)
        return fail(p, ev, mh_ws_err_too_large);
    p->_masked = masked;
    p->_left = n;
    p->_pos = 0;
    p->_state = ST_PAYLOAD;
    ev->type = MH_WS_FRAME;
    ev->fin = fin;
    ev->opcode = opcode;
    ev->length = n;
    return need;
}

size_t mh_ws_parse(struct mh_ws_parser *p, char *in, size_t len, struct mh_ws_ev *ev)
{
    ev->type = MH_WS_NEED_MORE;
    switch (p->_state) {
    case ST_HEADER:
        return parse_header(p, (const unsigned char *)in, len, ev);
    case ST_PAYLOAD: {
        if (p->_left == 0) {
            p->_state = ST_HEADER;
            ev->type = MH_WS_FRAME_END;
            return 0;
        }
        if (len == 0)
            return 0;
        size_t n = (uint64_t)len < p->_left ? len : (size_t)p->_left;
        if (p->_masked)
            for (size_t i = 0; i < n; i++)
                in[i] ^= (char)p->_mask[(p->_pos + i) & 3];
        p->_pos += n;
        p->_left -= n;
        ev->type = MH_WS_PAYLOAD;
        ev->data = in;
        ev->len = n;
        return n;
    }
    default:
        ev->type = mh_ws_error;
        return 0;
    }
}

size_t mh_ws_frame_header(unsigned char *out, bool fin, int opcode, uint64_t len,
                          const unsigned char *mask)
{
    size_t n = 0;
    out[n++] = (unsigned char)((fin ? 0x80 : 0) | (opcode & 0x0f));
    unsigned char m = mask ? 0x80 : 0;
    if (len < 126) {
        out[n++] = (unsigned char)(m | len);
    } else if (len <= 0xffff) {
        out[n++] = m | 126;
        out[n++] = (unsigned char)(len >> 8);
        out[n++] = (unsigned char)len;
    } else {
        out[n++] = m | 127;
        for (int i = 7; i >= 0; i--)
            out[n++] = (unsigned char)(len >> (8 * i));
    }
    if (mask) {
        memcpy(out + n, mask, 4);
        n += 4;
    }
    return n;
}
