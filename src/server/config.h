#ifndef MH_CONFIG_H
#define MH_CONFIG_H
/*
 * The command line: flags into the settings (settings/settings.h declares
 * them, defaults and all), and --help. The script's http.server{} is read
 * by lua/lua_settings.h; flags win over it, and mh_config_validate checks
 * the merge.
 */
#include <stddef.h>

#include "settings.h"

/*
 * Parses argv. Returns 0 to go on, 1 when the program should exit 0 (--help,
 * --version), -1 on a usage error (message written to err).
 */
int mh_config_parse_args(struct mh_config *c, int argc, char **argv, char *err, size_t errlen);

/* The usage text and every flag, from the settings schema, on stdout. */
void mh_config_print_help(const char *argv0);

#endif
