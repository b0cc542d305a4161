#include "lib/core/trace.h"
#include "lib/core/omp.h"
#include "lib/core/alloc.h"
#include "lib/core/cli.h"
#include "lib/core/error.h"
#include "lib/core/fileio.h"
#include "lib/core/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/core/banned.h"

const char *const swift_trace_categories[] = {
    /* host-side phases */
    "step",
    "data",
    "io",
    "tokenize",
    "compute",
    "comm",
    "optim",
    "ckpt",
    "eval",
    "export",
    "download",
    "pack",
    "stage",
    "profile",
    "memory",
    "dist",
    "infer",
    /* device-side (CUPTI / Kineto) */
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "cuda_runtime",
    "cuda_driver",
    "flow",
    NULL};

int swift_trace_category_known(const char *cat)
{
    for (int i = 0; swift_trace_categories[i]; i++)
        if (!strcmp(cat, swift_trace_categories[i]))
            return 1;
    return 0;
}

#define TBUF_SIZE (64 * 1024)
#define EVENT_MAX 4096 /* one event never exceeds this; longer strings are cut */

struct tbuf {
    struct tbuf *next;
    atomic_size_t committed; /* bytes of whole events in buf */
    atomic_int in_use;       /* owned by a live thread */
    long tid;
    char buf[TBUF_SIZE];
};

static struct {
    atomic_int on;
    int fd;
    int pid;
    char path[4096];
    pthread_mutex_t lock; /* thread registration only */
    struct tbuf *bufs;
    pthread_key_t key;
    int key_made;
    int handlers;
} T = {.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local struct tbuf *my;
static atomic_int detail;

int swift_trace_enabled(void)
{
    return atomic_load_explicit(&T.on, memory_order_relaxed);
}

const char *swift_trace_path(void)
{
    return swift_trace_enabled() ? T.path : NULL;
}

void swift_trace_set_detail(int on)
{
    atomic_store_explicit(&detail, on, memory_order_relaxed);
}

int swift_trace_detail(void)
{
    return swift_trace_enabled() && atomic_load_explicit(&detail, memory_order_relaxed);
}

int64_t swift_trace_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* write(2) all of it; used from signal handlers too (async-signal-safe). */
static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void tbuf_flush(struct tbuf *b)
{
    size_t n = atomic_load_explicit(&b->committed, memory_order_acquire);
    if (n && T.fd >= 0)
        write_all(T.fd, b->buf, n);
    atomic_store_explicit(&b->committed, 0, memory_order_release);
}

static void thread_gone(void *p)
{
    struct tbuf *b = p;
    tbuf_flush(b);
    atomic_store(&b->in_use, 0);
}

static struct tbuf *get_buf(void)
{
    if (my)
        return my;
    pthread_mutex_lock(&T.lock);
    struct tbuf *b;
    for (b = T.bufs; b; b = b->next)
        if (!atomic_load(&b->in_use))
            break;
    if (!b) {
        b = swift_xcalloc(1, sizeof(*b));
        b->next = T.bufs;
        T.bufs = b;
    }
    atomic_store(&b->in_use, 1);
    b->tid = (long)syscall(SYS_gettid);
    pthread_mutex_unlock(&T.lock);
    if (T.key_made)
        pthread_setspecific(T.key, b);
    my = b;
    return b;
}

/* ---------- fast formatting ---------- */

static char *put_str(char *p, const char *s)
{
    while (*s)
        *p++ = *s++;
    return p;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return put_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return put_u64(p, (uint64_t)v);
}

/* ns → microseconds with three decimals ("1700000000123456.789"). */
static char *put_us(char *p, int64_t ns)
{
    if (ns < 0) {
        *p++ = '-';
        ns = -ns;
    }
    p = put_u64(p, (uint64_t)ns / 1000);
    unsigned frac = (unsigned)((uint64_t)ns % 1000);
    *p++ = '.';
    *p++ = (char)('0' + frac / 100);
    *p++ = (char)('0' + frac / 10 % 10);
    *p++ = (char)('0' + frac % 10);
    return p;
}

static char *put_dbl(char *p, double d)
{
    if (d != d || d == 1.0 / 0.0 || d == -1.0 / 0.0)
        return put_str(p, "null"); /* JSON has no NaN/inf */
    int n = snprintf(p, 32, "%.9g", d);
    return p + (n > 0 && n < 32 ? n : 0);
}

/* JSON string with escapes; at most `room` bytes of output. */
static char *put_jstr(char *p, const char *s, size_t room)
{
    static const char hex[] = "0123456789abcdef";
    char *end = p + room - 8;
    *p++ = '"';
    for (; *s && p < end; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') {
            *p++ = (char)c;
        } else {
            *p++ = '\\';
            switch (c) {
            case '"':
                *p++ = '"';
                break;
            case '\\':
                *p++ = '\\';
                break;
            case '\n':
                *p++ = 'n';
                break;
            case '\t':
                *p++ = 't';
                break;
            case '\r':
                *p++ = 'r';
                break;
            default:
                *p++ = 'u';
                *p++ = '0';
                *p++ = '0';
                *p++ = hex[c >> 4];
                *p++ = hex[c & 15];
            }
        }
    }
    *p++ = '"';
    return p;
}

