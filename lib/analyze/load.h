/*
 * analyze/load — stream trace files into compact per-event records.
 *
 * Reads, in any mix: our JSONL trace files (*.trace.jsonl, lib/core/trace.h), PyTorch profiler
 * (Kineto) Chrome traces in JSON Object or JSON Array format (*.json), either gzip-compressed
 * (*.gz, read with zlib gzread), and directories of them. A file is never loaded whole: a small
 * scanner finds the "traceEvents" array and reads each event with a hand-written,
 * grammar-checking scanner that keeps only the fields used (jansson reads what it does not take:
 * escapes, non-ASCII, metadata events, collectives, any syntax error, so results and errors are
 * jansson's); only a compact record per duration event is kept (ts, dur,
 * interned cat and name, pid/tid, stream, correlation, external id and a few args), so memory
 * grows with the number of events the analysis keeps, not with the file size. The streaming
 * walker is stream.c, the event scanner scan.c, the records load.c.
 *
 *     struct swift_an_set set;
 *     swift_an_set_init(&set);
 *     for (...) swift_an_load_path(&set, path, 0);   // < 0: error reported, file skipped
 *     ... set.src[i].ev[j] ...
 *     swift_an_set_release(&set);
 *
 * Errors name the file, the line and the byte offset in the (uncompressed) stream:
 * "swift-trace-analyze:rank0.json.gz:1234: byte 56789: event without ts".
 */
#ifndef SWIFT_ANALYZE_LOAD_H
#define SWIFT_ANALYZE_LOAD_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* String interning shared by every source of a set, so ids compare across ranks. */
struct swift_an_strtab {
    char **str; /* id -> string (owned) */
    uint32_t n, cap;
    uint32_t *slot; /* open-addressing hash of id+1 (0 = empty) */
    uint32_t nslot;
};
uint32_t swift_an_intern(struct swift_an_strtab *t, const char *s, size_t len);
/* -1 (as uint32_t max) when absent. */
uint32_t swift_an_lookup(const struct swift_an_strtab *t, const char *s);
static inline const char *swift_an_str(const struct swift_an_strtab *t, uint32_t id)
{
    return id < t->n ? t->str[id] : "";
}

/* Arguments of a collective (NCCL) kernel or record_param_comms op (Kineto args). */
struct swift_an_comm {
    uint32_t collective, dtype, in_split, out_split, pg_name, pg_desc, pg_ranks; /* interned */
    int64_t in_nelems, out_nelems, group_size;
    int64_t seq; /* "Seq" / "seq": the collective's number in its process group, -1 if none */
};

enum { SWIFT_AN_NONE = UINT32_MAX };

/* One duration ("X") event. Times are microseconds, as in the file. */
struct swift_an_ev {
    double ts, dur;
    int64_t pid, tid;   /* string ids ("stream 7", "Spans") map to their number or to -1000000-id */
    int64_t corr;       /* args.correlation, -1 if none */
    int64_t ext;        /* args["External id"|"external id"], -1 if none */
    int64_t aux;        /* our traces: args.tokens (steps, prefill and decode spans), args.bytes
                           (comm spans), args.flops (--profile op spans), args.rows (generate
                           spans) or args.program (reward.NAME spans); Kineto: bytes of a
                           memcpy */
    uint32_t name, cat; /* interned */
    int32_t stream;     /* args.stream as HTA reads it, -1 if none or not a number */
    int32_t step;       /* our traces: args.step, else -1 */
    uint32_t comm;      /* index into swift_an_source.comm, or SWIFT_AN_NONE */
    float blocks_per_sm, occupancy; /* Kineto kernel args, -1 if none */
    int16_t dev;                    /* args.device (our GPU events: the CUDA device), -1 if none */
};

enum swift_an_kind { SWIFT_AN_KINETO = 1, SWIFT_AN_SWIFT = 2 };

