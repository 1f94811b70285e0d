#ifndef MH_SUGGEST_H
#define MH_SUGGEST_H
/*
 * "Did you mean": the known name closest to a misspelt one, for every
 * place that checks names against a list (settings and command-line flags,
 * the options tables of the Lua API), so they all suggest alike.
 *
 *   struct mh_suggest s;
 *   mh_suggest_init(&s, name, len, false);
 *   for (each known name k) mh_suggest_try(&s, k);
 *   s.best: the suggestion, or NULL when nothing is close enough.
 */
#include <stdbool.h>
#include <stddef.h>

struct mh_suggest {
    const char *best; /* the closest name tried so far, NULL when none is close */
    const char *_name;
    size_t _len;
    bool _flag_form;
    int _best_d;
};

/* Starts a search for name (len bytes); flag_form: '-' in name counts as '_'. */
void mh_suggest_init(struct mh_suggest *s, const char *name, size_t len, bool flag_form);

/* Considers known name k (NUL-terminated; must outlive s.best's use). */
void mh_suggest_try(struct mh_suggest *s, const char *k);

/*
 * Writes `what: unknown <noun> "k" (did you mean "x"?)` into out, or
 * `(known: a, b, ...)` when no name in known (NULL-terminated) is close:
 * the one wording for an unknown name in a table.
 */
void mh_suggest_unknown(char *out, size_t outlen, const char *what, const char *noun, const char *k,
                        size_t klen, const char *const *known);

/* Edit distance (insert, delete, substitute, swap neighbours), capped at 9. */
int mh_edit_distance(const char *a, size_t alen, const char *b, bool flag_form);

#endif