static char *put_args(char *p, char *end, const struct swift_targ *a, int n)
{
    p = put_str(p, ",\"args\":{");
    for (int i = 0; i < n && p < end - 64; i++) {
        if (i)
            *p++ = ',';
        p = put_jstr(p, a[i].key, 64);
        *p++ = ':';
        size_t room = (size_t)(end - p) > 80 ? (size_t)(end - p) - 64 : 16;
        switch (a[i].type) {
        case SWIFT_TARG_INT:
            p = put_i64(p, a[i].v.i);
            break;
        case SWIFT_TARG_DBL:
            p = put_dbl(p, a[i].v.d);
            break;
        case SWIFT_TARG_STR:
            p = put_jstr(p, a[i].v.s ? a[i].v.s : "", room);
            break;
        default: {
            size_t l = a[i].v.s ? strlen(a[i].v.s) : 0;
            if (l && l < room) {
                memcpy(p, a[i].v.s, l);
                p += l;
            } else {
                p = put_str(p, "null");
            }
        }
        }
    }
    *p++ = '}';
    return p;
}

/* Reserve room for one event in the calling thread's buffer. */
static char *begin_event(struct tbuf **bp)
{
    struct tbuf *b = get_buf();
    size_t n = atomic_load_explicit(&b->committed, memory_order_relaxed);
    if (n + EVENT_MAX > TBUF_SIZE) {
        tbuf_flush(b);
        n = 0;
    }
    *bp = b;
    return b->buf + n;
}

static void end_event(struct tbuf *b, char *p)
{
    *p++ = '\n';
    atomic_store_explicit(&b->committed, (size_t)(p - b->buf), memory_order_release);
}

static char *put_head(char *p, const char *ph, const char *cat, const char *name, int64_t tid)
{
    p = put_str(p, "{\"ph\":\"");
    p = put_str(p, ph);
    p = put_str(p, "\",");
    if (cat) {
        p = put_str(p, "\"cat\":");
        p = put_jstr(p, cat, 64);
        *p++ = ',';
    }
    p = put_str(p, "\"name\":");
    p = put_jstr(p, name, 512);
    p = put_str(p, ",\"pid\":");
    p = put_i64(p, T.pid);
    p = put_str(p, ",\"tid\":");
    p = put_i64(p, tid);
    return p;
}

void swift_trace_span_tid(const char *cat, const char *name, int64_t tid, int64_t t0, int64_t t1,
                          const struct swift_targ *args, int nargs)
{
    if (!swift_trace_enabled())
        return;
    struct tbuf *b;
    char *start = begin_event(&b), *p = start;
    p = put_head(p, "X", cat, name, tid);
    p = put_str(p, ",\"ts\":");
    p = put_us(p, t0);
    p = put_str(p, ",\"dur\":");
    p = put_us(p, t1 - t0);
    if (nargs > 0)
        p = put_args(p, start + EVENT_MAX - 2, args, nargs);
    *p++ = '}';
    end_event(b, p);
}

