#include "protocols.h"

#include "h1.h"
#include "h2_conn.h"

const struct mh_conn_protos mh_http_protos = {
    .http1 = &mh_h1_proto,
    .http2 = &mh_h2_proto,
};
