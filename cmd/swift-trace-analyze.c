/* swift-trace-analyze — merge traces from every stage and rank, and report the bottlenecks. */
#include "lib/analyze/analyze.h"
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/trace.h"

#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

enum {
    OPT_FORMAT = SWIFT_OPT_BASE,
    OPT_FAIL_ON,
    OPT_STRICT,
    OPT_THRESHOLD,
    OPT_TOP,
    OPT_MERGE,
    OPT_STEPS,
    OPT_RANKS,
    OPT_WINDOW,
    OPT_MERGE_WARN,
    OPT_NO_ROUND
};

static const struct swift_option options[] = {
    {"format", 'f', SWIFT_ARG_REQUIRED, "text|md|json|html", "report format (default text)", NULL},
    {"output",
     'o',
     SWIFT_ARG_REQUIRED,
     "FILE",
     "write the report to FILE (atomically) instead of stdout",
     NULL},
    {"fail-on",
     OPT_FAIL_ON,
     SWIFT_ARG_REQUIRED,
     "warn|critical",
     "exit 1 when a bottleneck of that severity or worse is found (CI gates)",
     NULL},
    {"threshold",
     OPT_THRESHOLD,
     SWIFT_ARG_REQUIRED,
     "RULE=VALUE",
     "set a rule's threshold, e.g. data_stall=15 (repeatable; see docs/bottlenecks.md)",
     NULL},
    {"strict",
     OPT_STRICT,
     SWIFT_ARG_NONE,
     NULL,
     "fail when any input cannot be read (default: report it, analyse the rest)",
     NULL},
    {"top",
     OPT_TOP,
     SWIFT_ARG_REQUIRED,
     "N",
     "rows in kernel tables and worst-span lists (default 5)",
     NULL},
    {"merge",
     OPT_MERGE,
     SWIFT_ARG_REQUIRED,
     "OUT.json[.gz]",
     "also write one Perfetto-loadable trace of every input (pids remapped per rank)",
     NULL},
    {"steps", OPT_STEPS, SWIFT_ARG_REQUIRED, "A-B", "--merge: keep only steps A to B", NULL},
    {"ranks",
     OPT_RANKS,
     SWIFT_ARG_REQUIRED,
     "LIST",
     "--merge: keep only these ranks (0,2,4-7)",
     NULL},
    {"window",
     OPT_WINDOW,
     SWIFT_ARG_REQUIRED,
     "N",
     "--merge: keep N steps around each rank's worst step",
     NULL},
    {"merge-warn-size",
     OPT_MERGE_WARN,
     SWIFT_ARG_REQUIRED,
     "SIZE",
     "warn when the merged trace exceeds SIZE (default 256M)",
     NULL},
    {"no-ns-rounding",
     OPT_NO_ROUND,
     SWIFT_ARG_NONE,
     NULL,
     "do not round ns-resolution timestamps as HTA does (HTA's disable_ns_rounding)",
     NULL},
    {"quiet", 'q', SWIFT_ARG_NONE, NULL, "no informational messages", NULL},
    SWIFT_TRACE_OPTIONS,
    {0}};

static const struct swift_command command = {
    "swift-trace-analyze",
    "[OPTION]... TRACE|DIR...",
    "report where step time goes and what to change, from swift-tools and PyTorch profiler traces",
    options,
    "TRACE is one of our *.trace.jsonl files, a PyTorch profiler (Kineto) *.json or *.json.gz\n"
    "trace, or a directory of them; any mix, any number. Files are streamed, never loaded whole.\n"
    "The report gives per process and rank the step-time breakdown (TensorBoard plugin roles for\n"
    "Kineto traces; data_wait/forward/backward/grad_sync/optimizer for ours), GPU utilization,\n"
    "HTA's temporal, idle, kernel and overlap analyses, and the bottlenecks of "
    "docs/bottlenecks.md\n"
    "with evidence and the remedy (the exact new command line when the trace recorded it).\n"
    "A damaged input is reported with its file and byte offset and the others are analysed.\n"
    "Exit status: 0 ok, 1 no input readable, --strict failure or --fail-on hit, 2 usage error.",
    "  swift-trace-analyze runs/trace/\n"
    "  swift-trace-analyze --format html -o report.html worker0.pt.trace.json.gz\n"
    "  swift-trace-analyze --format json --fail-on critical traces/ | jq .bottlenecks\n"
    "  swift-trace-analyze --threshold data_stall=5 --merge merged.json.gz --steps 10-12 "
    "traces/\n"};