/*
 * Damage found in a line-oriented (JSONL) trace. A bad line (not JSON, not an object, trailing
 * bytes after the event, or an event whose fields have the wrong type) is skipped and counted,
 * and reading goes on with the next line; the first SWIFT_AN_BAD_SHOWN are named on stderr
 * with file, line and what was wrong. A last line cut short without its newline (a writer
 * killed mid-write) is not a bad line: it is the truncated tail, noted once. Files in the JSON
 * Object/Array format have no lines to skip to: any damage there fails the file.
 */
#define SWIFT_AN_BAD_SHOWN 3
struct swift_an_damage {
    int lines;                          /* the walker reads one event per line */
    long bad;                           /* bad lines skipped */
    long first_bad[SWIFT_AN_BAD_SHOWN]; /* their line numbers (the first ones) */
    long tail_line;                     /* > 0: line of the truncated last line */
};

#define SWIFT_AN_MAX_DEV 16

/* A CPU op with its input shapes, kept while loading for the op roofline (oproof.c): Kineto
 * cpu_op / Operator events with record_shapes' "Input Dims" (dims, types and conc are the
 * "Input Dims", "Input type" and "Concrete Inputs" arrays as JSON text, interned in the
 * source's shape_strs; SWIFT_AN_NONE when absent), and our --profile op spans (cat compute)
 * with a non-empty "shape" arg (dims: that string; types, conc SWIFT_AN_NONE). Times as in
 * the file. */
struct swift_an_shape {
    double ts, dur;
    int64_t tid, ext;           /* INT64_MIN when absent */
    double flops;               /* our spans: args.flops (NAN when absent) */
    uint32_t name;              /* interned in the set's strs */
    uint32_t dims, types, conc; /* interned in the source's shape_strs */
};

/* Our inference spans (cat "infer", docs/trace-schema.md), kept with the args infer.c reads
 * (-1 when absent): the kind, the times as the event's, and args by SWIFT_AN_IA_*. */
enum {
    SWIFT_AN_INF_STEP,    /* engine_step */
    SWIFT_AN_INF_QUEUED,  /* request_queued */
    SWIFT_AN_INF_PREFILL, /* request_prefill */
    SWIFT_AN_INF_DECODE,  /* request_decode */
    SWIFT_AN_INF_REQUEST  /* request (batch mode) */
};
enum {
    SWIFT_AN_IA_STEP,
    SWIFT_AN_IA_SEQS,
    SWIFT_AN_IA_TOKENS,
    SWIFT_AN_IA_PREFILL,
    SWIFT_AN_IA_DECODE,
    SWIFT_AN_IA_BLOCKS,
    SWIFT_AN_IA_WAITING,
    SWIFT_AN_IA_PREEMPT,
    SWIFT_AN_IA_MAX_SEQS,
    SWIFT_AN_IA_MAX_BATCHED,
    SWIFT_AN_IA_NUM_BLOCKS,
    SWIFT_AN_IA_MAX_LEN,
    SWIFT_AN_IA_CHUNKED,
    SWIFT_AN_IA_REQ,
    SWIFT_AN_IA_PROMPT,
    SWIFT_AN_IA_COMPLETION,
    SWIFT_AN_IA_N
};
struct swift_an_inf {
    int kind;
    double ts, dur;
    int64_t a[SWIFT_AN_IA_N];
};

/* Our VL step's forward_backward span (swift-train on a Qwen2-VL model): its start (the
 * trace's clock), the micro-batch's FLOPs (vision + language model, forward + backward), the
 * vision side's part, its images and patches (vl.c). */
struct swift_an_vlf {
    double ts, flops, vision_flops;
    int64_t images, patches;
};

