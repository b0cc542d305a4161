/* swift-trace-analyze — merge traces from every stage and rank, and report the bottlenecks. */
#include "lib/analyze/analyze.h"
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/omp.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

#define F(m) SWIFT_FIELD(struct swift_analyze_opts, m)

static int threshold(const struct swift_option *opt, void *opts, const char *arg)
{
    struct swift_analyze_opts *o = opts;
    if (swift_an_threshold_set(&o->th, arg) < 0)
        return swift_usage(
            "--threshold: expected RULE=NUMBER with a rule of docs/bottlenecks.md, got '%s'", arg);
    return 0;
}

/* --steps A-B (or A alone) */
static int steps(const struct swift_option *opt, void *opts, const char *arg)
{
    struct swift_analyze_opts *o = opts;
    const char *dash = strchr(arg, '-');
    char a[32];
    size_t l = dash ? (size_t)(dash - arg) : strlen(arg);
    if (l == 0 || l >= sizeof(a))
        return swift_usage("--steps: expected A-B, got '%s'", arg);
    memcpy(a, arg, l);
    a[l] = 0;
    if (swift_parse_long(a, 0, 1L << 40, &o->step_lo) < 0 ||
        swift_parse_long(dash ? dash + 1 : a, 0, 1L << 40, &o->step_hi) < 0 ||
        o->step_hi < o->step_lo)
        return swift_usage("--steps: expected A-B, got '%s'", arg);
    return 0;
}

/* --fail-on warn|critical|regression[=PCT] (repeatable: a level and the regression gate) */
static int fail_on(const struct swift_option *opt, void *opts, const char *arg)
{
    struct swift_analyze_opts *o = opts;
    double pct = SWIFT_AN_REGRESSION_PCT;
    if (!strcmp(arg, "warn"))
        o->fail_on = SWIFT_SEV_WARN;
    else if (!strcmp(arg, "critical"))
        o->fail_on = SWIFT_SEV_CRITICAL;
    else if (!strncmp(arg, "regression", 10) &&
             (!arg[10] || (arg[10] == '=' && swift_parse_double(arg + 11, &pct) == 0 && pct >= 0)))
        o->regress_pct = pct;
    else
        return swift_usage(
            "--fail-on: expected warn, critical or regression[=PCT] (PCT >= 0), got '%s'", arg);
    return 0;
}

static int ranks(const struct swift_option *opt, void *opts, const char *arg)
{
    for (const char *p = arg; *p; p++)
        if (!strchr("0123456789,-", *p))
            return swift_usage("--ranks: expected a list like 0,2,4-7, got '%s'", arg);
    ((struct swift_analyze_opts *)opts)->ranks = arg;
    return 0;
}

/* --emit-patch[=top|all] */
static int emit_patch(const struct swift_option *opt, void *opts, const char *arg)
{
    struct swift_analyze_opts *o = opts;
    if (!arg || !strcmp(arg, "top"))
        o->emit_patch = 1;
    else if (!strcmp(arg, "all"))
        o->emit_patch = 2;
    else
        return swift_usage("--emit-patch: expected top or all, got '%s'", arg);
    return 0;
}

