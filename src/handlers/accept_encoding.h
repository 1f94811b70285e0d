#ifndef MH_ACCEPT_ENCODING_H
#define MH_ACCEPT_ENCODING_H
/*
 * Accept-Encoding (RFC 9110 §12.5.3) for the codings this server can send:
 * gzip and br (br only as precompressed files) and identity. The static
 * file handler and the compression filter share it, so both agree on what
 * "gzip;q=0" or "*" mean.
 */
#include <stddef.h>

enum mh_coding {
    MH_CODING_IDENTITY,
    MH_CODING_GZIP,
    MH_CODING_BR,
    MH_CODING_COUNT,
};

/* Bit of a coding in an "available" mask. */
#define MH_CODING_BIT(c) (1u << (c))

/*
 * What the client accepts: a q-value in thousandths (0..1000) per coding,
 * after all Accept-Encoding fields were added. Start with
 * mh_accept_encoding_init. No field at all means identity only: §12.5.3
 * would allow any coding, but a client that sends none usually decodes
 * none, and nginx and h2o send identity too.
 */
struct mh_accept_encoding {
    unsigned short q[MH_CODING_COUNT];
    unsigned char _set[MH_CODING_COUNT]; /* named explicitly (beats "*") */
    unsigned short _star;                /* q of "*", or 0xffff when absent */
    unsigned char _seen;                 /* a field was added */
};

void mh_accept_encoding_init(struct mh_accept_encoding *a);

/*
 * Adds one Accept-Encoding field value. Unknown codings are skipped; a
 * malformed element (a bad q-value) is skipped, not fatal. "x-gzip" is
 * gzip. Returns nothing: any byte string is a valid input.
 */
void mh_accept_encoding_add(struct mh_accept_encoding *a, const char *v, size_t len);

/*
 * The coding to send among the `available` ones (a mask of
 * MH_CODING_BIT; identity is always available): the acceptable one with
 * the highest q, preferring br, then gzip, then identity on a tie. When
 * nothing is acceptable (identity;q=0 and the rest refused) identity is
 * returned anyway: §12.5.3 allows sending it rather than a 406.
 */
enum mh_coding mh_accept_encoding_choose(const struct mh_accept_encoding *a, unsigned available);

#endif
