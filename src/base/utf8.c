#include "utf8.h"

/*
 * state: 0 between characters; otherwise (bytes still expected) << 8 | the
 * allowed range of the next byte, as an index into next_range: after E0 the
 * next byte must be A0..BF (no overlong), after ED 80..9F (no surrogate),
 * after F0 90..BF, after F4 80..8F, else 80..BF.
 */
enum { R_ANY, R_E0, R_ED, R_F0, R_F4 };
static const unsigned char next_lo[] = {0x80, 0xA0, 0x80, 0x90, 0x80};
static const unsigned char next_hi[] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};

bool mh_utf8_feed(unsigned *state, const unsigned char *p, size_t len)
{
    unsigned need = *state >> 8, range = *state & 0xff;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = p[i];
        if (need) {
            if (c < next_lo[range] || c > next_hi[range])
                return false;
            need--;
            range = R_ANY;
            continue;
        }
        if (c < 0x80)
            continue;
        if (c >= 0xC2 && c <= 0xDF) {
            need = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            range = c == 0xE0 ? R_E0 : c == 0xED ? R_ED : R_ANY;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            range = c == 0xF0 ? R_F0 : c == 0xF4 ? R_F4 : R_ANY;
        } else {
            return false; /* 80..C1 as a first byte, F5..FF */
        }
    }
    *state = need << 8 | range;
    return true;
}
