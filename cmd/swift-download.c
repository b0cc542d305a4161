/* swift-download — fetch a model or dataset from a hub, a mirror, a directory or an archive. */
#include "lib/core/cli.h"
#include "lib/download/download.h"
#include "lib/core/error.h"
#include "lib/core/omp.h"
#include "lib/core/fileio.h"
#include "lib/download/hub.h"
#include "lib/core/trace.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

struct cli {
    struct swift_download_opts d;
    const char *trace;
    const char *inc[64], *exc[64];
};
#define F(m) SWIFT_FIELD(struct cli, m)

/* --include, --exclude (repeatable; .value 1 for --exclude) */
static int pattern(const struct swift_option *opt, void *opts, const char *arg)
{
    struct cli *c = opts;
    int *n = opt->value ? &c->d.nexclude : &c->d.ninclude;
    if (*n >= 64)
        return swift_usage("at most 64 --include and 64 --exclude patterns");
    (opt->value ? c->exc : c->inc)[(*n)++] = arg;
    return 0;
}

static const struct swift_option options[] = {
    SWIFT_OPT_PATH('o', "output", F(d.output), "DIR",
                   "write the files to DIR (default: the hub's cache)", .aliases = "local_dir"),
    SWIFT_OPT_FLAG(0, "dataset", F(d.dataset), "the id names a dataset, not a model"),
    SWIFT_OPT_ENUM(0, "hub", F(d.hub),
                   SWIFT_CHOICES({"hf", SWIFT_HUB_HF}, {"huggingface", SWIFT_HUB_HF},
                                 {"modelscope", SWIFT_HUB_MODELSCOPE},
                                 {"ms", SWIFT_HUB_MODELSCOPE}),
                   "hf|modelscope", "hub to use (default modelscope, or hf when USE_HF=1)",
                   .error = "--hub: expected hf or modelscope, got '{arg}'"),
    SWIFT_OPT_SET(0, "use-hf", F(d.hub), SWIFT_HUB_HF, "same as --hub hf (ms-swift's --use_hf)"),
    SWIFT_OPT_STRING(
        0, "endpoint", F(d.endpoint), "URL",
        "hub or mirror URL (default HF_ENDPOINT / MODELSCOPE_DOMAIN, else the public hub)"),
    SWIFT_OPT_STRING(0, "revision", F(d.revision), "REV",
                     "branch, tag or commit (default main on hf, master on modelscope)",
                     .aliases = "model_revision"),
    SWIFT_OPT_STRING(0, "token", F(d.token), "TOKEN",
                     "access token (default HF_TOKEN / MODELSCOPE_API_TOKEN)",
                     .aliases = "hub_token"),
    SWIFT_OPT_CALLBACK(0, "include", pattern, "GLOB",
                       "only files matching GLOB (fnmatch; repeatable)",
                       .aliases = "allow_patterns"),
    SWIFT_OPT_CALLBACK(
        0, "exclude", pattern, "GLOB",
        "skip files matching GLOB (repeatable; replaces ms-swift's default ignore patterns)",
        .value = 1, .aliases = "ignore_patterns"),
    SWIFT_OPT_FLAG(
        0, "all-files", F(d.all_files),
        "do not apply ms-swift's default ignore patterns (*.pt, *.pth, *.gguf, onnx/*, ...)"),
    SWIFT_OPT_INT('j', "jobs", F(d.jobs), 1, 256, "N", "download N files in parallel (default 8)",
                  .error = "--jobs: expected 1..256, got '{arg}'"),
    SWIFT_OPT_INT(0, "retries", F(d.retries), 0, 100, "N",
                  "retry a file N times on 5xx, timeouts, dropped connections (default 5)",
                  .error = "--retries: expected 0..100, got '{arg}'"),
    SWIFT_OPT_DOUBLE(0, "retry-delay", F(d.retry_delay), 0, 3600, "SECONDS",
                     "first backoff, doubled each retry; Retry-After wins (default 1)",
                     .error = "--retry-delay: expected seconds, got '{arg}'"),
    SWIFT_OPT_INT(0, "timeout", F(d.timeout), 1, 86400, "SECONDS",
                  "retry a transfer that receives nothing for SECONDS (default 60)",
                  .error = "--timeout: expected seconds, got '{arg}'"),
    SWIFT_OPT_SIZE(0, "max-extract", F(d.max_extract), 1, "SIZE",
                   "refuse archives that unpack to more than SIZE (default 200G)",
                   .error = "--max-extract: expected a size like 10G, got '{arg}'"),
    SWIFT_OPT_FLAG(0, "force", F(d.force), "replace a non-empty DIR when unpacking an archive"),
    SWIFT_OPT_PROGRESS(F(d.progress)),
    SWIFT_OPT_QUIET,
    SWIFT_TRACE_OPTIONS(F(trace)),
    SWIFT_OPT_END};

