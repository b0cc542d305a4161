/* clang-format off */
/*
 * cli — one typed option table per command drives parsing, --help, --version, --list-options
 * (the bash and zsh completions), the config file keys and the man page (git's parse-options,
 * curl's per-option docs).
 *
 * An entry names the field it fills in the command's options struct (its offset and C type,
 * SWIFT_FIELD), the value's type and range, the metavariable and the help line. Parsing stores
 * into the struct directly and reports a bad value as a usage error (exit 2) in the command's
 * words; main() keeps only the checks that need several fields:
 *
 *     struct cli { struct swift_train_opts o; int force; };
 *     #define F(m) SWIFT_FIELD(struct cli, m)
 *     static const struct swift_option opts[] = {
 *         SWIFT_OPT_PATH('o', "output-dir", F(o.output_dir), "DIR", "run directory"),
 *         SWIFT_OPT_INT(0, "max-length", F(o.max_length), 1, 1L << 40, "N", "sequence length"),
 *         SWIFT_OPT_ENUM(0, "tuner", F(o.tuner),
 *                        SWIFT_CHOICES({"full", SWIFT_TUNER_FULL}, {"lora", SWIFT_TUNER_LORA}),
 *                        "full|lora", "what to train",
 *                        .aliases = "train_type,tuner_type",
 *                        .error = "--tuner: '{arg}' is not full or lora"),
 *         SWIFT_OPT_FLAG(0, "force", F(force), "replace an existing DIR"),
 *         SWIFT_TRACE_OPTIONS(F(o.trace)),
 *         SWIFT_OPT_END};
 *     static const struct swift_command cmd = {
 *         .name = "swift-train", .usage = "[OPTION]... SHARD_DIR", .summary = "fine-tune a model",
 *         .options = opts, .int_error = "--{name}: '{arg}' is not an integer >= {min}"};
 *
 *     struct cli c = {0};
 *     int argi, rc = swift_cli_parse(&cmd, argc, argv, &c, &argi);
 *     if (rc >= 0)
 *         return rc;
 *
 * (rc is 0 after --help or --version, 2 after a usage error, 1 for a bad config file.)
 * Every long name written with '-' is also accepted with '_' (ms-swift's `--max_length`), and
 * `.aliases` adds more names. A config file (YAML or JSON, ending in .yaml/.yml/.json) given as
 * the first argument expands into the same options before the command line, so flags override
 * it (an option given on the command line drops the file's, repeatable ones too) — ms-swift's
 * `swift sft config.yaml`. Its `profiler:` section maps onto --profile/--trace. One file drives
 * every stage: a key another program takes (the build's registry of every program's table,
 * swift_cli_programs) or an ms-swift key of another stage is ignored with one note on stderr,
 * a key no program takes is a usage error (exit 2) naming the file and line.
 * `--list-values` prints the words an option's value may be (.choices, .values, or an argname
 * like "full|lora"), for the completions.
 */
/* clang-format on */
#ifndef SWIFT_CLI_H
#define SWIFT_CLI_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>

/* What an option's argument is and how it is stored. */
enum swift_option_type {
    SWIFT_OPTION_END = 0,  /* ends a table */
    SWIFT_OPTION_SET,      /* no argument: store .value in an int field (a flag) */
    SWIFT_OPTION_STRING,   /* the argument itself (borrowed from argv, valid until exit);
                              with .choices, one of their names */
    SWIFT_OPTION_PATH,     /* the same, naming a file or directory */
    SWIFT_OPTION_INT,      /* a decimal integer in [min, max] (int, long or unsigned field; an
                              int field takes it as C converts it, so keep max <= INT_MAX) */
    SWIFT_OPTION_DOUBLE,   /* a number in [dmin, dmax]; SWIFT_OPT_OPEN_MIN/MAX exclude a bound */
    SWIFT_OPTION_SIZE,     /* a size >= min with K, M, G, T suffixes (swift_parse_size) */
    SWIFT_OPTION_ENUM,     /* a name of .choices, or one .lookup() maps to >= 0 (int field) */
    SWIFT_OPTION_CALLBACK, /* .callback does the rest */
    SWIFT_OPTION_IGNORE,   /* accepted for uniformity across commands, the argument dropped */
};

/* The C type of the field an entry fills; SWIFT_FIELD finds it with _Generic. */
enum swift_field_type {
    SWIFT_FIELD_NONE = 0, /* no field (callbacks that reach the struct themselves) */
    SWIFT_FIELD_INT,
    SWIFT_FIELD_LONG,
    SWIFT_FIELD_ULONG,  /* uint64_t on LP64 */
    SWIFT_FIELD_ULLONG, /* unsigned long long */
    SWIFT_FIELD_DOUBLE,
    SWIFT_FIELD_STRING, /* const char * */
    SWIFT_FIELD_OTHER,  /* anything else: only a callback can fill it */
};

