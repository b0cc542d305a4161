/* cli_internal — what lib/core/cli.c shares with lib/core/cli_config.c (the config files). */
#ifndef SWIFT_CLI_INTERNAL_H
#define SWIFT_CLI_INTERNAL_H

#include "lib/core/cli.h"

#include <stddef.h>

/* no_argument, required_argument or optional_argument (getopt.h) */
int swift_cli_takes_arg(const struct swift_option *o);
/* a[0..alen) equals b with '-' and '_' taken as the same character */
int swift_cli_name_eq(const char *a, size_t alen, const char *b);
/* The next name of a comma-separated alias list (*a, advanced) into buf: 1, or 0 at the end. */
int swift_cli_next_alias(const char **a, char *buf, size_t cap);
/* The command's entry for a long name or alias, or NULL. */
const struct swift_option *swift_cli_find_option(const struct swift_command *cmd, const char *name,
                                                 size_t len);

#endif
