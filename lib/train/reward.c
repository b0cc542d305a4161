/* The reward set of lib/train/reward.h: built-in rewards and external reward programs. */
#include "lib/train/reward.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "lib/core/error.h"
#include "lib/core/trace.h"

#include "lib/core/banned.h"

enum kind { R_ACCURACY, R_FORMAT, R_LENGTH, R_CMD };

struct prog {
    char *command;
    pid_t pid; /* 0: not running (never started, or stopped after an error) */
    int in, out;
    int failed;
    char *buf; /* reply bytes read and not yet consumed */
    size_t len, cap;
};

struct func {
    enum kind kind;
    char name[16];
    double w;
    struct prog prog;
};

struct swift_reward_set {
    char *answer_column;
    pcre2_code *re;
    pcre2_match_data *md;
    long max_len, cache_len;
    double timeout_s;
    int n, ncmd;
    struct func f[SWIFT_REWARD_MAX];
};

/* ---------------------------------------------------------------- answers */

static void copy_trimmed(const char *s, size_t len, char *out, size_t cap)
{
    while (len && isspace((unsigned char)*s)) {
        s++;
        len--;
    }
    while (len && isspace((unsigned char)s[len - 1]))
        len--;
    if (len > cap - 1)
        len = cap - 1;
    memcpy(out, s, len);
    out[len] = 0;
}

/* The content of the last \boxed{...} (braces nested); 1 if found. */
static int last_boxed(const char *text, char *out, size_t cap)
{
    const char *found = NULL, *p = text;
    size_t flen = 0;
    while ((p = strstr(p, "\\boxed{")) != NULL) {
        const char *b = p + 7;
        int depth = 1;
        const char *q = b;
        for (; *q && depth; q++)
            depth += *q == '{' ? 1 : *q == '}' ? -1 : 0;
        if (depth == 0) {
            found = b;
            flen = (size_t)(q - 1 - b);
        }
        p = b;
    }
    if (!found)
        return 0;
    copy_trimmed(found, flen, out, cap);
    return 1;
}

/* The end of a number starting at s (digits with commas between digit groups, a fraction part,
 * then "/digits"), or s when none starts there. */
static const char *scan_number(const char *s)
{
    const char *p = s;
    if (*p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return s;
    while (isdigit((unsigned char)*p) || (*p == ',' && isdigit((unsigned char)p[1])))
        p++;
    if (*p == '.' && isdigit((unsigned char)p[1]))
        for (p++; isdigit((unsigned char)*p);)
            p++;
    if (*p == '/' && isdigit((unsigned char)p[1]))
        for (p++; isdigit((unsigned char)*p);)
            p++;
    return p;
}

static int last_number(const char *text, char *out, size_t cap)
{
    const char *best = NULL, *bend = NULL;
    for (const char *p = text; *p;) {
        /* a '-' counts only as a sign, not after a word or digit ("3-4" is two numbers) */
        int sign_ok = *p == '-' && (p == text || !isalnum((unsigned char)p[-1]));
        if ((isdigit((unsigned char)*p) && (p == text || !isdigit((unsigned char)p[-1]))) ||
            sign_ok) {
            const char *e = scan_number(p);
            if (e != p) {
                best = p;
                bend = e;
                p = e;
                continue;
            }
        }
        p++;
    }
    if (!best)
        return 0;
    copy_trimmed(best, (size_t)(bend - best), out, cap);
    return 1;
}

int swift_reward_extract_answer(const char *text, int reference, char *out, size_t cap)
{
    if (!cap)
        return 0;
    out[0] = 0;
    if (!text)
        return 0;
    if (reference) {
        const char *h = NULL, *p = text;
        while ((p = strstr(p, "####")) != NULL)
            h = p, p += 4;
        if (h) {
            copy_trimmed(h + 4, strlen(h + 4), out, cap);
            return out[0] != 0;
        }
    }
    if (last_boxed(text, out, cap) || last_number(text, out, cap))
        return 1;
    if (reference)
        copy_trimmed(text, strlen(text), out, cap);
    return out[0] != 0;
}

/* An unsigned decimal "123", "1,234.5" at *pp: its value, *pp past it; 0 if none. */
static int parse_decimal(const char **pp, double *v)
{
    char digits[64];
    size_t k = 0;
    const char *p = *pp;
    if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1])))
        return 0;
    while (isdigit((unsigned char)*p) || *p == '.' ||
           (*p == ',' && isdigit((unsigned char)p[1]) && k)) {
        if (*p != ',') {
            if (k + 1 >= sizeof digits)
                return 0;
            digits[k++] = *p;
        }
        p++;
    }
    digits[k] = 0;
    char *end;
    errno = 0;
    *v = strtod(digits, &end);
    if (*end || errno)
        return 0;
    *pp = p;
    return 1;
}

