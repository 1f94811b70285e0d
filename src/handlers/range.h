#ifndef MH_RANGE_H
#define MH_RANGE_H
/*
 * The Range request header (RFC 9110 §14.2) for a representation of known
 * length. Only the "bytes" unit is understood. Ranges are sorted and
 * overlapping or adjacent ones merged (§14.2 lets a server coalesce), so
 * the response never sends a byte twice; a request that is still more than
 * MH_RANGE_MAX pieces after merging is served whole rather than cut into
 * confetti.
 */
#include <stddef.h>
#include <stdint.h>

#define MH_RANGE_MAX 16

struct mh_range {
    uint64_t first, last; /* inclusive byte positions, first <= last < size */
};

enum mh_range_result {
    MH_RANGE_IGNORE,        /* no usable Range: send 200 with the whole body */
    MH_RANGE_OK,            /* *n ranges (1..MH_RANGE_MAX): 206 */
    MH_RANGE_UNSATISFIABLE, /* valid syntax, nothing inside the body: 416 */
};

/*
 * Parses a Range value for a body of `size` bytes into out[MH_RANGE_MAX].
 * Malformed syntax, another unit, more than MH_RANGE_MAX ranges after
 * merging (or more than 256 written) give IGNORE, as the
 * RFC asks (a server may ignore Range). A range starting at or past the
 * end is dropped; if none is left, UNSATISFIABLE. "bytes=-N" is the last N
 * bytes ("bytes=-0" is unsatisfiable).
 */
enum mh_range_result mh_range_parse(const char *v, size_t len, uint64_t size, struct mh_range *out,
                                    unsigned *n);

#endif
