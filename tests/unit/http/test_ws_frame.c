/*
 * WebSocket frames byte for byte: RFC 6455 section 5.7's examples, the
 * protocol errors a frame alone shows, every split of each input, and the
 * header serializer.
 */
#include "../../../fuzz/ws_run.h"
#include "unit.h"

static const struct {
    const char *name;
    bool mask;
    const char *wire;
    size_t len;
    const char *want;
} cases[] = {
    {"unmasked text (5.7)", false, "\x81\x05Hello", 7, "F11:5:Hello|"},
    {"masked text (5.7)", true, "\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58", 11, "F11:5:Hello|"},
    {"fragments (5.7)", false, "\x01\x03Hel\x80\x02lo", 9, "F01:3:Hel|F10:2:lo|"},
    {"ping (5.7)", false, "\x89\x05Hello", 7, "F19:5:Hello|"},
    {"empty close", true, "\x88\x80\x01\x02\x03\x04", 6, "F18:0:|"},
    {"unmasked client frame", true, "\x81\x05Hello", 7, "!protocol error"},
    {"RSV1 without an extension", false, "\xc1\x00", 2, "!protocol error"},
    {"unknown opcode 3", false, "\x83\x00", 2, "!protocol error"},
    {"unknown opcode 0xB", false, "\x8b\x00", 2, "!protocol error"},
    {"fragmented ping", false, "\x09\x00", 2, "!protocol error"},
    {"ping over 125 bytes", false, "\x89\x7e\x00\x80", 4, "!protocol error"},
    {"16-bit length under 126", false, "\x82\x7e\x00\x05", 4, "!protocol error"},
    {"64-bit length under 65536", false, "\x82\x7f\x00\x00\x00\x00\x00\x00\x01\x00", 10,
     "!protocol error"},
    {"64-bit length with the top bit", false, "\x82\x7f\x80\x00\x00\x00\x00\x00\x00\x00", 10,
     "!protocol error"},
    {"over max_payload", false, "\x82\x7e\x01\x00", 4, "!frame too large"},
};

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct mp_transcript whole;
        ws_run(cases[i].mask, 200, cases[i].wire, cases[i].len, 0, &whole);
        CHECKF(strcmp(whole.s, cases[i].want) == 0, "%s: got \"%s\"", cases[i].name, whole.s);
        for (size_t step = 1; step <= cases[i].len; step++) {
            struct mp_transcript split;
            ws_run(cases[i].mask, 200, cases[i].wire, cases[i].len, step, &split);
            CHECKF(strcmp(split.s, whole.s) == 0, "%s, step %zu: got \"%s\"", cases[i].name, step,
                   split.s);
            free(split.s);
        }
        free(whole.s);
    }
    unsigned char h[MH_WS_MAX_HEADER];
    CHECK(mh_ws_frame_header(h, true, MH_WS_TEXT, 5, NULL) == 2 && memcmp(h, "\x81\x05", 2) == 0);
    CHECK(mh_ws_frame_header(h, true, MH_WS_BINARY, 256, NULL) == 4 &&
          memcmp(h, "\x82\x7e\x01\x00", 4) == 0); /* 5.7: 256 bytes */
    CHECK(mh_ws_frame_header(h, true, MH_WS_BINARY, 65536, NULL) == 10 &&
          memcmp(h, "\x82\x7f\x00\x00\x00\x00\x00\x01\x00\x00", 10) == 0); /* 5.7: 64 KiB */
    CHECK(mh_ws_frame_header(h, false, MH_WS_TEXT, 3, (const unsigned char *)"\x37\xfa\x21\x3d") ==
              6 &&
          memcmp(h, "\x01\x83\x37\xfa\x21\x3d", 6) == 0);
    /* what the serializer writes, the parser reads back */
    struct mp_transcript t;
    char wire[MH_WS_MAX_HEADER + 300];
    size_t n = mh_ws_frame_header((unsigned char *)wire, true, MH_WS_BINARY, 300, NULL);
    memset(wire + n, 'x', 300);
    ws_run(false, 1000, wire, n + 300, 7, &t);
    CHECK(strncmp(t.s, "F12:300:xxx", 11) == 0 && t.s[t.len - 1] == '|');
    free(t.s);
    return unit_report();
}