void swift_trace_span(const char *cat, const char *name, int64_t t0, int64_t t1,
                      const struct swift_targ *args, int nargs)
{
    if (!swift_trace_enabled())
        return;
    swift_trace_span_tid(cat, name, get_buf()->tid, t0, t1, args, nargs);
}

void swift_trace_counters(const char *name, const struct swift_targ *series, int n)
{
    if (!swift_trace_enabled())
        return;
    swift_trace_counters_at(name, swift_trace_now(), series, n);
}

void swift_trace_counters_at(const char *name, int64_t ts, const struct swift_targ *series, int n)
{
    if (!swift_trace_enabled())
        return;
    struct tbuf *b;
    char *start = begin_event(&b), *p = start;
    p = put_head(p, "C", NULL, name, b->tid);
    p = put_str(p, ",\"ts\":");
    p = put_us(p, ts);
    p = put_args(p, start + EVENT_MAX - 2, series, n);
    *p++ = '}';
    end_event(b, p);
}

void swift_trace_counter(const char *name, double value)
{
    struct swift_targ a = SWIFT_TARG_D(name, value);
    swift_trace_counters(name, &a, 1);
}

void swift_trace_instant(const char *cat, const char *name, const struct swift_targ *args,
                         int nargs)
{
    if (!swift_trace_enabled())
        return;
    struct tbuf *b;
    char *start = begin_event(&b), *p = start;
    p = put_head(p, "i", cat, name, b->tid);
    p = put_str(p, ",\"s\":\"t\",\"ts\":");
    p = put_us(p, swift_trace_now());
    if (nargs > 0)
        p = put_args(p, start + EVENT_MAX - 2, args, nargs);
    *p++ = '}';
    end_event(b, p);
}

void swift_trace_flow(char ph, const char *cat, const char *name, uint64_t id, int64_t ts)
{
    if (!swift_trace_enabled())
        return;
    swift_trace_flow_tid(ph, cat, name, id, get_buf()->tid, ts);
}

void swift_trace_flow_tid(char ph, const char *cat, const char *name, uint64_t id, int64_t tid,
                          int64_t ts)
{
    if (!swift_trace_enabled())
        return;
    struct tbuf *b;
    char *p = begin_event(&b);
    char phs[2] = {ph, 0};
    p = put_head(p, phs, cat, name, (long)tid);
    p = put_str(p, ",\"id\":");
    p = put_u64(p, id);
    p = put_str(p, ",\"ts\":");
    p = put_us(p, ts);
    if (ph == 'f')
        p = put_str(p, ",\"bp\":\"e\"");
    *p++ = '}';
    end_event(b, p);
}

static void meta_name(const char *what, const char *value, long tid)
{
    struct tbuf *b;
    char *p = begin_event(&b);
    p = put_head(p, "M", NULL, what, tid);
    p = put_str(p, ",\"ts\":0,\"args\":{\"name\":");
    p = put_jstr(p, value, 512);
    p = put_str(p, "}}");
    end_event(b, p);
}

void swift_trace_thread_name(const char *name)
{
    if (!swift_trace_enabled())
        return;
    meta_name("thread_name", name, get_buf()->tid);
}

void swift_trace_track_name(int64_t tid, const char *name)
{
    if (!swift_trace_enabled())
        return;
    meta_name("thread_name", name, (long)tid);
}

int64_t swift_trace_tid(void)
{
    return get_buf()->tid;
}

void swift_trace_flush(void)
{
    if (T.fd < 0)
        return;
    if (my)
        tbuf_flush(my);
    pthread_mutex_lock(&T.lock);
    for (struct tbuf *b = T.bufs; b; b = b->next)
        if (!atomic_load(&b->in_use) || b == my)
            tbuf_flush(b);
    pthread_mutex_unlock(&T.lock);
}

