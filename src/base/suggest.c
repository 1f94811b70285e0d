#include "suggest.h"

#include <stdio.h>
#include <string.h>

int mh_edit_distance(const char *a, size_t alen, const char *b, bool flag_form)
{
    size_t blen = strlen(b);
    if (alen > 40 || blen > 40)
        return 9;
    int d[42][42];
    for (size_t i = 0; i <= alen; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= blen; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= alen; i++) {
        for (size_t j = 1; j <= blen; j++) {
            char ca = flag_form && a[i - 1] == '-' ? '_' : a[i - 1];
            int best = d[i - 1][j - 1] + (ca != b[j - 1]);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1) { /* two neighbours swapped */
                char cp = flag_form && a[i - 2] == '-' ? '_' : a[i - 2];
                if (ca == b[j - 2] && cp == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                    best = d[i - 2][j - 2] + 1;
            }
            d[i][j] = best;
        }
    }
    return d[alen][blen] > 9 ? 9 : d[alen][blen];
}

void mh_suggest_init(struct mh_suggest *s, const char *name, size_t len, bool flag_form)
{
    s->best = NULL;
    s->_name = name;
    s->_len = len;
    s->_flag_form = flag_form;
    s->_best_d = len < 6 ? 1 : 2; /* more than this is a different word, not a typo */
}

void mh_suggest_try(struct mh_suggest *s, const char *k)
{
    int d = mh_edit_distance(s->_name, s->_len, k, s->_flag_form);
    if (d <= s->_best_d) {
        s->best = k;
        s->_best_d = d - 1; /* a later name must be strictly closer */
    }
}

void mh_suggest_unknown(char *out, size_t outlen, const char *what, const char *noun, const char *k,
                        size_t klen, const char *const *known)
{
    struct mh_suggest s;
    mh_suggest_init(&s, k, klen, false);
    for (const char *const *n = known; *n; n++)
        mh_suggest_try(&s, *n);
    int klen_shown = klen > 64 ? 64 : (int)klen;
    int len = snprintf(out, outlen, "%s: unknown %s \"%.*s\" (", what, noun, klen_shown, k);
    if (s.best) {
        snprintf(out + len, outlen - (size_t)len, "did you mean \"%s\"?)", s.best);
        return;
    }
    const char *sep = "known: ";
    for (const char *const *n = known; *n && (size_t)len < outlen; n++) {
        len += snprintf(out + len, outlen - (size_t)len, "%s%s", sep, *n);
        sep = ", ";
    }
    if ((size_t)len < outlen)
        snprintf(out + len, outlen - (size_t)len, ")");
}