/* SWIFT_FIELD(struct cli, o.max_length) inside an entry: where the value goes. */
#define SWIFT_FIELD(T, member)                                                                     \
    .offset = offsetof(T, member), .field = _Generic(((T *)0)->member,                             \
                                                     int: SWIFT_FIELD_INT,                         \
                                                     long: SWIFT_FIELD_LONG,                       \
                                                     unsigned long: SWIFT_FIELD_ULONG,             \
                                                     unsigned long long: SWIFT_FIELD_ULLONG,       \
                                                     double: SWIFT_FIELD_DOUBLE,                   \
                                                     const char *: SWIFT_FIELD_STRING,             \
                                                     default: SWIFT_FIELD_OTHER)

/* .flags */
enum {
    SWIFT_OPT_OPTARG = 1,   /* the argument is optional (--packing[=HOW]); NULL when absent */
    SWIFT_OPT_OPEN_MIN = 2, /* DOUBLE: dmin itself is out of range */
    SWIFT_OPT_OPEN_MAX = 4, /* DOUBLE: dmax itself is out of range */
};

struct swift_choice {
    const char *name;
    int value;
};
/* An ENUM's names and values, ended for you: SWIFT_CHOICES({"hf", 1}, {"huggingface", 1});
 * a STRING's allowed words: .choices = SWIFT_CHOICES({"gguf", 0}, {"hf", 0}) */
#define SWIFT_CHOICES(...) ((const struct swift_choice[]){__VA_ARGS__, {NULL, 0}})

struct swift_option;
/* A CALLBACK entry's handler: opts is the struct given to swift_cli_parse(), arg is NULL when
 * the option takes none. Return 0, or a usage error already reported with swift_usage() (any
 * nonzero value stops parsing with exit 2). */
typedef int (*swift_option_fn)(const struct swift_option *opt, void *opts, const char *arg);

struct swift_option {
    enum swift_option_type type;
    int short_name;      /* 'o' for -o, or 0 */
    const char *name;    /* long name in dash style */
    const char *argname; /* metavariable in --help ("N", "DIR"); NULL: takes no argument */
    const char *help;    /* one line for --help; NULL hides the option from --help */
    const char *aliases; /* extra long names, comma separated, or NULL */
    size_t offset;       /* of the field in the options struct (SWIFT_FIELD) */
    enum swift_field_type field;
    long min, max;                      /* INT: the accepted range; SIZE: the smallest size */
    double dmin, dmax;                  /* DOUBLE: the accepted range */
    int flags;                          /* SWIFT_OPT_* */
    int value;                          /* SET: the value stored; CALLBACK: the callback's to use */
    const struct swift_choice *choices; /* ENUM (STRING: the names allowed), ended by a NULL name */
    int (*lookup)(const char *name);    /* ENUM without choices: a value >= 0, or < 0 */
    swift_option_fn callback;           /* CALLBACK */
    /* The usage error for a bad value, a template where {name} is the option's long name,
     * {arg} the argument, {min} and {max} the range. NULL: the command's int_error (INT) or
     * number_error (DOUBLE), else "invalid argument '{arg}' for '--{name}'". */
    const char *error;
    const char *range_error; /* a well-formed number out of range; NULL: .error */
    /* The words the value may be, for completions (--list-values), separated by spaces, commas
     * or '|' when neither .choices nor an argname like "full|lora" lists them; a LOOKUP entry
     * shows only those its lookup accepts. */
    const char *values;
};

/* Entries, in the spirit of git's OPT_INTEGER and friends: short name (0: none), long name,
 * SWIFT_FIELD(...), the type's own arguments, the metavariable, then the help line, which more
 * fields may follow as designated initializers (.aliases = "train_type", .error = "...").
 * (The help line is the macro's `...` so that a call without extra fields is standard C.) */
#define SWIFT_OPT_FLAG(s, l, f, ...)                                                               \
    {                                                                                              \
        .type = SWIFT_OPTION_SET, .short_name = (s), .name = (l), f, .value = 1,                   \
        .help = __VA_ARGS__                                                                        \
    }
#define SWIFT_OPT_SET(s, l, f, v, ...)                                                             \
    {                                                                                              \
        .type = SWIFT_OPTION_SET, .short_name = (s), .name = (l), f, .value = (v),                 \
        .help = __VA_ARGS__                                                                        \
    }
