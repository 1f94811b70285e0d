/* HTML escaping: each special byte, none, all together, and bytes that must pass through. */
#include "html.h"
#include "unit.h"

#include <string.h>

static int escapes_to(const char *in, size_t len, const char *want)
{
    char out[256];
    size_t n = mh_html_escaped_len(in, len);
    if (n != strlen(want) || n >= sizeof out)
        return 0;
    mh_html_escape(in, len, out);
    return memcmp(out, want, n) == 0;
}

int main(void)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"", ""},
        {"plain text", "plain text"},
        {"&", "&amp;"},
        {"<", "&lt;"},
        {">", "&gt;"},
        {"\"", "&quot;"},
        {"'", "&#39;"},
        {"<script>alert('x&y')</script>", "&lt;script&gt;alert(&#39;x&amp;y&#39;)&lt;/script&gt;"},
        {"&amp;", "&amp;amp;"}, /* escaping is not idempotent: escape once */
        {"caf\xc3\xa9 \xe2\x82\xac", "caf\xc3\xa9 \xe2\x82\xac"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECK(escapes_to(cases[i].in, strlen(cases[i].in), cases[i].want));
    /* a NUL byte inside the string is copied, not taken as its end */
    char out[8];
    CHECK(mh_html_escaped_len("a\0<", 3) == 6);
    mh_html_escape("a\0<", 3, out);
    CHECK(memcmp(out, "a\0&lt;", 6) == 0);
    return unit_report();
}
