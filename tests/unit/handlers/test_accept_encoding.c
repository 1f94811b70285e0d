/* Accept-Encoding rows: header values and available codings in, the chosen coding out. */
#include "accept_encoding.h"
#include "unit.h"

#define ID   MH_CODING_IDENTITY
#define GZ   MH_CODING_GZIP
#define BR   MH_CODING_BR
#define AGZ  MH_CODING_BIT(MH_CODING_GZIP)
#define ABR  MH_CODING_BIT(MH_CODING_BR)
#define BOTH (AGZ | ABR)

static const struct {
    const char *v1, *v2; /* NULL: no such field */
    unsigned available;
    enum mh_coding want;
} rows[] = {
    {NULL, NULL, BOTH, ID},
    {"", NULL, BOTH, ID},
    {"gzip", NULL, AGZ, GZ},
    {"gzip", NULL, 0, ID},
    {"GZip", NULL, AGZ, GZ},
    {"x-gzip", NULL, AGZ, GZ},
    {"gzip, deflate, br", NULL, BOTH, BR},
    {"gzip, deflate, br", NULL, AGZ, GZ},
    {"br;q=0.5, gzip", NULL, BOTH, GZ},
    {"gzip;q=0", NULL, AGZ, ID},
    {"gzip; q=0.000", NULL, AGZ, ID},
    {"gzip;q=0.001", NULL, AGZ, GZ},
    {"gzip;q=1.000", NULL, AGZ, GZ},
    {"gzip;q=1.001", NULL, AGZ, ID}, /* malformed q: the element is skipped */
    {"gzip;q=2", NULL, AGZ, ID},
    {"gzip;q=", NULL, AGZ, ID},
    {"gzip;q=0.5;x=1", NULL, AGZ, GZ},
    {"gzip ; Q=0.5", NULL, AGZ, GZ},
    {"identity;q=1, gzip;q=0.5", NULL, AGZ, ID},
    {"identity;q=0.5, gzip;q=0.5", NULL, AGZ, GZ}, /* tie: the compressed one */
    {"*", NULL, AGZ, GZ},
    {"*;q=0", NULL, AGZ, ID}, /* nothing acceptable: identity anyway */
    {"*;q=0, gzip", NULL, AGZ, GZ},
    {"gzip;q=0, *", NULL, BOTH, BR},
    {"gzip;q=0, *", NULL, AGZ, ID},
    {"deflate, compress", NULL, BOTH, ID},
    {"br", "gzip;q=0.9", BOTH, BR},      /* two fields add up */
    {"gzip;q=0", "gzip;q=0.5", AGZ, GZ}, /* named twice: the higher q */
    {",,, ,", NULL, AGZ, ID},
    {";q=1", NULL, AGZ, ID},
};

int main(void)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct mh_accept_encoding a;
        mh_accept_encoding_init(&a);
        if (rows[i].v1)
            mh_accept_encoding_add(&a, rows[i].v1, strlen(rows[i].v1));
        if (rows[i].v2)
            mh_accept_encoding_add(&a, rows[i].v2, strlen(rows[i].v2));
        enum mh_coding got = mh_accept_encoding_choose(&a, rows[i].available);
        CHECKF(got == rows[i].want, "row %zu (%s | %s): got %d want %d", i,
               rows[i].v1 ? rows[i].v1 : "-", rows[i].v2 ? rows[i].v2 : "-", got, rows[i].want);
    }
    return unit_report();
}