static const char *skip_blank(const char *p)
{
    while (isspace((unsigned char)*p))
        p++;
    return p;
}

/* "\frac{a}{b}" (dfrac, tfrac) at p: 1, *v = a / b and *pp past it. */
static int parse_frac(const char **pp, double *v)
{
    const char *p = *pp;
    static const char *const names[] = {"\\frac{", "\\dfrac{", "\\tfrac{"};
    size_t n = 0;
    for (size_t i = 0; i < 3 && !n; i++)
        if (strncmp(p, names[i], strlen(names[i])) == 0)
            n = strlen(names[i]);
    if (!n)
        return 0;
    double a, b;
    p = skip_blank(p + n);
    if (!parse_decimal(&p, &a))
        return 0;
    p = skip_blank(p);
    if (strncmp(p, "}{", 2) != 0)
        return 0;
    p = skip_blank(p + 2);
    if (!parse_decimal(&p, &b) || b == 0)
        return 0;
    p = skip_blank(p);
    if (*p != '}')
        return 0;
    *v = a / b;
    *pp = p + 1;
    return 1;
}

int swift_reward_parse_number(const char *s, double *v)
{
    const char *p = skip_blank(s);
    int neg = 0;
    if (*p == '-')
        neg = 1, p = skip_blank(p + 1);
    if (*p == '$')
        p = skip_blank(p + 1);
    if (*p == '-' && !neg)
        neg = 1, p = skip_blank(p + 1);
    double x;
    if (!parse_frac(&p, &x)) {
        if (!parse_decimal(&p, &x))
            return 0;
        if (*p == '/') {
            double d;
            p++;
            if (!parse_decimal(&p, &d) || d == 0)
                return 0;
            x /= d;
        }
    }
    if (*p == '%' || *p == '.')
        p++;
    if (*skip_blank(p))
        return 0;
    *v = neg ? -x : x;
    return isfinite(*v);
}

/* A string without whitespace and '$' (the fallback comparison). */
static void squeeze(const char *s, char *out, size_t cap)
{
    size_t k = 0;
    for (; *s && k + 1 < cap; s++)
        if (!isspace((unsigned char)*s) && *s != '$')
            out[k++] = *s;
    out[k] = 0;
}

double swift_reward_accuracy(const char *completion, const char *reference)
{
    char want[SWIFT_REWARD_ANSWER_MAX], got[SWIFT_REWARD_ANSWER_MAX];
    if (!swift_reward_extract_answer(reference, 1, want, sizeof want) ||
        !swift_reward_extract_answer(completion, 0, got, sizeof got))
        return 0;
    double a, b;
    if (swift_reward_parse_number(want, &a) && swift_reward_parse_number(got, &b))
        return fabs(a - b) <= fmax(1e-6, 1e-9 * fabs(a)) ? 1 : 0; /* six decimals */
    char sw[SWIFT_REWARD_ANSWER_MAX], sg[SWIFT_REWARD_ANSWER_MAX];
    squeeze(want, sw, sizeof sw);
    squeeze(got, sg, sizeof sg);
    return sw[0] && strcmp(sw, sg) == 0 ? 1 : 0;
}

