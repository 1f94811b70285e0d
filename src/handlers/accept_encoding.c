#include "accept_encoding.h"

#include <stdbool.h>
#include <string.h>

#define NO_STAR 0xffff

void mh_accept_encoding_init(struct mh_accept_encoding *a)
{
    memset(a, 0, sizeof *a);
    a->_star = NO_STAR;
}

static bool ows(char c)
{
    return c == ' ' || c == '\t';
}

static bool tok_eq(const char *s, size_t n, const char *lit)
{
    size_t m = strlen(lit);
    if (n != m)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        if (c != lit[i])
            return false;
    }
    return true;
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), in thousandths; -1 if malformed. */
static int qvalue(const char *s, size_t n)
{
    if (n == 0 || (s[0] != '0' && s[0] != '1'))
        return -1;
    int q = (s[0] - '0') * 1000;
    if (n == 1)
        return q;
    if (s[1] != '.' || n > 5)
        return -1;
    int scale = 100;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        q += (s[i] - '0') * scale;
    }
    return q > 1000 ? -1 : q;
}

/* The q of one element's parameters ("; q=0.5"), 1000 when absent, -1 if malformed. */
static int element_q(const char *p, size_t n)
{
    int q = 1000;
    size_t i = 0;
    while (i < n) {
        while (i < n && (ows(p[i]) || p[i] == ';'))
            i++;
        size_t start = i;
        while (i < n && p[i] != ';')
            i++;
        size_t end = i;
        while (end > start && ows(p[end - 1]))
            end--;
        if (end - start >= 2 && (p[start] == 'q' || p[start] == 'Q') && p[start + 1] == '=') {
            q = qvalue(p + start + 2, end - start - 2);
            if (q < 0)
                return -1;
        }
    }
    return q;
}

void mh_accept_encoding_add(struct mh_accept_encoding *a, const char *v, size_t len)
{
    a->_seen = 1;
    size_t i = 0;
    while (i < len) {
        while (i < len && (ows(v[i]) || v[i] == ','))
            i++;
        size_t start = i;
        while (i < len && v[i] != ',')
            i++;
        const char *e = v + start;
        size_t n = i - start;
        size_t tn = 0;
        while (tn < n && e[tn] != ';' && !ows(e[tn]))
            tn++;
        if (tn == 0)
            continue;
        int q = element_q(e + tn, n - tn);
        if (q < 0)
            continue;
        int c;
        if (tok_eq(e, tn, "gzip") || tok_eq(e, tn, "x-gzip"))
            c = MH_CODING_GZIP;
        else if (tok_eq(e, tn, "br"))
            c = MH_CODING_BR;
        else if (tok_eq(e, tn, "identity"))
            c = MH_CODING_IDENTITY;
        else if (tok_eq(e, tn, "*")) {
            a->_star = (unsigned short)q;
            continue;
        } else
            continue;
        /* A coding named twice: the highest q counts (clients do not mean to refuse). */
        if (!a->_set[c] || q > a->q[c])
            a->q[c] = (unsigned short)q;
        a->_set[c] = 1;
    }
}

static unsigned effective_q(const struct mh_accept_encoding *a, int c)
{
    if (a->_set[c])
        return a->q[c];
    if (a->_star != NO_STAR)
        return a->_star;
    return c == MH_CODING_IDENTITY ? 1 : 0; /* identity: acceptable, below any named coding */
}

enum mh_coding mh_accept_encoding_choose(const struct mh_accept_encoding *a, unsigned available)
{
    if (!a->_seen)
        return MH_CODING_IDENTITY;
    static const enum mh_coding pref[] = {MH_CODING_BR, MH_CODING_GZIP, MH_CODING_IDENTITY};
    enum mh_coding best = MH_CODING_IDENTITY;
    unsigned best_q = 0;
    for (size_t k = 0; k < sizeof pref / sizeof pref[0]; k++) {
        enum mh_coding c = pref[k];
        if (c != MH_CODING_IDENTITY && !(available & MH_CODING_BIT(c)))
            continue;
        unsigned q = effective_q(a, c);
        if (q > best_q) {
            best = c;
            best_q = q;
        }
    }
    return best;
}
