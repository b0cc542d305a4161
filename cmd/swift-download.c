/* swift-download — fetch a model or dataset from a hub, a mirror, a directory or an archive. */
#include "lib/core/cli.h"
#include "lib/download/download.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/download/hub.h"
#include "lib/core/trace.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "lib/core/banned.h"

enum {
    OPT_DATASET = SWIFT_OPT_BASE,
    OPT_HUB,
    OPT_USE_HF,
    OPT_ENDPOINT,
    OPT_REVISION,
    OPT_TOKEN,
    OPT_INCLUDE,
    OPT_EXCLUDE,
    OPT_ALL,
    OPT_RETRIES,
    OPT_RETRY_DELAY,
    OPT_TIMEOUT,
    OPT_MAX_EXTRACT,
    OPT_FORCE
};

static const struct swift_option options[] = {
    {"output",
     'o',
     SWIFT_ARG_REQUIRED,
     "DIR",
     "write the files to DIR (default: the hub's cache)",
     "local_dir"},
    {"dataset", OPT_DATASET, SWIFT_ARG_NONE, NULL, "the id names a dataset, not a model", NULL},
    {"hub",
     OPT_HUB,
     SWIFT_ARG_REQUIRED,
     "hf|modelscope",
     "hub to use (default modelscope, or hf when USE_HF=1)",
     NULL},
    {"use-hf", OPT_USE_HF, SWIFT_ARG_NONE, NULL, "same as --hub hf (ms-swift's --use_hf)", NULL},
    {"endpoint",
     OPT_ENDPOINT,
     SWIFT_ARG_REQUIRED,
     "URL",
     "hub or mirror URL (default HF_ENDPOINT / MODELSCOPE_DOMAIN, else the public hub)",
     NULL},
    {"revision",
     OPT_REVISION,
     SWIFT_ARG_REQUIRED,
     "REV",
     "branch, tag or commit (default main on hf, master on modelscope)",
     "model_revision"},
    {"token",
     OPT_TOKEN,
     SWIFT_ARG_REQUIRED,
     "TOKEN",
     "access token (default HF_TOKEN / MODELSCOPE_API_TOKEN)",
     "hub_token"},
    {"include",
     OPT_INCLUDE,
     SWIFT_ARG_REQUIRED,
     "GLOB",
     "only files matching GLOB (fnmatch; repeatable)",
     "allow_patterns"},
    {"exclude",
     OPT_EXCLUDE,
     SWIFT_ARG_REQUIRED,
     "GLOB",
     "skip files matching GLOB (repeatable; replaces ms-swift's default ignore patterns)",
     "ignore_patterns"},
    {"all-files",
     OPT_ALL,
     SWIFT_ARG_NONE,
     NULL,
     "do not apply ms-swift's default ignore patterns (*.pt, *.pth, *.gguf, onnx/*, ...)",
     NULL},
    {"jobs", 'j', SWIFT_ARG_REQUIRED, "N", "download N files in parallel (default 8)", NULL},
    {"retries",
     OPT_RETRIES,
     SWIFT_ARG_REQUIRED,
     "N",
     "retry a file N times on 5xx, timeouts, dropped connections (default 5)",
     NULL},
    {"retry-delay",
     OPT_RETRY_DELAY,
     SWIFT_ARG_REQUIRED,
     "SECONDS",
     "first backoff, doubled each retry; Retry-After wins (default 1)",
     NULL},
    {"timeout",
     OPT_TIMEOUT,
     SWIFT_ARG_REQUIRED,
     "SECONDS",
     "retry a transfer that receives nothing for SECONDS (default 60)",
     NULL},
    {"max-extract",
     OPT_MAX_EXTRACT,
     SWIFT_ARG_REQUIRED,
     "SIZE",
     "refuse archives that unpack to more than SIZE (default 200G)",
     NULL},
    {"force",
     OPT_FORCE,
     SWIFT_ARG_NONE,
     NULL,
     "replace a non-empty DIR when unpacking an archive",
     NULL},
    {"progress",
     SWIFT_OPT_PROGRESS,
     SWIFT_ARG_NONE,
     NULL,
     "show the progress line even when stderr is not a terminal",
     NULL},
    {"quiet", 'q', SWIFT_ARG_NONE, NULL, "no informational messages", NULL},
    SWIFT_TRACE_OPTIONS,
    {0}};

static const struct swift_command command = {
    "swift-download",
    "[OPTION]... SOURCE",
    "download models and datasets from Hugging Face, ModelScope, mirrors and archives",
    options,
    "SOURCE is a repository id (org/name), a local directory, file://PATH, or an http(s) URL;\n"
    "URLs and files ending in .tar, .tar.gz, .tgz, .tar.xz, .tar.zst or .zip are unpacked.\n"
    "Files appear under their final name only once complete and verified (SHA-256 against the\n"
    "hub); interrupted downloads resume from their .incomplete file. One JSON line per file on\n"
    "stdout; manifest.json in DIR lists file, size, sha256, source and revision.\n"
    "Exit status: 0 all files ready, 1 a file or the listing failed, 2 usage error.",
    "  swift-download Qwen/Qwen2.5-0.5B-Instruct -o models/qwen\n"
    "  swift-download --hub hf --include '*.json' --include '*.safetensors' "
    "HuggingFaceTB/SmolLM2-135M\n"
    "  HF_ENDPOINT=https://hf-mirror.com swift-download --use-hf gpt2 -o gpt2 -j 16\n"
    "  swift-download --dataset --hub hf HuggingFaceH4/no_robots -o data/no_robots\n"
    "  swift-download https://example.org/model.tar.gz -o models/m\n"};

