/* base64 and hex, byte for byte against RFC 4648's test vectors. */
#include "codec.h"
#include "unit.h"

#include <string.h>

static const char *enc(const char *s, bool url)
{
    static char out[256];
    size_t n = strlen(s);
    mh_base64_encode((const unsigned char *)s, n, out, url);
    out[mh_base64_encoded_len(n, url)] = 0;
    return out;
}

/* Decoded text, or "(bad)" when rejected. */
static const char *dec(const char *s, bool url)
{
    static unsigned char out[256];
    long n = mh_base64_decode(s, strlen(s), out, url);
    if (n < 0)
        return "(bad)";
    out[n] = 0;
    return (const char *)out;
}

int main(void)
{
    static const char *const rfc[][2] = {
        {"", ""},
        {"f", "Zg=="},
        {"fo", "Zm8="},
        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="},
        {"fooba", "Zm9vYmE="},
        {"foobar", "Zm9vYmFy"},
    };
    for (size_t i = 0; i < sizeof rfc / sizeof rfc[0]; i++) {
        CHECK_STR(enc(rfc[i][0], false), rfc[i][1]);
        CHECK_STR(dec(rfc[i][1], false), rfc[i][0]);
        CHECK_STR(dec(rfc[i][1], true), rfc[i][0]); /* URL-safe takes padding too */
    }
    CHECK_STR(enc("fo", true), "Zm8");
    CHECK_STR(enc("f", true), "Zg");
    CHECK_STR(dec("Zm8", true), "fo");
    CHECK_STR(enc("\xfb\xff", false), "+/8=");
    CHECK_STR(enc("\xfb\xff", true), "-_8");
    CHECK_STR(dec("-_8", true), "\xfb\xff");
    CHECK_STR(dec("+/8=", false), "\xfb\xff");

    static const char *const bad_std[] = {"Zm8",  "Zg=",  "Z===", "Zm9v\n", " Zm9v",
                                          "Zh==", "Zm9=", "-_8=", "Zm=v",   "Z"};
    for (size_t i = 0; i < sizeof bad_std / sizeof bad_std[0]; i++)
        CHECKF(strcmp(dec(bad_std[i], false), "(bad)") == 0, "accepted \"%s\"", bad_std[i]);
    static const char *const bad_url[] = {"+/8", "Z", "Zh", "Zg=", "Zm8==", "a.b"};
    for (size_t i = 0; i < sizeof bad_url / sizeof bad_url[0]; i++)
        CHECKF(strcmp(dec(bad_url[i], true), "(bad)") == 0, "accepted \"%s\"", bad_url[i]);

    char hex[8];
    mh_hex_encode((const unsigned char *)"\x00\xab\xff", 3, hex);
    CHECK(memcmp(hex, "00abff", 6) == 0);
    unsigned char raw[4];
    CHECK(mh_hex_decode("00ABff", 6, raw) == 3 && memcmp(raw, "\x00\xab\xff", 3) == 0);
    CHECK(mh_hex_decode("abc", 3, raw) == -1);
    CHECK(mh_hex_decode("zz", 2, raw) == -1);
    return unit_report();
}