/* One input file: one process (one rank of one stage, or one Kineto trace). */
struct swift_an_source {
    char *path;
    int kind;
    int rank, world_size; /* -1 / 0 when unknown */
    char *host, *stage, *process_name;
    int64_t pid;
    double clock_offset_us; /* swift_meta: this host minus rank 0 */
    json_t *argv;           /* swift_meta.argv (array of strings) or NULL; owned; with a
                             * config file: the words the program parsed (config.argv) */
    json_t *argv_given;     /* with a config file: swift_meta.argv as given; owned */
    json_t *config;         /* swift_meta.config {path, resolved, sha256, argv} or NULL; owned */
    int omp_threads;        /* swift_meta.omp_threads, 0 when unknown */
    char *omp_wait_policy;  /* swift_meta.omp_wait_policy or NULL; owned */
    char *device;           /* swift_meta.device ("cpu", "cuda:0") or NULL; owned */
    json_t *meta;           /* Kineto top-level keys other than traceEvents; owned */
    char *trace_name, *time_unit;
    double base_time_ns;
    int ts_real; /* some ts had a fraction (HTA rounds those traces) */
    struct swift_an_ev *ev;
    size_t n, cap;
    struct swift_an_comm *comm;
    size_t ncomm, capcomm;
    struct swift_an_inf *inf; /* our inference spans (infer.c), in file order */
    size_t ninf, capinf;
    struct swift_an_vlf *vlf; /* our VL forward_backward spans (vl.c), in file order */
    size_t nvlf, capvlf;
    /* memory: [memory] instants (Kineto) or memory counters (ours), per device */
    double mem_peak[SWIFT_AN_MAX_DEV], mem_total[SWIFT_AN_MAX_DEV];
    double mem_peak_ts[SWIFT_AN_MAX_DEV];
    struct swift_an_memdev *memdev; /* memory.c: per device timeline, reserved; owned */
    /* swift-train's counter memory_by_category: the sample with the largest total (params,
     * grads, optimizer, activations, other, total; bytes); memcat_n samples seen */
    double memcat[6];
    long memcat_n;
    double peak_gflops; /* our --profile traces: the counter "peak_gflops" (the peak MFU is
                           computed against: --peak-gflops, the device's, or measured sgemm); 0 */
    uint64_t bytes;     /* uncompressed bytes read */
    long nevents;       /* events seen (every ph) */
    long unknown_cat;   /* our traces: events with a category outside the set */
    struct swift_an_damage damage;

    /* CPU ops with shapes (oproof.c), owned */
    struct swift_an_shape *shape;
    size_t nshape, capshape;
    struct swift_an_strtab shape_strs;
};

struct swift_an_set {
    struct swift_an_strtab strs;
    struct swift_an_source *src;
    size_t n, cap;
    int nfailed;       /* files that could not be read */
    long bad_lines;    /* bad lines skipped over all sources (swift_an_damage) */
    size_t kept;       /* events kept over all sources */
    size_t max_events; /* ceiling on kept events over all files (0: 1<<31) */
};

void swift_an_set_init(struct swift_an_set *set);
void swift_an_set_release(struct swift_an_set *set);

enum { SWIFT_AN_LOAD_RECURSE = 1 };
/* Load one file, or every trace file in a directory (sorted by name). Returns the number of
 * files loaded, or -1 when the path itself is unusable; a damaged file is reported, counted in
 * set->nfailed and left out (its partial events are dropped). */
int swift_an_load_path(struct swift_an_set *set, const char *path, int flags);
/* Load one file from memory (fuzzing, tests); `name` is used in messages and to pick the
 * format (".jsonl" → JSONL). Returns 0 or -1. */
int swift_an_load_buffer(struct swift_an_set *set, const char *name, const void *data, size_t len);
/* 1 if the file's first 64 KiB look like a trace (JSON array, or "traceEvents" / "ph" keys):
 * tells a trace.json from a config file given as the first argument. */
int swift_an_looks_like_trace(const char *path);
/* 1 if the name looks like a trace file (*.json, *.json.gz, *.jsonl, *.jsonl.gz). */
int swift_an_is_trace_name(const char *name);

/*
 * Generic streaming event iterator over one trace file, used by the loader and by --merge to
 * re-read inputs without keeping them: calls fn(ctx, event, byte_offset, line) for every element
 * of traceEvents (or every JSONL line); top-level keys other than traceEvents go to meta_fn
 * (may be NULL; value borrowed). fn returns 0 to go on, < 0 to stop with that error.
 * Returns 0 or -1 after reporting an error with the file and position.
 */
