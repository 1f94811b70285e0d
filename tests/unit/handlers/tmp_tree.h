/* Small file trees in a temporary directory for the file-handling unit tests. */
#ifndef MH_TMP_TREE_H
#define MH_TMP_TREE_H
#include <stdio.h>
#include <stdlib.h>

/* Writes `text` to dir/name (replacing it). */
static inline void tmp_put(const char *dir, const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f) {
        perror(p);
        return;
    }
    fputs(text, f);
    fclose(f);
}

/* Removes dir and everything in it. */
static inline void tmp_remove(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}
#endif