void swift_trace_close(void)
{
    if (T.fd < 0)
        return;
    atomic_store(&T.on, 0);
    /* At close every buffer is written: threads still alive are expected to be idle. */
    pthread_mutex_lock(&T.lock);
    for (struct tbuf *b = T.bufs; b; b = b->next)
        tbuf_flush(b);
    pthread_mutex_unlock(&T.lock);
    fsync(T.fd);
    close(T.fd);
    T.fd = -1;
}

/* ---------- signals ---------- */

static const int fatal_signals[] = {
    SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGINT, SIGTERM, SIGHUP};
static struct sigaction old_actions[8];

static void on_signal(int sig)
{
    /* Best effort and async-signal-safe: write committed bytes of every buffer. */
    int fd = T.fd;
    if (fd >= 0) {
        for (struct tbuf *b = T.bufs; b; b = b->next) {
            size_t n = atomic_load_explicit(&b->committed, memory_order_acquire);
            if (n)
                write_all(fd, b->buf, n);
            atomic_store_explicit(&b->committed, 0, memory_order_release);
        }
    }
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
        if (fatal_signals[i] != sig)
            continue;
        if (old_actions[i].sa_handler != SIG_DFL && old_actions[i].sa_handler != SIG_IGN &&
            !(old_actions[i].sa_flags & SA_SIGINFO)) {
            old_actions[i].sa_handler(sig);
            return;
        }
        sigaction(sig, &old_actions[i], NULL);
        raise(sig);
        return;
    }
}

static void install_handlers(void)
{
    if (T.handlers)
        return;
    T.handlers = 1;
    for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESETHAND;
        sigaction(fatal_signals[i], NULL, &old_actions[i]);
        if (old_actions[i].sa_handler == SIG_IGN)
            continue; /* nohup'ed: keep ignoring */
        sigaction(fatal_signals[i], &sa, NULL);
    }
}

static void at_exit(void)
{
    swift_trace_close();
}

/* ---------- open ---------- */

static int resolve_path(const struct swift_trace_config *cfg, char *out, size_t n)
{
    const char *p = cfg->path;
    const char *env = getenv("SWIFT_TRACE");
    int dir = 0;
    if (!p || !*p) {
        if (!env || !*env)
            return 0;
        p = env;
        dir = 1;
    } else {
        size_t l = strlen(p);
        dir = p[l - 1] == '/' || swift_is_dir(p);
    }
    if (!dir) {
        snprintf(out, n, "%s", p);
        /* its directory may not be there yet (--trace runs/x/t.jsonl before -o makes runs/x) */
        char *slash = strrchr(out, '/');
        if (slash && slash != out) {
            *slash = 0;
            int rc = swift_is_dir(out) ? 0 : swift_mkdirs(out, 0755);
            *slash = '/';
            if (rc < 0)
                return -1;
        }
        return 1;
    }
    if (swift_mkdirs(p, 0755) < 0)
        return -1;
    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = 0;
    char *dot = strchr(host, '.');
    if (dot)
        *dot = 0;
    if (cfg->world_size > 1)
        snprintf(out,
                 n,
                 "%s%s%s-%s-%d-r%d.trace.jsonl",
                 p,
                 p[strlen(p) - 1] == '/' ? "" : "/",
                 cfg->stage,
                 host,
                 (int)getpid(),
                 cfg->rank);
    else
        snprintf(out,
                 n,
                 "%s%s%s-%s-%d.trace.jsonl",
                 p,
                 p[strlen(p) - 1] == '/' ? "" : "/",
                 cfg->stage,
                 host,
                 (int)getpid());
    return 1;
}

/* swift_meta.config when the run read a config file: {"path" as given, "resolved" (its real
 * path), "sha256" of its bytes now, "argv" the words the program parsed (its keys as options in
 * front of the given ones)}, so the analyzer reads the options the run had and --emit-patch
 * patches only the same file. Stops writing argv words before `end`. */