static int on_option(void *ctx, int key, const char *arg)
{
    struct swift_analyze_opts *o = ctx;
    long v;
    unsigned long long sz;
    switch (key) {
    case 'f':
        if (!strcmp(arg, "text"))
            o->format = SWIFT_FMT_TEXT;
        else if (!strcmp(arg, "md") || !strcmp(arg, "markdown"))
            o->format = SWIFT_FMT_MD;
        else if (!strcmp(arg, "json"))
            o->format = SWIFT_FMT_JSON;
        else if (!strcmp(arg, "html"))
            o->format = SWIFT_FMT_HTML;
        else
            return swift_usage("--format: expected text, md, json or html, got '%s'", arg);
        break;
    case 'o':
        o->output = arg;
        break;
    case OPT_FAIL_ON:
        if (!strcmp(arg, "warn"))
            o->fail_on = SWIFT_SEV_WARN;
        else if (!strcmp(arg, "critical"))
            o->fail_on = SWIFT_SEV_CRITICAL;
        else
            return swift_usage("--fail-on: expected warn or critical, got '%s'", arg);
        break;
    case OPT_THRESHOLD:
        if (swift_an_threshold_set(&o->th, arg) < 0)
            return swift_usage(
                "--threshold: expected RULE=NUMBER with a rule of docs/bottlenecks.md, got '%s'",
                arg);
        break;
    case OPT_STRICT:
        o->strict = 1;
        break;
    case OPT_TOP:
        if (swift_parse_long(arg, 1, 1000, &v) < 0)
            return swift_usage("--top: expected 1..1000, got '%s'", arg);
        o->top = (int)v;
        break;
    case OPT_MERGE:
        o->merge = arg;
        break;
    case OPT_STEPS: {
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
        break;
    }
    case OPT_RANKS:
        for (const char *p = arg; *p; p++)
            if (!strchr("0123456789,-", *p))
                return swift_usage("--ranks: expected a list like 0,2,4-7, got '%s'", arg);
        o->ranks = arg;
        break;
    case OPT_WINDOW:
        if (swift_parse_long(arg, 0, 1000000, &v) < 0)
            return swift_usage("--window: expected a number of steps, got '%s'", arg);
        o->window = (int)v;
        break;
    case OPT_MERGE_WARN:
        if (swift_parse_size(arg, &sz) < 0)
            return swift_usage("--merge-warn-size: expected a size, got '%s'", arg);
        o->merge_warn_bytes = sz;
        break;
    case OPT_NO_ROUND:
        o->kopts.hta_rounding = 0;
        break;
    case 'q':
        swift_set_quiet(1);
        break;
    case SWIFT_OPT_TRACE:
        o->trace = arg;
        break;
    case SWIFT_OPT_PROFILE:
        break;
    }
    return 0;
}

int main(int argc, char **argv)
{
    swift_set_progname(argv[0]);
    struct swift_analyze_opts o;
    swift_analyze_opts_default(&o);
    /* a trace named *.json first would be read as a config file (lib/core/cli.h): move it last */
    if (argc > 2 && strlen(argv[1]) > 5 && !strcmp(argv[1] + strlen(argv[1]) - 5, ".json") &&
        swift_an_looks_like_trace(argv[1])) {
        char *first = argv[1];
        memmove(argv + 1, argv + 2, (size_t)(argc - 2) * sizeof(*argv));
        argv[argc - 1] = first;
    } else if (argc == 2 && strlen(argv[1]) > 5 &&
               !strcmp(argv[1] + strlen(argv[1]) - 5, ".json") &&
               swift_an_looks_like_trace(argv[1])) {
        static char *nargv[4];
        nargv[0] = argv[0], nargv[1] = "--", nargv[2] = argv[1];
        argv = nargv;
        argc = 3;
    }
    int argi, rc = swift_cli_parse(&command, argc, argv, on_option, &o, &argi);
    if (rc >= 0)
        return rc;
    if (argi >= argc)
        return swift_usage("no trace given");
    if ((o.step_lo >= 0 || o.ranks || o.window >= 0) && !o.merge)
        return swift_usage("--steps, --ranks and --window apply to --merge");
    struct swift_trace_config tc = {
        .stage = "analyze", .path = o.trace, .argc = argc, .argv = argv};
    if (swift_trace_open(&tc) < 0)
        return 1;
    o.paths = argv + argi;
    o.npaths = argc - argi;
    rc = swift_analyze_run(&o);
    swift_trace_close();
    return swift_close_stdout(rc);
}