#define SWIFT_OPT_STRING(s, l, f, a, ...)                                                          \
    {                                                                                              \
        .type = SWIFT_OPTION_STRING, .short_name = (s), .name = (l), f, .argname = (a),            \
        .help = __VA_ARGS__                                                                        \
    }
#define SWIFT_OPT_PATH(s, l, f, a, ...)                                                            \
    {                                                                                              \
        .type = SWIFT_OPTION_PATH, .short_name = (s), .name = (l), f, .argname = (a),              \
        .help = __VA_ARGS__                                                                        \
    }
#define SWIFT_OPT_INT(s, l, f, lo, hi, a, ...)                                                     \
    {                                                                                              \
        .type = SWIFT_OPTION_INT, .short_name = (s), .name = (l), f, .min = (lo), .max = (hi),     \
        .argname = (a), .help = __VA_ARGS__                                                        \
    }
#define SWIFT_OPT_DOUBLE(s, l, f, lo, hi, a, ...)                                                  \
    {                                                                                              \
        .type = SWIFT_OPTION_DOUBLE, .short_name = (s), .name = (l), f, .dmin = (lo),              \
        .dmax = (hi), .argname = (a), .help = __VA_ARGS__                                          \
    }
/* Any number (infinities included, NaN never). (Wrappers spell entries out: a SWIFT_FIELD passed
 * on to another macro would split into two arguments.) */
#define SWIFT_OPT_NUMBER(s, l, f, a, ...)                                                          \
    {                                                                                              \
        .type = SWIFT_OPTION_DOUBLE, .short_name = (s), .name = (l), f, .dmin = -HUGE_VAL,         \
        .dmax = HUGE_VAL, .argname = (a), .help = __VA_ARGS__                                      \
    }
#define SWIFT_OPT_SIZE(s, l, f, lo, a, ...)                                                        \
    {                                                                                              \
        .type = SWIFT_OPTION_SIZE, .short_name = (s), .name = (l), f, .min = (lo), .argname = (a), \
        .help = __VA_ARGS__                                                                        \
    }
#define SWIFT_OPT_ENUM(s, l, f, c, a, ...)                                                         \
    {                                                                                              \
        .type = SWIFT_OPTION_ENUM, .short_name = (s), .name = (l), f, .choices = (c),              \
        .argname = (a), .help = __VA_ARGS__                                                        \
    }
#define SWIFT_OPT_LOOKUP(s, l, f, fn, a, ...)                                                      \
    {                                                                                              \
        .type = SWIFT_OPTION_ENUM, .short_name = (s), .name = (l), f, .lookup = (fn),              \
        .argname = (a), .help = __VA_ARGS__                                                        \
    }
/* a == NULL: the option takes no argument */
#define SWIFT_OPT_CALLBACK(s, l, fn, a, ...)                                                       \
    {                                                                                              \
        .type = SWIFT_OPTION_CALLBACK, .short_name = (s), .name = (l), .callback = (fn),           \
        .argname = (a), .help = __VA_ARGS__                                                        \
    }
#define SWIFT_OPT_IGNORE(s, l, a, ...)                                                             \
    {                                                                                              \
        .type = SWIFT_OPTION_IGNORE, .short_name = (s), .name = (l), .argname = (a),               \
        .help = __VA_ARGS__                                                                        \
    }
#define SWIFT_OPT_END                                                                              \
    {                                                                                              \
        .type = SWIFT_OPTION_END                                                                   \
    }

/* --trace PATH and --profile SPEC, shared by every command that writes trace events. */
#define SWIFT_TRACE_HELP                                                                           \
    "write trace events to PATH (a file, or a directory ending in '/'); also SWIFT_TRACE=DIR"
#define SWIFT_PROFILE_HELP "detailed spans for a step window: wait=W,warmup=U,active=A[,repeat=R]"
#define SWIFT_OPT_TRACE(f)                                                                         \
    {                                                                                              \
        .type = SWIFT_OPTION_PATH, .name = "trace", f, .argname = "PATH", .help = SWIFT_TRACE_HELP \
    }
#define SWIFT_OPT_PROFILE(f)                                                                       \
    {                                                                                              \
        .type = SWIFT_OPTION_STRING, .name = "profile", f, .argname = "SPEC",                      \
        .help = SWIFT_PROFILE_HELP                                                                 \
    }
/* --trace into f, and --profile accepted but unused (a command without steps) */
#define SWIFT_TRACE_OPTIONS(f)                                                                     \
    {.type = SWIFT_OPTION_PATH, .name = "trace", f, .argname = "PATH", .help = SWIFT_TRACE_HELP},  \
        SWIFT_OPT_IGNORE(0, "profile", "SPEC", SWIFT_PROFILE_HELP)