double swift_reward_soft_overlong(long n, long max_len, long cache_len)
{
    if (cache_len <= 0)
        return n <= max_len ? 0 : -1;
    long expected = max_len - cache_len;
    if (n <= expected)
        return 0;
    if (n <= max_len)
        return (double)(expected - n) / (double)cache_len;
    return -1;
}

int swift_reward_parse_reply(const char *line, size_t len, double *v)
{
    char tmp[128];
    while (len && isspace((unsigned char)*line))
        line++, len--;
    while (len && isspace((unsigned char)line[len - 1]))
        len--;
    if (!len || len >= sizeof tmp)
        return 0;
    memcpy(tmp, line, len);
    tmp[len] = 0;
    char *end;
    errno = 0;
    double x = strtod(tmp, &end);
    if (end != tmp + len || errno == ERANGE || !isfinite(x))
        return 0;
    *v = x;
    return 1;
}

/* ---------------------------------------------------------------- programs */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Wait up to `wait_s` for pid; 1 if reaped (status in *st), 0 if still running. */
static int reap_within(pid_t pid, double wait_s, int *st)
{
    double end = now_s() + wait_s;
    for (;;) {
        pid_t r = waitpid(pid, st, WNOHANG);
        if (r == pid || (r < 0 && errno != EINTR))
            return 1;
        if (now_s() >= end)
            return 0;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* Close the pipes, then stdin's EOF, SIGTERM, SIGKILL (the process group), each with a grace. */
static void prog_stop(struct prog *pr)
{
    if (pr->in >= 0)
        close(pr->in);
    if (pr->out >= 0)
        close(pr->out);
    pr->in = pr->out = -1;
    if (pr->pid > 0) {
        int st;
        if (!reap_within(pr->pid, 0.2, &st)) {
            kill(-pr->pid, SIGTERM);
            if (!reap_within(pr->pid, 2.0, &st)) {
                kill(-pr->pid, SIGKILL);
                while (waitpid(pr->pid, &st, 0) < 0 && errno == EINTR)
                    ;
            }
        }
    }
    pr->pid = 0;
}

static int prog_start(struct prog *pr)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return swift_error_errno("reward program '%s': pipe", pr->command);
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        return swift_error_errno("reward program '%s': pipe", pr->command);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        errno = e;
        return swift_error_errno("reward program '%s': fork", pr->command);
    }
    if (pid == 0) {
        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
            _exit(127);
        execl("/bin/sh", "sh", "-c", pr->command, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid); /* both sides, so a kill of the group cannot race the child's own call */
    close(in[0]);
    close(out[1]);
    pr->pid = pid;
    pr->in = in[1];
    pr->out = out[0];
    fcntl(pr->in, F_SETFL, fcntl(pr->in, F_GETFL) | O_NONBLOCK);
    pr->len = 0;
    return 0;
}

static const char *row_where(const struct swift_reward_row *row)
{
    return row->where ? row->where : "-";
}

/* The program has gone or misbehaved: report with the row, stop it, -1. */
static int prog_fail(struct prog *pr, const struct swift_reward_row *row, size_t r,
                     const char *what)
{
    int st = 0;
    char how[96];
    if (!what && pr->pid > 0 && reap_within(pr->pid, 1.0, &st)) {
        if (WIFEXITED(st))
            snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(st));
        else if (WIFSIGNALED(st))
            snprintf(how, sizeof how, "was killed by signal %d", WTERMSIG(st));
        else
            snprintf(how, sizeof how, "stopped");
        pr->pid = 0;
        what = how;
    } else if (!what) {
        what = "closed its output";
    }
    swift_error("reward program '%s': row %zu (%s): %s", pr->command, r, row_where(row), what);
    pr->failed = 1;
    prog_stop(pr);
    return -1;
}