struct opts {
    struct swift_download_opts d;
    const char *trace;
    const char *inc[64], *exc[64];
    int quiet;
};

static int on_option(void *ctx, int key, const char *arg)
{
    struct opts *o = ctx;
    long v;
    double x;
    switch (key) {
    case 'o':
        o->d.output = arg;
        break;
    case OPT_DATASET:
        o->d.dataset = 1;
        break;
    case OPT_HUB:
        if (!strcmp(arg, "hf") || !strcmp(arg, "huggingface"))
            o->d.hub = SWIFT_HUB_HF;
        else if (!strcmp(arg, "modelscope") || !strcmp(arg, "ms"))
            o->d.hub = SWIFT_HUB_MODELSCOPE;
        else
            return swift_usage("--hub: expected hf or modelscope, got '%s'", arg);
        break;
    case OPT_USE_HF:
        o->d.hub = SWIFT_HUB_HF;
        break;
    case OPT_ENDPOINT:
        o->d.endpoint = arg;
        break;
    case OPT_REVISION:
        o->d.revision = arg;
        break;
    case OPT_TOKEN:
        o->d.token = arg;
        break;
    case OPT_INCLUDE:
    case OPT_EXCLUDE: {
        int *n = key == OPT_INCLUDE ? &o->d.ninclude : &o->d.nexclude;
        if (*n >= 64)
            return swift_usage("at most 64 --include and 64 --exclude patterns");
        (key == OPT_INCLUDE ? o->inc : o->exc)[(*n)++] = arg;
        break;
    }
    case OPT_ALL:
        o->d.all_files = 1;
        break;
    case 'j':
        if (swift_parse_long(arg, 1, 256, &v) < 0)
            return swift_usage("--jobs: expected 1..256, got '%s'", arg);
        o->d.jobs = (int)v;
        break;
    case OPT_RETRIES:
        if (swift_parse_long(arg, 0, 100, &v) < 0)
            return swift_usage("--retries: expected 0..100, got '%s'", arg);
        o->d.retries = (int)v;
        break;
    case OPT_RETRY_DELAY:
        if (swift_parse_double(arg, &x) < 0 || x < 0 || x > 3600)
            return swift_usage("--retry-delay: expected seconds, got '%s'", arg);
        o->d.retry_delay = x > 0 ? x : 1e-3;
        break;
    case OPT_TIMEOUT:
        if (swift_parse_long(arg, 1, 86400, &v) < 0)
            return swift_usage("--timeout: expected seconds, got '%s'", arg);
        o->d.timeout = v;
        break;
    case OPT_MAX_EXTRACT:
        if (swift_parse_size(arg, &o->d.max_extract) < 0 || !o->d.max_extract)
            return swift_usage("--max-extract: expected a size like 10G, got '%s'", arg);
        break;
    case OPT_FORCE:
        o->d.force = 1;
        break;
    case SWIFT_OPT_PROGRESS:
        o->d.progress = 1;
        break;
    case 'q':
        o->quiet = 1;
        break;
    case SWIFT_OPT_TRACE:
        o->trace = arg;
        break;
    case SWIFT_OPT_PROFILE:
        break; /* no steps to profile here */
    }
    return 0;
}

int main(int argc, char **argv)
{
    swift_set_progname(argv[0]);
    /* a file-size limit (ulimit -f) becomes a write error, reported like a full disk */
    signal(SIGXFSZ, SIG_IGN);
    struct opts o = {.d = {.jobs = 8, .retries = 5, .retry_delay = 1, .timeout = 60}};
    const char *use_hf = getenv("USE_HF");
    o.d.hub = use_hf && (!strcmp(use_hf, "1") || !strcasecmp(use_hf, "true"))
                  ? SWIFT_HUB_HF
                  : SWIFT_HUB_MODELSCOPE;
    o.d.include = o.inc;
    o.d.exclude = o.exc;
    int argi, rc = swift_cli_parse(&command, argc, argv, on_option, &o, &argi);
    if (rc >= 0)
        return swift_close_stdout(rc);
    if (argc - argi != 1)
        return swift_usage(argc - argi ? "expected one SOURCE" : "missing SOURCE");
    o.d.source = argv[argi];
    int kind = swift_download_source_kind(o.d.source);
    if (kind < 0)
        return swift_usage("'%s' is not a repository id (org/name), a path or a URL", o.d.source);
    if (kind != SWIFT_SOURCE_HUB && !o.d.output)
        return swift_usage("a path or URL source needs -o DIR");
    swift_set_quiet(o.quiet);
    struct swift_trace_config tc = {
        .stage = "download", .path = o.trace, .argc = argc, .argv = argv};
    if (swift_trace_open(&tc) < 0)
        return SWIFT_EXIT_FAIL;
    rc = swift_download_run(&o.d) < 0 ? SWIFT_EXIT_FAIL : SWIFT_EXIT_OK;
    swift_trace_close();
    return swift_close_stdout(rc);
}