/* --progress and --no-progress into an int field: SWIFT_PROGRESS_ON (1) and SWIFT_PROGRESS_OFF
 * (-1) of lib/core/progress.h; left at 0 (AUTO), the line shows when stderr is a terminal. */
#define SWIFT_OPT_PROGRESS(f)                                                                      \
    {.type = SWIFT_OPTION_SET,                                                                     \
     .name = "progress",                                                                           \
     f,                                                                                            \
     .value = 1,                                                                                   \
     .help = "show the progress line even when stderr is not a terminal"},                         \
    {                                                                                              \
        .type = SWIFT_OPTION_SET, .name = "no-progress", f, .value = -1,                           \
        .help = "no progress line, even on a terminal", .aliases = "disable_tqdm"                  \
    }
/* -q, --quiet: swift_set_quiet(1), no informational messages */
int swift_cli_quiet(const struct swift_option *opt, void *opts, const char *arg);
#define SWIFT_OPT_QUIET                                                                            \
    SWIFT_OPT_CALLBACK('q', "quiet", swift_cli_quiet, NULL, "no informational messages")

struct swift_command {
    const char *name;    /* "swift-train" */
    const char *usage;   /* "[OPTION]... SHARD_DIR" */
    const char *summary; /* one line, the NAME section of the man page */
    const struct swift_option *options;
    const char *description;  /* text after the option list (may be NULL) */
    const char *examples;     /* "Examples:" block for --help and the man page (may be NULL) */
    const char *int_error;    /* default message template of INT entries (may be NULL) */
    const char *number_error; /* default message template of DOUBLE entries (may be NULL) */
};

/* Where a CALLBACK entry with a SWIFT_FIELD points in opts. */
static inline void *swift_option_field(const struct swift_option *opt, void *opts)
{
    return (char *)opts + opt->offset;
}

/*
 * Parse argv into opts (the struct the table's SWIFT_FIELDs describe). Returns -1 when the
 * command should go on, with the positional arguments at argv[*argi] .. argv[argc-1] (argv is
 * permuted in place, as GNU getopt does). Otherwise returns the exit code to return now: 0 after
 * --help/--version/--list-options, 2 after a usage error, 1 when a config file cannot be read
 * (or the table does not fit its fields, a bug reported as such).
 */
int swift_cli_parse(const struct swift_command *cmd, int argc, char **argv, void *opts, int *argi);

/* The config file the last swift_cli_parse read (argv[1] as given), and *argv the argument
 * vector it parsed (the program name, the file's keys as "--key" "value" words, then the given
 * options; NULL-terminated, in getopt's order); NULL (and *argv NULL) when no config file was
 * given. Borrowed, valid until exit. The trace records both in swift_meta.config. */
const char *swift_cli_config_used(char *const **argv);

/* Print --help in GNU layout to fp. */
void swift_cli_help(const struct swift_command *cmd, FILE *fp);

/*
 * Expand a config file into "--key" "value" words (libyaml or jansson), appended to *words
 * (grown with realloc; caller frees each word and the array). Returns 0, -1 after reporting
 * "FILE:LINE: ..." errors, or SWIFT_MISUSED after reporting an unknown key as a usage error.
 * Keys may use '-' or '_'; lists join with ','; true adds a flag, false omits it; `profiler:`
 * becomes --profile/--trace. Keys of other stages are left out with one note (lib/core/cli.h).
 */
int swift_cli_config_expand(const struct swift_command *cmd, const char *path, char ***words,
                            int *nwords);

/* Which program takes which option, for config files shared between stages: every program's
 * long names and aliases, generated at build time from the programs' own option tables
 * (scripts/cli-registry.sh reads each one's --list-options; the Makefile links the result into
 * every command). Ended by a NULL name; empty in programs linked without it (tests). */
struct swift_cli_program {
    const char *name;        /* "swift-preprocess" */
    const char *const *keys; /* long names and aliases, dash style, ended by NULL */
};
extern const struct swift_cli_program swift_cli_programs[];
/* Use another registry (tests); NULL: swift_cli_programs again. */
void swift_cli_set_programs(const struct swift_cli_program *programs);

/* Strict number parsing (no atoi): the whole string must be consumed and fit [min,max].
 * Return 0 or -1 without printing. */
int swift_parse_long(const char *s, long min, long max, long *out);
int swift_parse_double(const char *s, double *out);
/* Sizes with optional suffix K, M, G, T (powers of 1024; "KB", "KiB", "MB" accepted). */
int swift_parse_size(const char *s, unsigned long long *out);

#endif
