#ifndef MH_CODEC_H
#define MH_CODEC_H
/*
 * Byte encodings: base64 (RFC 4648 section 4, and the URL-safe alphabet of
 * section 5) and lowercase hex. Pure functions on caller-owned buffers; none
 * allocates. Decoders are strict: a character outside the alphabet (including
 * whitespace), bad padding or non-zero trailing bits reject the whole input,
 * so that one value has exactly one encoding (signed cookies rely on that).
 */
#include <stdbool.h>
#include <stddef.h>

/* Encoded length of n bytes: with padding for the standard alphabet, without for URL-safe. */
size_t mh_base64_encoded_len(size_t n, bool url);

/* Writes mh_base64_encoded_len(n, url) bytes to out. */
void mh_base64_encode(const unsigned char *in, size_t n, char *out, bool url);

/*
 * Decodes into out (at least len * 3 / 4 + 3 bytes). The standard alphabet
 * needs its '=' padding; the URL-safe one takes input with or without it.
 * Returns the decoded length, or -1 when the input is not valid base64.
 */
long mh_base64_decode(const char *in, size_t len, unsigned char *out, bool url);

/* Writes 2 * n lowercase hex digits to out. */
void mh_hex_encode(const unsigned char *in, size_t n, char *out);

/* Decodes hex (either case) into out (len / 2 bytes). Returns the length, or -1 when malformed. */
long mh_hex_decode(const char *in, size_t len, unsigned char *out);

#endif