typedef int (*swift_an_event_fn)(void *ctx, json_t *ev, uint64_t off, long line);
typedef void (*swift_an_meta_fn)(void *ctx, const char *key, json_t *value);
int swift_an_stream_file(const char *path, swift_an_event_fn fn, swift_an_meta_fn meta_fn,
                         void *ctx);
int swift_an_stream_buffer(const char *name, const void *data, size_t len, swift_an_event_fn fn,
                           swift_an_meta_fn meta_fn, void *ctx);

/*
 * The fields of one event the loader reads (for tests: the fast event scanner and jansson must
 * agree). Strings point into the parsed buffer (fast scanner, NUL-terminated in place for
 * ph/name/cat/pid/tid) or into the jansson object.
 */
enum {
    SWIFT_AN_FV_NONE,
    SWIFT_AN_FV_INT,
    SWIFT_AN_FV_REAL,
    SWIFT_AN_FV_STR,
    SWIFT_AN_FV_OTHER /* true, false, null, array, object */
};
struct swift_an_fval {
    int t;
    int64_t i;
    double d;
    char *s;
    size_t len;
};
enum {
    AK_STREAM,
    AK_CORR,
    AK_DEVICE,
    AK_EXT,
    AK_EXT_LC,
    AK_STEP,
    AK_TOKENS,
    AK_BYTES,
    AK_BPS,
    AK_OCC,
    AK_ALLOCATED,
    AK_TOTAL,
    AK_DEVTYPE,
    AK_DEVID,
    AK_TOTALLOC,
    AK_COLL,
    AK_FLOPS,
    AK_DIMS,  /* Kineto record_shapes: "Input Dims", "Input type", "Concrete Inputs" (arrays: */
    AK_TYPES, /* the fast scanner's s/len is their JSON text; jansson's fval has none) */
    AK_CONC,
    AK_PEAK,      /* our --profile traces: the counter "peak_gflops" */
    AK_TOTRES,    /* Kineto [memory]: "Total Reserved" */
    AK_MBYTES,    /* Kineto [memory]: "Bytes" (+ allocated, - freed) */
    AK_SHAPE,     /* our --profile op spans: "shape" (a string, docs/trace-schema.md) */
    AK_ROWS,      /* our GRPO spans: "rows" (generate: completions decoded together) */
    AK_PROGRAM,   /* our GRPO spans: "program" (reward.NAME: 1 for a --reward-cmd program) */
    AK_MC_PARAMS, /* our counter "memory_by_category": the five categories' bytes (+ "total") */
    AK_MC_GRADS,
    AK_MC_OPTIM,
    AK_MC_ACTS,
    AK_MC_OTHER,
    AK_SEQS, /* our inference spans (cat infer, lib/infer): engine_step's and the requests' */
    AK_PREFILL_TOK,
    AK_DECODE_TOK,
    AK_BLOCKS_USED,
    AK_WAITING,
    AK_PREEMPT,
    AK_MAX_SEQS,
    AK_MAX_BATCHED,
    AK_NUM_BLOCKS,
    AK_MAX_LEN,
    AK_CHUNKED,
    AK_REQ,
    AK_PROMPT_TOK,
    AK_COMPL_TOK,
    AK_VFLOPS,  /* our VL step's forward_backward spans (vl.c): "vision_flops", */
    AK_IMAGES,  /* "images" and */
    AK_PATCHES, /* "patches" of the micro-batch */
    AK_N
};
struct swift_an_fev {
    struct swift_an_fval ph, name, cat, ts, dur, pid, tid;
    int args; /* 0 absent, 1 an object, 2 something else */
    struct swift_an_fval a[AK_N];
};
/* Read one event's bytes with the fast scanner: 0, or -1 when jansson must read it (syntax it
 * does not take, "M" events, collectives). Writes NULs into buf. */
int swift_an_fev_parse(char *buf, size_t len, struct swift_an_fev *f);
/* The same fields from a parsed object. */
void swift_an_fev_of_json(json_t *e, struct swift_an_fev *f);

#endif
