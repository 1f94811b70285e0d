/*
 * docs/reference/settings.md from the settings schema (src/settings/settings_table.c).
 *
 *   settings_doc OUT           writes the page to OUT
 *   settings_doc --check FILE  exits 1, naming the first line that differs,
 *                              when FILE is not what the schema writes
 *
 * The build runs the first (target settings-doc copies the result into
 * docs/); ctest runs the second on the committed page, so the page cannot
 * drift from the code.
 */
#include "settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The page in memory (open_memstream), NUL-terminated; exits on failure. */
static char *render(size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) {
        perror("settings_doc");
        exit(2);
    }
    mh_settings_write_markdown(f);
    fclose(f);
    return buf;
}

static int check(const char *path)
{
    size_t len;
    char *want = render(&len);
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    char *have = malloc(len + 2);
    size_t n = have ? fread(have, 1, len + 1, f) : 0;
    fclose(f);
    int rc = 0;
    if (!have || n != len || memcmp(have, want, len) != 0) {
        size_t line = 1;
        for (size_t i = 0; have && i < n && i < len && have[i] == want[i]; i++)
            line += want[i] == '\n';
        fprintf(stderr,
                "%s differs from the settings schema at line %zu: rebuild it with "
                "`cmake --build build --target settings-doc`\n",
                path, line);
        rc = 1;
    }
    free(have);
    free(want);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--check"))
        return check(argv[2]);
    if (argc != 2) {
        fprintf(stderr, "usage: settings_doc OUT | settings_doc --check FILE\n");
        return 2;
    }
    size_t len;
    char *page = render(&len);
    FILE *f = fopen(argv[1], "wb");
    if (!f || fwrite(page, 1, len, f) != len || fclose(f) != 0) {
        perror(argv[1]);
        return 1;
    }
    free(page);
    return 0;
}
