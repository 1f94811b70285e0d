#ifndef MH_MULTIPART_H
#define MH_MULTIPART_H
/*
 * An incremental multipart/form-data parser (RFC 7578 over RFC 2046). Pure:
 * no I/O, no allocation, no copy. The caller owns the bytes; each call looks
 * at the unconsumed input and returns one event and how many bytes it used.
 * Bytes it did not consume (a header line not yet complete, a tail that may
 * be the start of a delimiter) must be offered again, followed by more input:
 * so the caller holds at most max_header_bytes plus one read of input.
 *
 * Event slices point into the input given to that call and are valid until
 * the caller drops those bytes.
 */
#include <stdbool.h>
#include <stddef.h>

#define MH_MULTIPART_MAX_BOUNDARY 70 /* RFC 2046 */

enum mh_multipart_event {
    MH_MP_NEED_MORE, /* nothing to report: offer the unconsumed bytes plus more */
    MH_MP_PART,      /* a part begins (its headers follow) */
    MH_MP_HEADER,    /* name, value: one header of the current part, value trimmed */
    MH_MP_BODY,      /* the headers are over; body bytes follow */
    MH_MP_DATA,      /* data: body bytes of the current part */
    MH_MP_PART_END,  /* the current part is complete */
    MH_MP_DONE,      /* the close delimiter was seen; the epilogue is ignored */
    MH_MP_ERROR,     /* p->err says why; the parser stays in error */
};

struct mh_multipart_ev {
    enum mh_multipart_event type;
    const char *name, *data; /* HEADER: name and value; DATA: data */
    size_t name_len, data_len;
};

struct mh_multipart {
    /* settings, fixed by mh_multipart_init */
    size_t max_header_bytes; /* per part, all header lines together */
    unsigned max_parts;
    /* "\r\n--" boundary: the delimiter as it appears after a part's data */
    char _delim[MH_MULTIPART_MAX_BOUNDARY + 4];
    size_t _delim_len;
    int _state;
    bool _at_start; /* nothing consumed yet: "--boundary" may open the body without CRLF */
    size_t _header_bytes;
    unsigned _parts;
    const char *err; /* one of the mh_multipart_err_* strings, or NULL */
};

extern const char mh_multipart_err_malformed[];   /* "malformed multipart body" */
extern const char mh_multipart_err_truncated[];   /* "truncated multipart body" */
extern const char mh_multipart_err_header_size[]; /* "part headers too large" */
extern const char mh_multipart_err_parts[];       /* "too many parts" */

/*
 * Sets p up for one body. The boundary must be 1..70 bytes (checked: returns
 * -1 otherwise, as for a bad Content-Type, which is the client's mistake).
 */
int mh_multipart_init(struct mh_multipart *p, const char *boundary, size_t len,
                      size_t max_header_bytes, unsigned max_parts);

/*
 * Looks at in[0..len) (the unconsumed input) and fills *ev. Returns the bytes
 * consumed. `eof` says no more input will come: then NEED_MORE becomes a
 * TRUNCATED error unless the parser is DONE.
 */
size_t mh_multipart_parse(struct mh_multipart *p, const char *in, size_t len, bool eof,
                          struct mh_multipart_ev *ev);

#endif