/* s as a JSON string; invalid UTF-8 (a completion cut inside a character) becomes U+FFFD, as
 * Python's decode(errors="replace") does, so a program always gets the key. */
static json_t *json_text(const char *s)
{
    json_t *j = json_string(s ? s : "");
    if (j)
        return j;
    size_t n = strlen(s), k = 0;
    char *fix = malloc(3 * n + 1);
    if (!fix)
        return NULL;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t len =
            utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (len <= 0 || cp == 0) {
            memcpy(fix + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i++;
        } else {
            memcpy(fix + k, s + i, (size_t)len);
            k += (size_t)len;
            i += (size_t)len;
        }
    }
    fix[k] = 0;
    j = json_string(fix);
    free(fix);
    return j;
}

/* The batch as JSON lines into *out (malloc'd); -1 after reporting. */
static int batch_lines(const struct swift_reward_row *rows, size_t n, char **out, size_t *len)
{
    size_t cap = 4096, k = 0;
    char *b = malloc(cap);
    if (!b)
        return swift_error("out of memory");
    for (size_t r = 0; r < n; r++) {
        json_t *o = json_object();
        if (rows[r].extra && json_is_object(rows[r].extra))
            json_object_update(o, rows[r].extra);
        json_object_set_new(o, "prompt", json_text(rows[r].prompt));
        json_object_set_new(o, "completion", json_text(rows[r].completion));
        char *s = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
        json_decref(o);
        if (!s) {
            free(b);
            return swift_error(
                "row %zu (%s): cannot encode as JSON (invalid UTF-8?)", r, row_where(&rows[r]));
        }
        size_t sl = strlen(s);
        if (k + sl + 1 > cap) {
            while (k + sl + 1 > cap)
                cap *= 2;
            char *nb = realloc(b, cap);
            if (!nb) {
                free(s);
                free(b);
                return swift_error("out of memory");
            }
            b = nb;
        }
        memcpy(b + k, s, sl);
        b[k + sl] = '\n';
        k += sl + 1;
        free(s);
    }
    *out = b;
    *len = k;
    return 0;
}

/* Take complete reply lines from pr->buf into score[*got...]; -1 after reporting garbage. */
static int take_replies(struct prog *pr, const struct swift_reward_row *rows, size_t n,
                        double *score, size_t *got)
{
    size_t start = 0;
    for (;;) {
        char *nl = memchr(pr->buf + start, '\n', pr->len - start);
        if (!nl)
            break;
        size_t ll = (size_t)(nl - (pr->buf + start));
        if (*got >= n) {
            return prog_fail(pr, &rows[n - 1], n - 1, "wrote more lines than rows");
        }
        if (!swift_reward_parse_reply(pr->buf + start, ll, &score[*got])) {
            char what[160];
            int show = ll > 60 ? 60 : (int)ll;
            snprintf(what,
                     sizeof what,
                     "wrote '%.*s%s', not a number",
                     show,
                     pr->buf + start,
                     ll > 60 ? "..." : "");
            return prog_fail(pr, &rows[*got], *got, what);
        }
        (*got)++;
        start += ll + 1;
    }
    memmove(pr->buf, pr->buf + start, pr->len - start);
    pr->len -= start;
    return 0;
}

static int read_some(struct prog *pr)
{
    if (pr->cap - pr->len < 4096) {
        size_t ncap = pr->cap ? pr->cap * 2 : 8192;
        if (ncap > (64u << 20))
            return -2;
        char *nb = realloc(pr->buf, ncap);
        if (!nb)
            return -2;
        pr->buf = nb;
        pr->cap = ncap;
    }
    ssize_t k = read(pr->out, pr->buf + pr->len, pr->cap - pr->len);
    if (k > 0)
        pr->len += (size_t)k;
    return k < 0 && errno == EINTR ? 1 : (int)(k > 0);
}