static char *put_config(char *p, char *end)
{
    char *const *xargv;
    const char *given = swift_cli_config_used(&xargv);
    if (!given || !xargv)
        return p;
    char resolved[PATH_MAX], hex[65] = "";
    if (!realpath(given, resolved))
        snprintf(resolved, sizeof(resolved), "%s", given);
    if (swift_sha256_file(given, hex) < 0)
        hex[0] = 0;
    p = put_str(p, ",\"config\":{\"path\":");
    p = put_jstr(p, given, 512);
    p = put_str(p, ",\"resolved\":");
    p = put_jstr(p, resolved, 512);
    p = put_str(p, ",\"sha256\":");
    p = put_jstr(p, hex, 80);
    p = put_str(p, ",\"argv\":[");
    for (int i = 0; xargv[i] && p < end - 300; i++) {
        if (i)
            *p++ = ',';
        p = put_jstr(p, xargv[i], 256);
    }
    return put_str(p, "]}");
}

int swift_trace_open(const struct swift_trace_config *cfg)
{
    swift_trace_attach_devices();
    if (T.fd >= 0)
        swift_trace_close();
    int r = resolve_path(cfg, T.path, sizeof(T.path));
    if (r <= 0)
        return r;
    T.fd = open(T.path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (T.fd < 0)
        return swift_error_errno("cannot open trace file '%s'", T.path);
    T.pid = (int)getpid();
    if (!T.key_made) {
        pthread_key_create(&T.key, thread_gone);
        T.key_made = 1;
        atexit(at_exit);
    }
    install_handlers();
    atomic_store(&T.on, 1);

    char host[256] = "localhost";
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = 0;
    char pname[512];
    if (cfg->world_size > 1)
        snprintf(pname, sizeof(pname), "swift-%s rank %d @ %s", cfg->stage, cfg->rank, host);
    else
        snprintf(pname, sizeof(pname), "swift-%s @ %s", cfg->stage, host);
    meta_name("process_name", pname, get_buf()->tid);
    meta_name("thread_name", "main", get_buf()->tid);

    /* swift_meta: who wrote this file and how to align its clock. */
    struct tbuf *b;
    char *start = begin_event(&b), *p = start, *end = start + EVENT_MAX - 16;
    p = put_head(p, "M", NULL, "swift_meta", b->tid);
    p = put_str(p, ",\"ts\":0,\"args\":{\"schema_version\":1,\"stage\":");
    p = put_jstr(p, cfg->stage, 64);
    p = put_str(p, ",\"version\":\"" SWIFT_VERSION "\",\"host\":");
    p = put_jstr(p, host, 256);
    p = put_str(p, ",\"pid\":");
    p = put_i64(p, T.pid);
    p = put_str(p, ",\"rank\":");
    p = put_i64(p, cfg->rank);
    p = put_str(p, ",\"world_size\":");
    p = put_i64(p, cfg->world_size > 0 ? cfg->world_size : 1);
    p = put_str(p, ",\"device\":");
    p = put_jstr(p, cfg->device ? cfg->device : "cpu", 64);
    p = put_str(p, ",\"clock\":\"CLOCK_REALTIME\",\"clock_offset_us\":");
    p = put_dbl(p, cfg->clock_offset_us);
    p = put_str(p, ",\"start_ts\":");
    p = put_us(p, swift_trace_now());
    p = put_str(p, ",\"omp_threads\":");
    p = put_i64(p, omp_get_max_threads());
    p = put_str(p, ",\"omp_wait_policy\":");
    p = put_jstr(p, swift_omp_wait_policy(), 64);
    p = put_config(p, end - 1500);
    p = put_str(p, ",\"argv\":[");
    for (int i = 0; i < cfg->argc && cfg->argv && p < end - 300; i++) {
        if (i)
            *p++ = ',';
        size_t room = (size_t)(end - p) - 280;
        p = put_jstr(p, cfg->argv[i], room < 1024 ? room : 1024);
    }
    p = put_str(p, "]}}");
    end_event(b, p);
    return 0;
}
