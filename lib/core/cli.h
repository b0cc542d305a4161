/*
 * cli — one option table per command drives parsing, --help, --version, --list-options,
 * the config file and the man page (git parse-options, curl's per-option docs).
 *
 *     static const struct swift_option opts[] = {
 *         {"output", 'o', SWIFT_ARG_REQUIRED, "DIR", "write the run directory to DIR", NULL},
 *         {"max-length", OPT_MAXLEN, SWIFT_ARG_REQUIRED, "N", "truncate samples to N tokens",
 * NULL},
 *         {"tuner", OPT_TUNER, SWIFT_ARG_REQUIRED, "full|lora", "what to train",
 * "train_type,tuner_type"}, SWIFT_TRACE_OPTIONS, {0}}; static const struct swift_command cmd =
 * {"swift-train", "[OPTION]... SHARD_DIR", "fine-tune a model", opts, NULL, NULL}; int argi, rc =
 * swift_cli_parse(&cmd, argc, argv, on_option, &o, &argi); if (rc >= 0) return rc;      //
 * --help/--version printed (0), usage error (2), bad config (1)
 *
 * Every long name written with '-' is also accepted with '_' (ms-swift's `--max_length`), and
 * `aliases` adds more names. A config file (YAML or JSON, ending in .yaml/.yml/.json) given as the
 * first argument expands into the same options before the command line, so flags override it
 * (ms-swift's `swift sft config.yaml`). Its `profiler:` section maps onto --profile/--trace.
 */
#ifndef SWIFT_CLI_H
#define SWIFT_CLI_H

#include <stddef.h>
#include <stdio.h>

enum { SWIFT_ARG_NONE = 0, SWIFT_ARG_REQUIRED = 1, SWIFT_ARG_OPTIONAL = 2 };

struct swift_option {
    const char *name;    /* long name in dash style; NULL ends the table */
    int key;             /* passed to the handler; also the short option when 0 < key < 128 */
    int has_arg;         /* SWIFT_ARG_* */
    const char *argname; /* metavariable in --help ("N", "DIR"), NULL for flags */
    const char *help;    /* one line for --help; NULL hides the option from --help */
    const char *aliases; /* extra long names, comma separated, or NULL */
};

struct swift_command {
    const char *name;    /* "swift-train" */
    const char *usage;   /* "[OPTION]... SHARD_DIR" */
    const char *summary; /* one line, the NAME section of the man page */
    const struct swift_option *options;
    const char *description; /* text after the option list (may be NULL) */
    const char *examples;    /* "Examples:" block for --help and the man page (may be NULL) */
};

/* Keys >= SWIFT_OPT_BASE are free for commands; the range below 0x1000 is reserved for short
 * options and the common options declared here. */
#define SWIFT_OPT_BASE 0x1000
enum {
    SWIFT_OPT_TRACE = 0x200,
    SWIFT_OPT_PROFILE,
    SWIFT_OPT_QUIET,
    SWIFT_OPT_PROGRESS,
};
/* --trace PATH and --profile SPEC, shared by every command that writes trace events. */
#define SWIFT_TRACE_OPTIONS                                                                        \
    {"trace",                                                                                      \
     SWIFT_OPT_TRACE,                                                                              \
     SWIFT_ARG_REQUIRED,                                                                           \
     "PATH",                                                                                       \
     "write trace events to PATH (a file, or a directory ending in '/'); also SWIFT_TRACE=DIR",    \
     NULL},                                                                                        \
    {                                                                                              \
        "profile", SWIFT_OPT_PROFILE, SWIFT_ARG_REQUIRED, "SPEC",                                  \
            "detailed spans for a step window: wait=W,warmup=U,active=A[,repeat=R]", NULL          \
    }

/* Called once per option in command-line order; arg is NULL for flags. Return 0, or a usage
 * error already reported with swift_usage() (any nonzero value stops parsing with exit 2). */
typedef int (*swift_option_fn)(void *ctx, int key, const char *arg);

/*
 * Parse argv. Returns -1 when the command should go on, with the positional arguments at
 * argv[*argi] .. argv[argc-1] (argv is permuted in place, as GNU getopt does).
 * Otherwise returns the exit code to return now: 0 after --help/--version/--list-options,
 * 2 after a usage error, 1 when a config file cannot be read.
 */
int swift_cli_parse(const struct swift_command *cmd, int argc, char **argv, swift_option_fn fn,
                    void *ctx, int *argi);

/* Print --help in GNU layout to fp. */
void swift_cli_help(const struct swift_command *cmd, FILE *fp);

/*
 * Expand a config file into "--key" "value" words (libyaml or jansson), appended to *words
 * (grown with realloc; caller frees each word and the array). Returns 0 or -1 after reporting
 * "FILE:LINE: ..." errors. Keys may use '-' or '_'; lists join with ','; true adds a flag,
 * false omits it; `profiler:` becomes --profile/--trace. Unknown keys are errors.
 */
int swift_cli_config_expand(const struct swift_command *cmd, const char *path, char ***words,
                            int *nwords);

/* Strict number parsing (no atoi): the whole string must be consumed and fit [min,max].
 * Return 0 or -1 without printing. */
int swift_parse_long(const char *s, long min, long max, long *out);
int swift_parse_double(const char *s, double *out);
/* Sizes with optional suffix K, M, G, T (powers of 1024; "KB", "KiB", "MB" accepted). */
int swift_parse_size(const char *s, unsigned long long *out);

#endif