static const struct swift_option options[] = {
    SWIFT_OPT_ENUM('f', "format", F(format),
                   SWIFT_CHOICES({"text", SWIFT_FMT_TEXT}, {"md", SWIFT_FMT_MD},
                                 {"markdown", SWIFT_FMT_MD}, {"json", SWIFT_FMT_JSON},
                                 {"html", SWIFT_FMT_HTML}),
                   "text|md|json|html", "report format (default text)",
                   .error = "--format: expected text, md, json or html, got '{arg}'"),
    SWIFT_OPT_PATH('o', "output", F(output), "FILE",
                   "write the report to FILE (atomically) instead of stdout"),
    SWIFT_OPT_CALLBACK(0, "fail-on", fail_on, "warn|critical|regression[=PCT]",
                       "exit 1 when a bottleneck of that severity or worse is found (with "
                       "--compare: new in TEST), or when TEST's mean step time is over PCT % "
                       "(default 5) above CONTROL's (CI gates; repeatable)",
                       .values = "warn critical regression"),
    SWIFT_OPT_FLAG(0, "compare", F(compare),
                   "compare two runs, CONTROL TEST (files or directories): per-op counts and "
                   "times (HTA TraceDiff), step time by part, bottlenecks resolved and new"),
    SWIFT_OPT_CALLBACK(
        0, "threshold", threshold, "RULE=VALUE",
        "set a rule's threshold, e.g. data_stall=15 (repeatable; see docs/bottlenecks.md)"),
    SWIFT_OPT_FLAG(0, "strict", F(strict),
                   "fail when any input cannot be read or has a bad line (default: report it, "
                   "analyse the rest)"),
    SWIFT_OPT_INT(0, "top", F(top), 1, 1000, "N",
                  "rows in every table (per-op, phases, kernels, host operations) and worst-span "
                  "lists (default 5)",
                  .error = "--top: expected 1..1000, got '{arg}'"),
    SWIFT_OPT_INT('j', "threads", F(threads), 0, 4096, "N",
                  "analyse N processes (ranks) in parallel (default 1; 0: one per CPU)",
                  .error = "--threads: expected 0..4096, got '{arg}'"),
    SWIFT_OPT_PATH(
        0, "merge", F(merge), "OUT.json[.gz]",
        "also write one Perfetto-loadable trace of every input (pids remapped per rank)"),
    SWIFT_OPT_CALLBACK(0, "steps", steps, "A-B",
                       "--merge: keep only steps A to B; --compare: compare steps A to B (default: "
                       "ops of the first step, step time of all)"),
    SWIFT_OPT_CALLBACK(0, "ranks", ranks, "LIST",
                       "--merge: keep only these ranks (0,2,4-7); --compare: compare these ranks "
                       "(default: the lowest)"),
    SWIFT_OPT_INT(0, "window", F(window), 0, 1000000, "N",
                  "--merge: keep N steps around each rank's worst step",
                  .error = "--window: expected a number of steps, got '{arg}'"),
    SWIFT_OPT_SIZE(0, "merge-warn-size", F(merge_warn_bytes), 0, "SIZE",
                   "warn when the merged trace exceeds SIZE (default 256M)",
                   .error = "--merge-warn-size: expected a size, got '{arg}'"),
    SWIFT_OPT_SET(0, "no-ns-rounding", F(kopts.hta_rounding), 0,
                  "do not round ns-resolution timestamps as HTA does (HTA's disable_ns_rounding)"),
    SWIFT_OPT_CALLBACK(0, "emit-patch", emit_patch, "top|all",
                       "print the top bottleneck's remedy as a unified diff of the run's config "
                       "file (or of command.sh, the command line) for patch -p0, instead of the "
                       "report; =all: every bottleneck's, in rank order",
                       .flags = SWIFT_OPT_OPTARG, .values = "top all"),
    SWIFT_OPT_QUIET,
    SWIFT_TRACE_OPTIONS(F(trace)),
    SWIFT_OPT_END};

static const struct swift_command command = {
    .name = "swift-trace-analyze",
    .usage =
        "[OPTION]... TRACE|DIR...\n  or:  swift-trace-analyze --compare [OPTION]... CONTROL TEST",
    .summary =
        "report where step time goes and what to change, from swift-tools and PyTorch profiler "
        "traces",
    .options = options,
    .description =
        "TRACE is one of our *.trace.jsonl files, a PyTorch profiler (Kineto) *.json or *.json.gz\n"
        "trace, or a directory of them; any mix, any number. Files are streamed, never loaded "
        "whole.\n"
        "The report gives per process and rank the step-time breakdown (TensorBoard plugin roles "
        "for\n"
        "Kineto traces; data_wait/forward/backward/grad_sync/optimizer for ours), GPU "
        "utilization,\n"
        "HTA's temporal, idle, kernel and overlap analyses, and the bottlenecks of "
        "docs/bottlenecks.md\n"
        "with evidence and the remedy (the exact new command line when the trace recorded it).\n"
        "A damaged input is reported with its file and byte offset and the others are analysed.\n"
        "A bad line of a JSONL trace is skipped and counted (the first 3 named with file:line,\n"
        "the count in the report); a truncated last line (a writer killed mid-write) is noted.\n"
        "An empty trace, or one with no readable event, is an input that cannot be read.\n"
        "With --compare, CONTROL and TEST (each a trace or a directory) are compared: per op and\n"
        "kernel name the counts and total times of HTA's TraceDiff (added, deleted, increased,\n"
        "decreased, unchanged) over the lowest rank's first step (--ranks, --steps), the mean\n"
        "step time by part over every step, HTA's temporal breakdown, and the bottlenecks\n"
        "resolved, new and persisting; --fail-on regression[=PCT] gates on the mean step time.\n"
        "Exit status: 0 ok, 1 no input readable, --strict failure (an input unreadable or a bad\n"
        "line; a truncated last line is not one) or --fail-on hit (with --compare: TEST's mean\n"
        "step time over PCT % above CONTROL's, or a bottleneck new in TEST), 2 usage error.",
    .examples =
        "  swift-trace-analyze runs/trace/\n"
        "  swift-trace-analyze --format html -o report.html worker0.pt.trace.json.gz\n"
        "  swift-trace-analyze --format json --fail-on critical traces/ | jq .bottlenecks\n"
        "  swift-trace-analyze --emit-patch run.trace.jsonl | patch -p0\n"
        "  swift-trace-analyze --threshold data_stall=5 --merge merged.json.gz --steps 10-12 "
        "traces/\n"
        "  swift-trace-analyze --compare --fail-on regression=5 before.trace.jsonl "
        "after.trace.jsonl\n"};

