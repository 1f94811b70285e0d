/* UTF-8 validation, whole and split at every byte (as WebSocket fragments may be). */
#include "unit.h"
#include "utf8.h"

static int check(const char *s, size_t len, size_t split)
{
    unsigned st = 0;
    if (!mh_utf8_feed(&st, (const unsigned char *)s, split))
        return 0;
    if (!mh_utf8_feed(&st, (const unsigned char *)s + split, len - split))
        return 0;
    return mh_utf8_complete(st);
}

int main(void)
{
    static const struct {
        const char *s;
        int valid;
    } cases[] = {
        {"", 1},
        {"hello", 1},
        {"caf\xc3\xa9", 1},
        {"\xe2\x82\xac", 1},     /* U+20AC */
        {"\xf0\x9f\x98\x80", 1}, /* U+1F600 */
        {"\xf4\x8f\xbf\xbf", 1}, /* U+10FFFF */
        {"\xed\x9f\xbf", 1},     /* U+D7FF */
        {"\xee\x80\x80", 1},     /* U+E000 */
        {"\xc3", 0},             /* truncated */
        {"\xe2\x82", 0},         /* truncated */
        {"\x80", 0},             /* lone continuation */
        {"\xc0\xaf", 0},         /* overlong '/' */
        {"\xc1\xbf", 0},         /* overlong */
        {"\xe0\x80\xaf", 0},     /* overlong */
        {"\xf0\x80\x80\xaf", 0}, /* overlong */
        {"\xed\xa0\x80", 0},     /* U+D800 surrogate */
        {"\xed\xbf\xbf", 0},     /* U+DFFF surrogate */
        {"\xf4\x90\x80\x80", 0}, /* above U+10FFFF */
        {"\xf5\x80\x80\x80", 0},
        {"\xff", 0},
        {"a\xc3(", 0},
        {"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5", 1}, /* Autobahn 6.2.1 */
        {"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80"
         "edited",
         0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].s);
        for (size_t split = 0; split <= len; split++)
            CHECKF(check(cases[i].s, len, split) == cases[i].valid, "case %zu split %zu", i, split);
    }
    return unit_report();
}
