/*
 * The multipart parser byte for byte: each body gives one exact event
 * transcript, and the same transcript however the body is split (every step
 * from 1 byte to the whole body).
 */
#include "../../../fuzz/multipart_run.h"
#include "unit.h"

static const struct {
    const char *name, *body, *want;
} cases[] = {
    {"two parts, preamble and epilogue",
     "ignored\r\n--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"
     "--b\r\nX:  v \r\n\r\nline\r\n-b --b\r\r\n--b--\r\nepilogue",
     "PH:Content-Disposition=form-data; name=\"a\"|BD:1|EPH:X=v|BD:line\r\n-b --b\r|EX"},
    {"opening delimiter without CRLF, padding", "--b \t\r\n\r\n\r\n--b--", "PB|EX"},
    {"empty part data", "--b\r\nA: 1\r\n\r\n\r\n--b--", "PH:A=1|B|EX"},
    {"no parts", "--b--", "X"},
    {"\"--b\" after a preamble is not a delimiter", "xx--b\r\n\r\n\r\n--b--", "X"},
    {"truncated data", "--b\r\n\r\nabc", "PBD:abc!truncated multipart body"},
    {"truncated headers", "--b\r\nA: 1", "P!truncated multipart body"},
    {"truncated after delimiter", "--b", "!truncated multipart body"},
    {"empty body", "", "!truncated multipart body"},
    {"junk after delimiter", "--bx\r\n", "!malformed multipart body"},
    {"delimiter inside data", "--b\r\n\r\nx\r\n--bz\r\n--b--", "PBD:x|E!malformed multipart body"},
    {"bare LF header", "--b\r\nA: 1\n\r\n--b--", "P!malformed multipart body"},
    {"folded header", "--b\r\nA: 1\r\n 2\r\n\r\n--b--", "PH:A=1|!malformed multipart body"},
    {"no colon", "--b\r\nA\r\n\r\n--b--", "P!malformed multipart body"},
    {"empty name", "--b\r\n: v\r\n\r\n--b--", "P!malformed multipart body"},
    {"NUL in a value", "--b\r\nA: x\0y\r\n\r\n--b--", "P!malformed multipart body"},
    {"headers over 256 bytes",
     "--b\r\nA: "
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n\r\n--b--",
     "P!part headers too large"},
    {"nine parts (max 8)",
     "--b\r\n\r\n\r\n--b\r\n\r\n\r\n--b\r\n\r\n\r\n--b\r\n\r\n\r\n--b\r\n\r\n\r\n--b\r\n\r\n\r\n"
     "--b\r\n\r\n\r\n--b\r\n\r\n\r\n--b\r\n\r\n\r\n--b--",
     "PB|EPB|EPB|EPB|EPB|EPB|EPB|EPB|E!too many parts"},
};

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].body);
        if (strstr(cases[i].name, "NUL"))
            len = 20; /* the literal has an embedded NUL */
        struct mp_transcript whole;
        mp_run("b", cases[i].body, len, 0, &whole);
        CHECKF(strcmp(whole.s, cases[i].want) == 0, "%s: got \"%s\"", cases[i].name, whole.s);
        for (size_t step = 1; step <= len; step++) {
            struct mp_transcript split;
            mp_run("b", cases[i].body, len, step, &split);
            CHECKF(strcmp(split.s, whole.s) == 0, "%s, step %zu: got \"%s\"", cases[i].name, step,
                   split.s);
            free(split.s);
        }
        free(whole.s);
    }
    struct mh_multipart p;
    CHECK(mh_multipart_init(&p, "", 0, 1, 1) < 0);
    CHECK(mh_multipart_init(
              &p, "0123456789012345678901234567890123456789012345678901234567890123456789x", 71, 1,
              1) < 0);
    return unit_report();
}
