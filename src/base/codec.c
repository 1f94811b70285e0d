#include "codec.h"

#include "path.h" /* mh_path_hexval */

static const char B64_STD[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char B64_URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t mh_base64_encoded_len(size_t n, bool url)
{
    if (!url)
        return (n + 2) / 3 * 4;
    return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

void mh_base64_encode(const unsigned char *in, size_t n, char *out, bool url)
{
    const char *abc = url ? B64_URL : B64_STD;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];
        *out++ = abc[v >> 18];
        *out++ = abc[(v >> 12) & 63];
        *out++ = abc[(v >> 6) & 63];
        *out++ = abc[v & 63];
    }
    if (i == n)
        return;
    unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0);
    *out++ = abc[v >> 18];
    *out++ = abc[(v >> 12) & 63];
    if (i + 1 < n)
        *out++ = abc[(v >> 6) & 63];
    else if (!url)
        *out++ = '=';
    if (!url)
        *out++ = '=';
}

static int b64_val(unsigned char c, bool url)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == (url ? '-' : '+'))
        return 62;
    if (c == (url ? '_' : '/'))
        return 63;
    return -1;
}

long mh_base64_decode(const char *in, size_t len, unsigned char *out, bool url)
{
    size_t pad = 0;
    if (len >= 1 && in[len - 1] == '=')
        pad = (len >= 2 && in[len - 2] == '=') ? 2 : 1;
    if (pad && len % 4)
        return -1;
    if (!url && len % 4)
        return -1;
    size_t n = len - pad;
    if (n % 4 == 1)
        return -1;
    long o = 0;
    unsigned acc = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val((unsigned char)in[i], url);
        if (v < 0)
            return -1;
        acc = acc << 6 | (unsigned)v;
        if (i % 4 == 3) {
            out[o++] = (unsigned char)(acc >> 16);
            out[o++] = (unsigned char)(acc >> 8);
            out[o++] = (unsigned char)acc;
            acc = 0;
        }
    }
    switch (n % 4) {
    case 2:
        if (acc & 0xf)
            return -1; /* trailing bits must be zero */
        out[o++] = (unsigned char)(acc >> 4);
        break;
    case 3:
        if (acc & 0x3)
            return -1;
        out[o++] = (unsigned char)(acc >> 10);
        out[o++] = (unsigned char)(acc >> 2);
        break;
    }
    if (pad && (n % 4) + pad != 4)
        return -1;
    return o;
}

void mh_hex_encode(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        *out++ = digits[in[i] >> 4];
        *out++ = digits[in[i] & 15];
    }
}

long mh_hex_decode(const char *in, size_t len, unsigned char *out)
{
    if (len % 2)
        return -1;
    for (size_t i = 0; i < len; i += 2) {
        int hi = mh_path_hexval((unsigned char)in[i]),
            lo = mh_path_hexval((unsigned char)in[i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i / 2] = (unsigned char)(hi << 4 | lo);
    }
    return (long)(len / 2);
}