/* Write the batch and read its replies, interleaved; -1 after reporting. */
static int prog_exchange(struct prog *pr, double timeout_s, const struct swift_reward_row *rows,
                         size_t n, const char *req, size_t reqlen, double *score)
{
    size_t sent = 0, got = 0;
    double deadline = now_s() + timeout_s;
    while (got < n) {
        struct pollfd fds[2] = {{pr->out, POLLIN, 0}, {pr->in, POLLOUT, 0}};
        int nf = sent < reqlen ? 2 : 1;
        double left = deadline - now_s();
        if (left <= 0) {
            char what[96];
            snprintf(what, sizeof what, "no reply within %g s", timeout_s);
            return prog_fail(pr, &rows[got], got, what);
        }
        int k = poll(fds, (nfds_t)nf, (int)(left * 1000) + 1);
        if (k < 0 && errno != EINTR)
            return swift_error_errno("reward program '%s': poll", pr->command);
        if (k <= 0)
            continue;
        if (nf == 2 && (fds[1].revents & (POLLOUT | POLLERR))) {
            ssize_t w = write(pr->in, req + sent, reqlen - sent);
            if (w > 0)
                sent += (size_t)w;
            else if (w < 0 && errno == EPIPE)
                return prog_fail(pr, &rows[got], got, NULL);
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            int r = read_some(pr);
            if (r == -2)
                return prog_fail(pr, &rows[got], got, "reply line too long");
            if (r == 0)
                return prog_fail(pr, &rows[got], got, NULL);
            size_t before = got;
            if (take_replies(pr, rows, n, score, &got) < 0)
                return -1;
            if (got > before)
                deadline = now_s() + timeout_s;
        }
    }
    return 0;
}

static int prog_score(struct prog *pr, double timeout_s, const struct swift_reward_row *rows,
                      size_t n, double *score)
{
    if (pr->failed || pr->pid <= 0)
        return swift_error("reward program '%s' has stopped after an earlier error", pr->command);
    /* between batches the program must be silent and alive */
    struct pollfd pf = {pr->out, POLLIN, 0};
    if (poll(&pf, 1, 0) > 0) {
        int r = read_some(pr);
        if (r == 0)
            return prog_fail(pr, &rows[0], 0, NULL);
    }
    if (pr->len)
        return prog_fail(pr, &rows[0], 0, "wrote before the batch (more lines than rows?)");
    char *req = NULL;
    size_t reqlen = 0;
    if (batch_lines(rows, n, &req, &reqlen) < 0)
        return -1;
    /* a program that has exited makes write() raise SIGPIPE: take EPIPE instead */
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int rc = prog_exchange(pr, timeout_s, rows, n, req, reqlen, score);
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) > 0)
        ;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    free(req);
    return rc;
}

/* ---------------------------------------------------------------- the set */

