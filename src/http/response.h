#ifndef MH_RESPONSE_H
#define MH_RESPONSE_H
/*
 * The response model, and the fields the server adds to every head.
 *
 * Model (protocol-neutral): a status, the handler's headers as name/value
 * pairs (kept in one byte buffer, in order, so HTTP/1 writes them in one pass
 * and HPACK can encode them pair by pair), and the staged body (an output
 * chunk queue: memory, referenced strings, file ranges). Headers the server
 * frames itself are interpreted, not stored: Content-Length becomes
 * declared_length, "Connection: close" becomes `close`; Transfer-Encoding is
 * refused (framing is the protocol's).
 *
 * Each protocol serializes the model itself (h1/h1_response.c as an
 * HTTP/1 head and a framed body, h2/h2_stream.c as HPACK pairs and DATA);
 * the fields the server adds (Server, Content-Type, Content-Length) are
 * chosen once, by mh_response_adds_*, for both.
 */
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "outq.h"

/* Staged body past this size is sent (chunked) by the Lua layer rather than kept. */
#define MH_RESPONSE_STREAM_AT (64 * 1024)

struct mh_hpair {
    uint32_t name_off, name_len, value_off, value_len; /* into _hbytes */
};

struct mh_response {
    int status;
    struct mh_outq body;      /* staged body not yet handed to the protocol */
    uint64_t declared_length; /* has_length: the handler's Content-Length */
    uint64_t body_sent;       /* body bytes handed to the protocol so far */
    uint32_t npairs;          /* live header pairs */
    bool has_length;          /* handler set Content-Length */
    bool has_type;            /* handler set Content-Type */
    bool has_server;          /* handler set Server */
    bool written;             /* a body write happened: status and headers are fixed */
    bool head_sent;           /* head is serialized */
    bool chunked;             /* HTTP/1: the body goes out chunked */
    bool close;               /* handler asked for Connection: close */
    /*
     * Trailer fields to send after the body, as "Name: value\r\n" lines
     * (mh_response_trailer). Declared before the head goes out, they make the
     * body streamed (chunked on HTTP/1.1) even when the handler finishes at
     * once, since a Content-Length body has no place for them.
     */
    struct mh_buf trailers;
    /*
     * The pairs' bytes, kept as "Name: value\r\n" lines so that HTTP/1 writes
     * them with one copy; the pairs index names and values inside them
     * (HPACK encodes pair by pair). A removed pair has name_len 0 and makes
     * the serializer skip its line (_holes).
     */
    struct mh_buf _hbytes;
    struct mh_hpair *_pairs; /* _pairs[0 .. _npairs) */
    uint32_t _npairs, _pairs_cap;
    bool _holes;
};

/* Clears for the next request, keeping memory. A zeroed struct is valid after reset. */
void mh_response_reset(struct mh_response *r);
void mh_response_free(struct mh_response *r);
/* Frees the header pairs' memory (the head was sent: a long stream needs them no more). */
void mh_response_trim(struct mh_response *r);

/*
 * Sets (replace = true) or adds a header. Returns NULL, or a static error
 * string when the name is not a token or the value has CR, LF or NUL, or a
 * framing header has a bad value. Connection and Content-Length are
 * interpreted, not stored.
 */
const char *mh_response_header(struct mh_response *r, const char *name, size_t nlen,
                               const char *value, size_t vlen, bool replace);
/*
 * Adds a pair the server itself chose (a constant name and value, e.g. the
 * Content-Type of res:json): no validation and no interpretation, so the
 * caller guarantees a token name, a value without CR/LF/NUL and no framing
 * header, and sets has_type itself. NULL, or "out of memory".
 */
const char *mh_response_add_trusted(struct mh_response *r, const char *name, size_t nlen,
                                    const char *value, size_t vlen);
/*
 * Adds a trailer field. NULL, or a static error string: a name that is not
 * a token, a value with CR, LF or NUL, or a field that cannot be a trailer
 * (RFC 9110 §6.5.1: framing, routing and the like: Content-Length,
 * Transfer-Encoding, Host, Connection, Trailer, TE...).
 */
const char *mh_response_trailer(struct mh_response *r, const char *name, size_t nlen,
                                const char *value, size_t vlen);
/* Iterates the trailer lines: *pos from 0 while it returns true. */
bool mh_response_trailer_next(const struct mh_response *r, size_t *pos, const char **name,
                              size_t *nlen, const char **value, size_t *vlen);

/* Removes every pair named `name` (Content-Length: clears has_length). */
void mh_response_unset(struct mh_response *r, const char *name, size_t nlen);
/* First value of `name`, or NULL. */
const char *mh_response_get(const struct mh_response *r, const char *name, size_t nlen,
                            size_t *vlen);
/* Iterates the pairs: i from 0 while it returns true. */
bool mh_response_pair(const struct mh_response *r, uint32_t *i, const char **name, size_t *nlen,
                      const char **value, size_t *vlen);

/* Whether a status forbids a body (1xx, 204, 304). */
bool mh_status_bodyless(int status);
/* "OK", "Not Found", ...; "Unknown" for codes without a reason phrase here. */
const char *mh_status_text(int status);

/* The server's name in its Server field, and the type of a body no handler typed. */
#define MH_SERVER_NAME  "moonhttp"
#define MH_DEFAULT_TYPE "text/plain; charset=utf-8"

/*
 * The fields the server adds to a response head, chosen here for every
 * protocol (HTTP/1's serializer, HTTP/2's HPACK head), which ask in the
 * order they write; each also adds the Date field (mh_http_date) to every
 * head. A bodyless status (1xx, 204, 304) gets neither type nor length.
 */

/* "Server: moonhttp" unless the handler set a Server field. */
static inline bool mh_response_adds_server(const struct mh_response *r)
{
    return !r->has_server;
}

/*
 * Content-Type MH_DEFAULT_TYPE: the handler set none, and a body may follow
 * (`staged`: the body bytes the handler produced so far, counted before a
 * HEAD answer drops them; `complete`: the handler is done). `raw`: the
 * stream switches to another protocol (a 101, RFC 8441's 200), whose bytes
 * are not content.
 */
static inline bool mh_response_adds_type(const struct mh_response *r, uint64_t staged,
                                         bool complete, bool raw)
{
    return !r->has_type && !mh_status_bodyless(r->status) && !raw && (staged > 0 || !complete);
}

/*
 * Content-Length (of mh_response_length): the handler declared one, or it
 * is done (`complete`) so a head not sent yet knows the whole body. Not
 * when the protocol sends trailers inside a streamed body
 * (`trailers_in_body`: HTTP/1.1's chunked) and the response has some.
 */
static inline bool mh_response_adds_length(const struct mh_response *r, bool complete,
                                           bool trailers_in_body)
{
    return !mh_status_bodyless(r->status) &&
           (r->has_length || (complete && !(r->trailers.len && trailers_in_body)));
}

/* The Content-Length value: the handler's declared length, else the `staged` body's. */
static inline uint64_t mh_response_length(const struct mh_response *r, uint64_t staged)
{
    return r->has_length ? r->declared_length : staged;
}

#endif
