#include "tls_init.h"

#include <psa/crypto.h>

#include <sys/types.h>
#include <unistd.h>

int mh_tls_crypto_init(void)
{
    static pid_t done_in; /* 0: not yet */
    pid_t pid = getpid();
    if (done_in == pid)
        return 0;
    if (done_in)
        mbedtls_psa_crypto_free(); /* the parent's state, copied by fork() */
    psa_status_t st = psa_crypto_init();
    if (st != PSA_SUCCESS)
        return (int)st;
    done_in = pid;
    return 0;
}
