/*
 * Hop-by-hop fields (http/hop.c): the standard names in any case, the
 * Connection tokens (commas, white space, empty ones, case), the cap on
 * Connection fields, and names that only look like hop-by-hop ones.
 */
#include "hop.h"
#include "unit.h"

static bool named(const char *value, const char *name)
{
    struct mh_hop h = {0};
    mh_hop_add_connection(&h, value, strlen(value));
    return mh_hop_named(&h, name, strlen(name));
}

int main(void)
{
    static const char *const standard[] = {
        "Connection",
        "keep-alive",
        "PROXY-CONNECTION",
        "te",
        "Trailer",
        "transfer-encoding",
        "Upgrade",
        "Proxy-Authenticate",
        "proxy-authorization",
    };
    for (size_t i = 0; i < sizeof standard / sizeof standard[0]; i++)
        CHECKF(mh_hop_is_standard(standard[i], strlen(standard[i])), "%s", standard[i]);
    static const char *const others[] = {"",
                                         "t",
                                         "tE2",
                                         "Trailers",
                                         "Upgrade-Insecure-Requests",
                                         "Keep-Alive2",
                                         "connectio",
                                         "proxy-authorizatio",
                                         "Host"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        CHECKF(!mh_hop_is_standard(others[i], strlen(others[i])), "%s", others[i]);
    CHECK(mh_hop_is_connection("CONNECTION", 10));
    CHECK(!mh_hop_is_connection("Connections", 11));

    CHECK(named("close, X-Drop", "x-drop"));
    CHECK(named("close, X-Drop", "CLOSE"));
    CHECK(named(" ,,x-a ,\tX-B\t", "x-b"));
    CHECK(named("x-a,x-b", "x-a"));
    CHECK(!named("x-a,x-b", "x-"));
    CHECK(!named("x-ab", "x-a"));
    CHECK(!named("x-a", "x-ab"));
    CHECK(!named("", "x"));
    CHECK(!named(",, ,", ""));
    CHECK(!named("close", "clos"));

    struct mh_hop h = {0};
    CHECK(!mh_hop_drops(&h, "X-Drop", 6));
    CHECK(mh_hop_drops(&h, "TE", 2));
    for (unsigned i = 0; i < MH_HOP_MAX_CONNECTION; i++)
        CHECK(mh_hop_add_connection(&h, i == 5 ? "x-drop" : "close", i == 5 ? 6 : 5));
    CHECK(!mh_hop_add_connection(&h, "x-late", 6)); /* the caller takes the Lua path */
    CHECK(mh_hop_drops(&h, "X-Drop", 6));
    CHECK(!mh_hop_drops(&h, "X-Late", 6));
    CHECK(!mh_hop_drops(&h, "Host", 4));

    return unit_report();
}