static int is_json_trace(const char *s)
{
    return strlen(s) > 5 && !strcmp(s + strlen(s) - 5, ".json") && swift_an_looks_like_trace(s);
}

static char **nargv; /* move_json_traces' argv, freed at exit */
static void free_nargv(void)
{
    free(nargv);
}

/* Traces named *.json first would be read as a config file (lib/core/cli.h): the leading ones
 * move to the end, after a "--". Returns how many moved (they are the last positionals now). */
static int move_json_traces(int *argc, char ***argv)
{
    char **v = *argv;
    int c = *argc, k = 1, dash = 0, n = 0;
    while (k < c && is_json_trace(v[k]))
        k++;
    if (k == 1)
        return 0;
    for (int i = k; i < c; i++)
        dash |= !strcmp(v[i], "--");
    nargv = malloc((size_t)(c + 2) * sizeof(*nargv));
    if (!nargv)
        return 0;
    atexit(free_nargv);
    nargv[n++] = v[0];
    for (int i = k; i < c; i++)
        nargv[n++] = v[i];
    if (!dash)
        nargv[n++] = "--";
    for (int i = 1; i < k; i++)
        nargv[n++] = v[i];
    nargv[n] = NULL;
    *argc = n;
    *argv = nargv;
    return k - 1;
}

int main(int argc, char **argv)
{
    swift_omp_defaults(argv); /* first: may start the program again, once */
    swift_set_progname(argv[0]);
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    int moved = move_json_traces(&argc, &argv);
    int argi, rc = swift_cli_parse(&command, argc, argv, &o, &argi);
    if (rc >= 0)
        return rc;
    if (argi >= argc)
        return swift_usage("no trace given");
    if (o.compare && o.merge)
        return swift_usage("--compare and --merge cannot be combined");
    if (o.compare && argc - argi != 2)
        return swift_usage("--compare takes two traces or directories, CONTROL and TEST");
    if (o.regress_pct >= 0 && !o.compare)
        return swift_usage("--fail-on regression applies to --compare");
    if (o.compare && o.window >= 0)
        return swift_usage("--window applies to --merge");
    if ((o.step_lo >= 0 || o.ranks || o.window >= 0) && !o.merge && !o.compare)
        return swift_usage("--steps, --ranks and --window apply to --merge or --compare");
    struct swift_trace_config tc = {
        .stage = "analyze", .path = o.trace, .argc = argc, .argv = argv};
    if (swift_trace_open(&tc) < 0)
        return 1;
    o.paths = argv + argi;
    o.npaths = argc - argi;
    for (int i = 0; o.compare && i < moved; i++) { /* the traces moved last: first again */
        char *last = argv[argc - 1];
        memmove(argv + argi + 1, argv + argi, (size_t)(argc - argi - 1) * sizeof(*argv));
        argv[argi] = last;
    }
    rc = swift_exit_code(swift_analyze_run(&o));
    swift_trace_close();
    return swift_close_stdout(rc);
}