static const struct swift_command command = {
    .name = "swift-download",
    .usage = "[OPTION]... SOURCE",
    .summary = "download models and datasets from Hugging Face, ModelScope, mirrors and archives",
    .options = options,
    .description =
        "SOURCE is a repository id (org/name), a local directory, file://PATH, or an http(s) URL;\n"
        "URLs and files ending in .tar, .tar.gz, .tgz, .tar.xz, .tar.zst or .zip are unpacked.\n"
        "Files appear under their final name only once complete and verified (SHA-256 against the\n"
        "hub); interrupted downloads resume from their .incomplete file. One JSON line per file "
        "on\n"
        "stdout; manifest.json in DIR lists file, size, sha256, source and revision.\n"
        "Exit status: 0 all files ready, 1 a file or the listing failed, 2 usage error.",
    .examples = "  swift-download Qwen/Qwen2.5-0.5B-Instruct -o models/qwen\n"
                "  swift-download --hub hf --include '*.json' --include '*.safetensors' "
                "HuggingFaceTB/SmolLM2-135M\n"
                "  HF_ENDPOINT=https://hf-mirror.com swift-download --use-hf gpt2 -o gpt2 -j 16\n"
                "  swift-download --dataset --hub hf HuggingFaceH4/no_robots -o data/no_robots\n"
                "  swift-download https://example.org/model.tar.gz -o models/m\n"};

int main(int argc, char **argv)
{
    swift_omp_defaults(argv); /* first: may start the program again, once */
    swift_set_progname(argv[0]);
    /* a file-size limit (ulimit -f) becomes a write error, reported like a full disk */
    signal(SIGXFSZ, SIG_IGN);
    struct cli c = {.d = {.jobs = 8, .retries = 5, .retry_delay = 1, .timeout = 60}};
    const char *use_hf = getenv("USE_HF");
    c.d.hub = use_hf && (!strcmp(use_hf, "1") || !strcasecmp(use_hf, "true"))
                  ? SWIFT_HUB_HF
                  : SWIFT_HUB_MODELSCOPE;
    c.d.include = c.inc;
    c.d.exclude = c.exc;
    int argi, rc = swift_cli_parse(&command, argc, argv, &c, &argi);
    if (rc >= 0)
        return swift_close_stdout(rc);
    if (argc - argi != 1)
        return swift_usage(argc - argi ? "expected one SOURCE" : "missing SOURCE");
    if (c.d.retry_delay == 0)
        c.d.retry_delay = 1e-3; /* --retry-delay 0: retry at once, yet keep doubling */
    c.d.source = argv[argi];
    int kind = swift_download_source_kind(c.d.source);
    if (kind < 0)
        return swift_usage("'%s' is not a repository id (org/name), a path or a URL", c.d.source);
    if (kind != SWIFT_SOURCE_HUB && !c.d.output)
        return swift_usage("a path or URL source needs -o DIR");
    struct swift_trace_config tc = {
        .stage = "download", .path = c.trace, .argc = argc, .argv = argv};
    if (swift_trace_open(&tc) < 0)
        return SWIFT_EXIT_FAIL;
    rc = swift_exit_code(swift_download_run(&c.d));
    swift_trace_close();
    return swift_close_stdout(rc);
}