struct swift_reward_set *swift_reward_set_new(const struct swift_reward_config *cfg)
{
    if (cfg->timeout_s <= 0 || !isfinite(cfg->timeout_s)) {
        swift_error("reward timeout must be > 0 seconds, got %g", cfg->timeout_s);
        return NULL;
    }
    if (cfg->max_completion_length <= 0 || cfg->cache_length < 0 ||
        cfg->cache_length > cfg->max_completion_length) {
        swift_error("length reward: need 0 <= cache length (%ld) <= max completion length (%ld)",
                    cfg->cache_length,
                    cfg->max_completion_length);
        return NULL;
    }
    struct swift_reward_set *rs = calloc(1, sizeof *rs);
    if (!rs) {
        swift_error("out of memory");
        return NULL;
    }
    rs->answer_column = cfg->answer_column ? strdup(cfg->answer_column) : NULL;
    rs->max_len = cfg->max_completion_length;
    rs->cache_len = cfg->cache_length;
    rs->timeout_s = cfg->timeout_s;
    const char *pat = cfg->format_pattern ? cfg->format_pattern : SWIFT_REWARD_FORMAT_DEFAULT;
    int err;
    PCRE2_SIZE off;
    rs->re = pcre2_compile(
        (PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_DOTALL | PCRE2_MULTILINE, &err, &off, NULL);
    if (!rs->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        swift_error("format pattern '%s': at offset %zu: %s", pat, (size_t)off, (char *)msg);
        swift_reward_set_free(rs);
        return NULL;
    }
    rs->md = pcre2_match_data_create_from_pattern(rs->re, NULL);
    return rs;
}

static struct func *add_func(struct swift_reward_set *rs, enum kind kind, const char *name,
                             double w)
{
    if (rs->n >= SWIFT_REWARD_MAX) {
        swift_error("too many reward functions (at most %d)", SWIFT_REWARD_MAX);
        return NULL;
    }
    if (!isfinite(w)) {
        swift_error("reward '%s': weight must be a finite number", name);
        return NULL;
    }
    struct func *f = &rs->f[rs->n];
    memset(f, 0, sizeof *f);
    f->kind = kind;
    f->w = w;
    f->prog.in = f->prog.out = -1;
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

int swift_reward_add(struct swift_reward_set *rs, const char *name, double w)
{
    static const char *const names[] = {"accuracy", "format", "length"};
    for (int k = 0; k < 3; k++) {
        if (strcmp(name, names[k]) == 0) {
            if (!add_func(rs, (enum kind)k, name, w))
                return -1;
            rs->n++;
            return 0;
        }
    }
    return swift_error("unknown reward function '%s' (accuracy, format, length)", name);
}

int swift_reward_add_cmd(struct swift_reward_set *rs, const char *command, double w)
{
    char name[16];
    if (rs->ncmd)
        snprintf(name, sizeof name, "cmd%d", rs->ncmd + 1);
    else
        snprintf(name, sizeof name, "cmd");
    struct func *f = add_func(rs, R_CMD, name, w);
    if (!f)
        return -1;
    f->prog.command = strdup(command);
    if (!f->prog.command)
        return swift_error("out of memory");
    if (prog_start(&f->prog) < 0) {
        free(f->prog.command);
        f->prog.command = NULL;
        return -1;
    }
    rs->n++;
    rs->ncmd++;
    return 0;
}

int swift_reward_set_weights(struct swift_reward_set *rs, const char *list)
{
    double w[SWIFT_REWARD_MAX];
    int k = 0;
    const char *p = list;
    for (;;) {
        char *end;
        errno = 0;
        double x = strtod(p, &end);
        if (end == p || errno || !isfinite(x) || (*end && *end != ',' && !isspace(*end)))
            return swift_error("--reward-weights '%s': not a list of numbers", list);
        if (k == SWIFT_REWARD_MAX || k == rs->n)
            return swift_error(
                "--reward-weights '%s': more weights than reward functions (%d)", list, rs->n);
        w[k++] = x;
        p = skip_blank(end);
        if (!*p)
            break;
        if (*p != ',')
            return swift_error("--reward-weights '%s': not a list of numbers", list);
        p++;
    }
    if (k != rs->n)
        return swift_error(
            "--reward-weights '%s': %d weights for %d reward functions", list, k, rs->n);
    for (int i = 0; i < k; i++)
        rs->f[i].w = w[i];
    return 0;
}

int swift_reward_count(const struct swift_reward_set *rs)
{
    return rs->n;
}

const char *swift_reward_name(const struct swift_reward_set *rs, int i)
{
    return i >= 0 && i < rs->n ? rs->f[i].name : NULL;
}

double swift_reward_weight(const struct swift_reward_set *rs, int i)
{
    return i >= 0 && i < rs->n ? rs->f[i].w : 0;
}

pid_t swift_reward_pid(const struct swift_reward_set *rs, int i)
{
    return i >= 0 && i < rs->n && rs->f[i].kind == R_CMD ? rs->f[i].prog.pid : 0;
}

static const char *reference_of(const struct swift_reward_set *rs,
                                const struct swift_reward_row *row)
{
    json_t *v = NULL;
    if (row->extra && json_is_object(row->extra)) {
        if (rs->answer_column) {
            v = json_object_get(row->extra, rs->answer_column);
        } else {
            v = json_object_get(row->extra, "answer");
            if (!v)
                v = json_object_get(row->extra, "solution");
        }
    }
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* One built-in over the rows into score[0..n); -1 after reporting. */
static int builtin_score(struct swift_reward_set *rs, enum kind kind,
                         const struct swift_reward_row *rows, size_t n, double *score)
{
    for (size_t r = 0; r < n; r++) {
        const char *c = rows[r].completion ? rows[r].completion : "";
        if (kind == R_ACCURACY) {
            const char *ref = reference_of(rs, &rows[r]);
            if (!ref || !*skip_blank(ref))
                return swift_error("accuracy reward: row %zu (%s): no '%s' column (a string)",
                                   r,
                                   row_where(&rows[r]),
                                   rs->answer_column ? rs->answer_column : "answer");
            score[r] = swift_reward_accuracy(c, ref);
        } else if (kind == R_FORMAT) {
            int m = pcre2_match(rs->re, (PCRE2_SPTR)c, strlen(c), 0, PCRE2_ANCHORED, rs->md, NULL);
            if (m < 0 && m != PCRE2_ERROR_NOMATCH) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(m, msg, sizeof msg);
                return swift_error(
                    "format reward: row %zu (%s): %s", r, row_where(&rows[r]), (char *)msg);
            }
            score[r] = m >= 0 ? 1 : 0;
        } else {
            if (rows[r].completion_tokens < 0)
                return swift_error(
                    "length reward: row %zu (%s): no completion length", r, row_where(&rows[r]));
            score[r] =
                swift_reward_soft_overlong(rows[r].completion_tokens, rs->max_len, rs->cache_len);
        }
    }
    return 0;
}

int swift_reward_score(struct swift_reward_set *rs, const struct swift_reward_row *rows, size_t n,
                       double *total, double *per)
{
    if (!n)
        return 0;
    double *score = malloc(n * sizeof *score);
    if (!score)
        return swift_error("out of memory");
    for (size_t r = 0; r < n; r++)
        total[r] = 0;
    for (int i = 0; i < rs->n; i++) {
        struct func *f = &rs->f[i];
        int64_t t0 = swift_trace_now();
        int rc = f->kind == R_CMD ? prog_score(&f->prog, rs->timeout_s, rows, n, score)
                                  : builtin_score(rs, f->kind, rows, n, score);
        char span[48];
        snprintf(span, sizeof(span), "reward.%s", f->name);
        swift_trace_span("compute",
                         span,
                         t0,
                         swift_trace_now(),
                         (struct swift_targ[]){SWIFT_TARG_S("function", f->name),
                                               SWIFT_TARG_I("program", f->kind == R_CMD)},
                         2);
        if (rc < 0) {
            free(score);
            return -1;
        }
        for (size_t r = 0; r < n; r++) {
            total[r] += f->w * score[r];
            if (per)
                per[(size_t)i * n + r] = score[r];
        }
    }
    free(score);
    return 0;
}

void swift_reward_set_free(struct swift_reward_set *rs)
{
    if (!rs)
        return;
    for (int i = 0; i < rs->n; i++) {
        if (rs->f[i].kind == R_CMD) {
            prog_stop(&rs->f[i].prog);
            free(rs->f[i].prog.command);
            free(rs->f[i].prog.buf);
        }
    }
    pcre2_match_data_free(rs->md);
    pcre2_code_free(rs->re);
    free(rs->answer_column);
    free(rs);
}
