#define _GNU_SOURCE /* memmem */
#include "multipart.h"

#include <string.h>

const char mh_multipart_err_malformed[] = "malformed multipart body";
const char mh_multipart_err_truncated[] = "truncated multipart body";
const char mh_multipart_err_header_size[] = "part headers too large";
const char mh_multipart_err_parts[] = "too many parts";

enum {
    ST_PREAMBLE,  /* before the first delimiter */
    ST_DELIM_END, /* after a delimiter: "--" closes, else padding and CRLF */
    ST_HEADERS,
    ST_DATA,
    ST_DONE,
    ST_ERROR,
};

int mh_multipart_init(struct mh_multipart *p, const char *boundary, size_t len,
                      size_t max_header_bytes, unsigned max_parts)
{
    memset(p, 0, sizeof *p);
    if (len == 0 || len > MH_MULTIPART_MAX_BOUNDARY)
        return -1;
    memcpy(p->_delim, "\r\n--", 4);
    memcpy(p->_delim + 4, boundary, len);
    p->_delim_len = len + 4;
    p->max_header_bytes = max_header_bytes;
    p->max_parts = max_parts;
    p->_state = ST_PREAMBLE;
    p->_at_start = true;
    return 0;
}

static size_t fail(struct mh_multipart *p, struct mh_multipart_ev *ev, const char *err)
{
    p->_state = ST_ERROR;
    p->err = err;
    ev->type = MH_MP_ERROR;
    return 0;
}

/*
 * Where the delimiter `d` starts in `in`, or, if it does not occur, where a
 * tail of `in` that is a proper prefix of `d` starts (len if none); *whole
 * says which.
 */
static size_t find_delim(const char *in, size_t len, const char *d, size_t dlen, bool *whole)
{
    const char *hit = memmem(in, len, d, dlen);
    if (hit) {
        *whole = true;
        return (size_t)(hit - in);
    }
    *whole = false;
    size_t from = len >= dlen ? len - dlen + 1 : 0;
    for (size_t i = from; i < len; i++)
        if (memcmp(in + i, d, len - i) == 0)
            return i;
    return len;
}

static size_t parse_header_line(struct mh_multipart *p, const char *in, size_t len, bool eof,
                                struct mh_multipart_ev *ev)
{
    const char *lf = memchr(in, '\n', len);
    size_t line_len = lf ? (size_t)(lf - in) + 1 : len;
    if (p->_header_bytes + line_len > p->max_header_bytes)
        return fail(p, ev, mh_multipart_err_header_size);
    if (!lf) {
        ev->type = MH_MP_NEED_MORE;
        return eof ? fail(p, ev, mh_multipart_err_truncated) : 0;
    }
    if (line_len < 2 || in[line_len - 2] != '\r')
        return fail(p, ev, mh_multipart_err_malformed); /* bare LF */
    p->_header_bytes += line_len;
    size_t n = line_len - 2;
    if (n == 0) {
        p->_state = ST_DATA;
        ev->type = MH_MP_BODY;
        return line_len;
    }
    if (in[0] == ' ' || in[0] == '\t')
        return fail(p, ev, mh_multipart_err_malformed); /* obsolete line folding */
    const char *colon = memchr(in, ':', n);
    if (!colon || colon == in)
        return fail(p, ev, mh_multipart_err_malformed);
    for (const char *c = in; c < colon; c++) {
        unsigned char ch = (unsigned char)*c;
        if (ch <= ' ' || ch >= 0x7f) /* token characters only, no space before ':' */
            return fail(p, ev, mh_multipart_err_malformed);
    }
    for (const char *c = colon + 1; c < in + n; c++)
        if (*c == '\r' || *c == '\0')
            return fail(p, ev, mh_multipart_err_malformed);
    const char *v = colon + 1, *end = in + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
        end--;
    ev->type = MH_MP_HEADER;
    ev->name = in;
    ev->name_len = (size_t)(colon - in);
    ev->data = v;
    ev->data_len = (size_t)(end - v);
    return line_len;
}

/* After "--boundary": "--" closes the body; else optional LWSP, then CRLF opens a part. */
static size_t parse_delim_end(struct mh_multipart *p, const char *in, size_t len, bool eof,
                              struct mh_multipart_ev *ev)
{
    if (len >= 2 && in[0] == '-' && in[1] == '-') {
        p->_state = ST_DONE;
        ev->type = MH_MP_DONE;
        return 2;
    }
    size_t i = 0;
    while (i < len && (in[i] == ' ' || in[i] == '\t'))
        i++;
    if (i > 64)
        return fail(p, ev, mh_multipart_err_malformed);
    if (i + 2 > len) {
        ev->type = MH_MP_NEED_MORE;
        return eof ? fail(p, ev, mh_multipart_err_truncated) : 0;
    }
    if (in[i] != '\r' || in[i + 1] != '\n')
        return fail(p, ev, mh_multipart_err_malformed);
    if (++p->_parts > p->max_parts)
        return fail(p, ev, mh_multipart_err_parts);
    p->_state = ST_HEADERS;
    p->_header_bytes = 0;
    ev->type = MH_MP_PART;
    return i + 2;
}

size_t mh_multipart_parse(struct mh_multipart *p, const char *in, size_t len, bool eof,
                          struct mh_multipart_ev *ev)
{
    ev->type = MH_MP_NEED_MORE;
    bool whole;
    size_t at;
    switch (p->_state) {
    case ST_PREAMBLE:
        /* The first delimiter may open the body without the CRLF before it. */
        if (p->_at_start) {
            size_t open_len = p->_delim_len - 2;
            if (len >= open_len && memcmp(in, p->_delim + 2, open_len) == 0) {
                p->_state = ST_DELIM_END;
                return open_len;
            }
            if (len < open_len && memcmp(in, p->_delim + 2, len) == 0)
                return eof ? fail(p, ev, mh_multipart_err_truncated) : 0;
        }
        at = find_delim(in, len, p->_delim, p->_delim_len, &whole);
        if (at > 0)
            p->_at_start = false;
        if (whole) {
            p->_state = ST_DELIM_END;
            return at + p->_delim_len;
        }
        if (eof)
            return fail(p, ev, mh_multipart_err_truncated);
        return at; /* the preamble is dropped; a possible delimiter start is kept */
    case ST_DELIM_END:
        return parse_delim_end(p, in, len, eof, ev);
    case ST_HEADERS:
        return parse_header_line(p, in, len, eof, ev);
    case ST_DATA:
        at = find_delim(in, len, p->_delim, p->_delim_len, &whole);
        if (at > 0) {
            ev->type = MH_MP_DATA;
            ev->data = in;
            ev->data_len = at;
            return at;
        }
        if (whole) {
            p->_state = ST_DELIM_END;
            ev->type = MH_MP_PART_END;
            return p->_delim_len;
        }
        return eof ? fail(p, ev, mh_multipart_err_truncated) : 0;
    case ST_DONE:
        ev->type = MH_MP_DONE;
        return len; /* the epilogue */
    default:
        ev->type = MH_MP_ERROR;
        return 0;
    }
}
